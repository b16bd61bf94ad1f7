/**
 * Several instances on one real Redis: three cores, each on its own Redis
 * backend (own connections, own change feed) with the same key prefix, as
 * three processes would be. Changes made through any instance reach the
 * watchers of every instance in the same order, and an expiry swept by all
 * three at once is announced exactly once.
 */
import { randomUUID } from "node:crypto"
import { Context, Duration, Effect, Layer } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { assert, describe, it } from "@effect/vitest"
import { RedisBackend } from "../../../src/adapters/redis/index.ts"
import { ClusterState } from "../../../src/core/server/ClusterState.ts"
import * as DiscoveryServer from "../../../src/core/server/DiscoveryServer.ts"
import type { AffiliateView, WatchDelta } from "../../../src/ports/ClusterApi.ts"
import { ClusterApi } from "../../../src/ports/ClusterApi.ts"
import { StateBackend } from "../../../src/ports/StateBackend.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests()

const caps = { maxClusters: 1_000_000, maxWatches: 100_000 }

/** One instance: a core on its own backend, sharing `keyPrefix` with the others. */
const instance = (keyPrefix: string) =>
  Effect.gen(function* () {
    const backend = yield* RedisBackend.make({ url: redis.server.url, keyPrefix, caps })
    const context = yield* Layer.build(
      DiscoveryServer.layer({
        gcInterval: "disabled",
        state: ClusterState.layerOnBackend.pipe(Layer.provide(Layer.succeed(StateBackend, backend)))
      })
    )
    return { api: Context.get(context, ClusterApi), state: Context.get(context, ClusterState) }
  })

type Instance = Effect.Success<ReturnType<typeof instance>>

/** A watcher that records what it receives. */
const recorder = (on: Instance, clusterId: string) =>
  Effect.gen(function* () {
    const deltas: Array<WatchDelta> = []
    const ended: Array<string> = []
    const snapshot = yield* on.api.subscribe!(
      { clusterId },
      { offer: (delta) => deltas.push(delta) > 0, end: (error) => ended.push(error.message) }
    )
    if (snapshot._tag !== "Snapshot") throw new Error("a watch without a resume point started resumed")
    return { snapshot, deltas, ended }
  })

const replay = (start: ReadonlyArray<AffiliateView>, deltas: ReadonlyArray<WatchDelta>) => {
  const view = new Map(start.map((affiliate) => [affiliate.id, affiliate]))
  for (const delta of deltas) {
    if (delta._tag === "Updated") view.set(delta.affiliate.id, delta.affiliate)
    else view.delete(delta.affiliateId)
  }
  return view
}

const show = (affiliates: Iterable<AffiliateView>) =>
  [...affiliates]
    .map(
      (a) => `${a.id}:${Buffer.from(a.data).toString("hex")}:${a.endpoints.map((e) => Buffer.from(e).toString("hex"))}`
    )
    .sort()

/** Real time (not the test clock's): what the instances read from Redis arrives meanwhile. */
const pause = (millis: number) => Effect.promise(() => new Promise((resolve) => setTimeout(resolve, millis)))

const waitFor = (check: () => boolean, what: string) =>
  Effect.gen(function* () {
    for (let i = 0; i < 400; i++) {
      if (check()) return
      yield* pause(10)
    }
    assert.fail(`timed out waiting until ${what}`)
  })

type Operation =
  | {
      readonly _tag: "update"
      readonly via: number
      readonly id: number
      readonly data: number
      readonly endpoint: number
      readonly ttlSeconds: number
    }
  | { readonly _tag: "delete"; readonly via: number; readonly id: number }
  | { readonly _tag: "advance"; readonly seconds: number }
  | { readonly _tag: "expire" }

const operation: fc.Arbitrary<Operation> = fc.oneof(
  fc.record({
    _tag: fc.constant("update" as const),
    via: fc.integer({ min: 0, max: 2 }),
    id: fc.integer({ min: 0, max: 5 }),
    data: fc.integer({ min: 0, max: 3 }),
    endpoint: fc.integer({ min: 0, max: 4 }),
    ttlSeconds: fc.integer({ min: 1, max: 10 })
  }),
  fc.record({
    _tag: fc.constant("delete" as const),
    via: fc.integer({ min: 0, max: 2 }),
    id: fc.integer({ min: 0, max: 5 })
  }),
  fc.record({ _tag: fc.constant("advance" as const), seconds: fc.integer({ min: 1, max: 6 }) }),
  fc.constant({ _tag: "expire" as const })
)

/** One operation; `expire` has all three instances sweep at once. */
const apply = (
  instances: ReadonlyArray<Instance>,
  clusterId: string,
  op: Operation
): Effect.Effect<unknown, unknown> => {
  switch (op._tag) {
    case "update":
      return instances[op.via]!.api.affiliateUpdate({
        clusterId,
        affiliateId: `af${op.id}`,
        data: op.data === 0 ? undefined : Uint8Array.of(op.data),
        endpoints: [new Uint8Array(16).fill(op.endpoint)],
        ttl: Duration.seconds(op.ttlSeconds)
      })
    case "delete":
      return instances[op.via]!.api.affiliateDelete({ clusterId, affiliateId: `af${op.id}` })
    case "advance":
      return TestClock.adjust(Duration.seconds(op.seconds))
    case "expire":
      return Effect.all(
        instances.map((on) => on.state.collectGarbage),
        { concurrency: "unbounded" }
      )
  }
}

describe("several instances on one Redis", () => {
  it.live(
    "random interleavings of updates, deletes and expiries through three instances: same sequence everywhere, replay equals the final list",
    () =>
      Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.array(operation, { minLength: 1, maxLength: 30 }), async (operations) =>
            Effect.runPromise(
              Effect.scoped(
                Effect.gen(function* () {
                  const prefix = `multi-${randomUUID()}:`
                  const instances = yield* Effect.all([instance(prefix), instance(prefix), instance(prefix)])
                  const clusterId = `c-${randomUUID()}`
                  const watchers = yield* Effect.all(instances.map((on) => recorder(on, clusterId)))
                  for (const op of operations) yield* apply(instances, clusterId, op)
                  const final = yield* instances[0]!.api.list({ clusterId })
                  const finalRevision = (w: (typeof watchers)[number]) =>
                    w.deltas.length === 0 ? w.snapshot.revision : w.deltas[w.deltas.length - 1]!.revision
                  const expected = show(final)
                  const caughtUp = (w: (typeof watchers)[number]) =>
                    show(replay(w.snapshot.affiliates, w.deltas).values()).join() === expected.join()
                  yield* waitFor(() => watchers.every(caughtUp), "every watcher replays to the final list")
                  yield* pause(100)
                  for (const w of watchers) {
                    assert.deepStrictEqual(w.ended, [])
                    assert.deepStrictEqual(show(replay(w.snapshot.affiliates, w.deltas).values()), expected)
                    assert.deepStrictEqual(
                      w.deltas.map((d) => d.revision),
                      w.deltas.map((_, i) => w.snapshot.revision + i + 1),
                      "contiguous revisions"
                    )
                  }
                  const sequences = watchers.map((w) =>
                    w.deltas.map(
                      (d) => `${d.revision}:${d._tag === "Updated" ? show([d.affiliate])[0] : `-${d.affiliateId}`}`
                    )
                  )
                  assert.deepStrictEqual(sequences[1], sequences[0])
                  assert.deepStrictEqual(sequences[2], sequences[0])
                  assert.strictEqual(finalRevision(watchers[0]!), finalRevision(watchers[1]!))
                })
              ).pipe(Effect.provide(TestClock.layer()))
            )
          ),
          { numRuns: 15 }
        )
      ),
    120_000
  )

  it.live(
    "an expiry swept by three instances at once is applied and announced exactly once",
    () =>
      Effect.gen(function* () {
        const prefix = `multi-${randomUUID()}:`
        const instances = yield* Effect.all([instance(prefix), instance(prefix), instance(prefix)])
        const clusterId = `c-${randomUUID()}`
        const watchers = yield* Effect.all(instances.map((on) => recorder(on, clusterId)))
        for (let i = 0; i < 20; i++) {
          yield* instances[i % 3]!.api.affiliateUpdate({
            clusterId,
            affiliateId: `af${i}`,
            data: Uint8Array.of(i),
            endpoints: [],
            ttl: Duration.millis(i < 10 ? 50 : 60_000)
          })
        }
        yield* Effect.sleep("100 millis")
        const reports = yield* Effect.all(
          instances.map((on) => on.state.collectGarbage),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(
          reports.reduce((sum, report) => sum + report.removedAffiliates, 0),
          10,
          "each expired affiliate removed once, by whichever instance got there"
        )
        yield* waitFor(
          () => watchers.every((w) => w.deltas.length === 30),
          "every watcher saw 20 updates and 10 deletes"
        )
        yield* Effect.sleep("50 millis")
        for (const w of watchers) {
          assert.strictEqual(w.deltas.length, 30)
          const deleted = w.deltas
            .filter((d) => d._tag === "Deleted")
            .map((d) => (d._tag === "Deleted" ? d.affiliateId : ""))
          assert.deepStrictEqual([...deleted].sort(), Array.from({ length: 10 }, (_, i) => `af${i}`).sort())
        }
        assert.strictEqual((yield* instances[1]!.api.list({ clusterId })).length, 10)
      }).pipe(Effect.scoped),
    30_000
  )
})
