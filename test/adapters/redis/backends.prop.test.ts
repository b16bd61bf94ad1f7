/**
 * The Redis backend against the memory backend, as a property: the same
 * random operations (updates with random data, endpoints and TTLs, deletes,
 * time steps on `TestClock`, GC passes), issued one at a time to both, give
 * the same outcome for each call, the same lists after every step, and the
 * same sequence of changes to a watcher of each cluster; and each
 * backend's history of a cluster, while it holds every change, replays to
 * the cluster's list, with the same causes on both.
 */
import { randomUUID } from "node:crypto"
import { Duration, Effect, Exit } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { assert, describe, it } from "@effect/vitest"
import { RedisBackend } from "../../../src/adapters/redis/index.ts"
import * as ClusterStateModule from "../../../src/core/server/ClusterState.ts"
import type { ChangeRecord } from "../../../src/ports/ChangeCause.ts"
import type { AffiliateView, WatchDelta } from "../../../src/ports/ClusterApi.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests()

const caps = { maxClusters: 1000, maxWatches: 1000 }
const clusters = ["c0", "c1"]

type Step =
  | {
      readonly _tag: "update"
      readonly cluster: number
      readonly id: number
      readonly data: number
      readonly endpoints: ReadonlyArray<number>
      readonly ttlSeconds: number
    }
  | { readonly _tag: "delete"; readonly cluster: number; readonly id: number }
  | { readonly _tag: "advance"; readonly seconds: number }
  | { readonly _tag: "gc" }

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      _tag: fc.constant("update" as const),
      cluster: fc.integer({ min: 0, max: 1 }),
      id: fc.integer({ min: 0, max: 3 }),
      data: fc.integer({ min: 0, max: 3 }),
      endpoints: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 3 }),
      ttlSeconds: fc.integer({ min: 1, max: 30 })
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("delete" as const),
      cluster: fc.integer({ min: 0, max: 1 }),
      id: fc.integer({ min: 0, max: 3 })
    })
  },
  {
    weight: 2,
    arbitrary: fc.record({ _tag: fc.constant("advance" as const), seconds: fc.integer({ min: 1, max: 20 }) })
  },
  { weight: 2, arbitrary: fc.constant({ _tag: "gc" as const }) }
)

const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")
const showView = (a: AffiliateView) => `${a.id}:${hex(a.data)}:${a.endpoints.map(hex).join("+")}`
const showList = (list: ReadonlyArray<AffiliateView>) => list.map(showView).sort()
const showDelta = (d: WatchDelta) =>
  `${d.revision} ${d._tag === "Updated" ? showView(d.affiliate) : `-${d.affiliateId}`}`

/** Lets the Redis feed deliver what it read (real time, not the test clock). */
const settle = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 30)))

const run = (steps: ReadonlyArray<Step>) =>
  Effect.gen(function* () {
    const memory = yield* ClusterStateModule.make(caps)
    const backend = yield* RedisBackend.make({ url: redis.server.url, keyPrefix: `prop-${randomUUID()}:`, caps })
    const onRedis = yield* ClusterStateModule.makeOn(backend, undefined)
    const states = [memory, onRedis] as const
    const seen = states.map(() => clusters.map(() => [] as Array<string>))
    /** Where each GC pass's changes start and end in the memory watchers' lists. */
    const passes: Array<ReadonlyArray<readonly [number, number]>> = []
    for (const [s, state] of states.entries()) {
      for (const [c, clusterId] of clusters.entries()) {
        yield* state.subscribe(
          { clusterId },
          {
            offer: (delta) => seen[s]![c]!.push(showDelta(delta)) > 0,
            end: (error) => void seen[s]![c]!.push(`end ${error._tag}`)
          }
        )
      }
    }
    for (const [i, current] of steps.entries()) {
      if (current._tag === "advance") {
        yield* TestClock.adjust(Duration.seconds(current.seconds))
        continue
      }
      const outcomes = []
      const before = seen[0]!.map((deltas) => deltas.length)
      for (const state of states) {
        const effect =
          current._tag === "update"
            ? state.update({
                clusterId: clusters[current.cluster]!,
                affiliateId: `af${current.id}`,
                data: current.data === 0 ? undefined : Uint8Array.of(current.data),
                endpoints: current.endpoints.map((e) => new Uint8Array(16).fill(e)),
                ttl: Duration.seconds(current.ttlSeconds)
              })
            : current._tag === "delete"
              ? state.delete({ clusterId: clusters[current.cluster]!, affiliateId: `af${current.id}` })
              : Effect.map(state.collectGarbage, (report) => report.removedAffiliates + report.trimmedAffiliates)
        const exit = yield* Effect.exit(effect)
        outcomes.push(Exit.isSuccess(exit) ? `ok ${String(exit.value ?? "")}` : `failed ${String(exit.cause)}`)
      }
      assert.strictEqual(outcomes[1], outcomes[0], `step ${i} (${JSON.stringify(current)})`)
      if (current._tag === "gc") passes.push(seen[0]!.map((deltas, c) => [before[c]!, deltas.length] as const))
      for (const clusterId of clusters) {
        const lists = []
        for (const state of states) lists.push(showList(yield* state.list({ clusterId })))
        assert.deepStrictEqual(lists[1], lists[0], `list of ${clusterId} after step ${i} (${JSON.stringify(current)})`)
      }
    }
    for (let i = 0; i < 50 && seen[1]!.some((deltas, c) => deltas.length < seen[0]![c]!.length); i++) yield* settle
    yield* settle
    const inPassOrder = (lists: ReadonlyArray<Array<string>>) =>
      lists.map((deltas, c) => {
        const ordered = [...deltas]
        for (const pass of passes) {
          const [from, to] = pass[c]!
          const changes = ordered
            .slice(from, to)
            .map((d) => d.slice(d.indexOf(" ") + 1))
            .sort()
          ordered.splice(from, to - from, ...changes.map((change, k) => `${from + k + 1} ${change}`))
        }
        return ordered
      })
    assert.deepStrictEqual(inPassOrder(seen[1]!), inPassOrder(seen[0]!), "the watchers saw the same changes")
    for (const clusterId of clusters) {
      const causes: Array<ReadonlyArray<string>> = []
      for (const state of states) {
        const history = yield* state.history({ clusterId })
        // while the history holds every change of the cluster, it replays to its list
        if (history.length === 0 || history.at(-1)!.revision !== 1 || history.length >= historyHeld) continue
        const listed = new Map((yield* state.list({ clusterId })).map((a) => [a.id, a.endpoints.length] as const))
        assert.deepStrictEqual(replay(history), listed, `${clusterId}: ${history.map(showChange).join(", ")}`)
        causes.push(history.map((change) => `${change.affiliateId} ${change.cause}`).sort())
      }
      if (causes.length === 2) assert.deepStrictEqual(causes[1], causes[0], `the causes of ${clusterId}'s changes`)
    }
  }).pipe(Effect.scoped, Effect.provide(TestClock.layer()))

/** Fewer changes than both backends keep in a history (64). */
const historyHeld = 64

const showChange = (change: ChangeRecord) => `${change.revision} ${change.affiliateId} ${change.cause}`

/** The affiliates (with their endpoint counts) a history's changes leave, oldest first, from an empty cluster. */
const replay = (history: ReadonlyArray<ChangeRecord>): Map<string, number> => {
  const held = new Map<string, number>()
  for (const change of [...history].reverse()) {
    const id = change.affiliateId!
    const endpoints = change.endpoints ?? 0
    assert.strictEqual(change.cause === "created", !held.has(id), `${showChange(change)} of a known affiliate or not`)
    switch (change.cause) {
      case "created":
        held.set(id, endpoints)
        break
      case "data_changed":
      case "endpoints_added":
        held.set(id, held.get(id)! + endpoints)
        break
      case "endpoint_expired":
        held.set(id, held.get(id)! - endpoints)
        break
      case "deleted":
      case "affiliate_expired":
        held.delete(id)
        break
    }
  }
  return held
}

describe("Redis backend against the memory backend", () => {
  it.live(
    "the same operations one at a time give the same outcomes, lists and watch deltas",
    () =>
      Effect.promise(() =>
        fc.assert(
          fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 40 }), (steps) => Effect.runPromise(run(steps))),
          {
            numRuns: 25,
            // Two affiliates expiring in one GC pass, the second created first.
            examples: [
              [
                [
                  { _tag: "update", cluster: 0, id: 1, data: 0, endpoints: [], ttlSeconds: 1 },
                  { _tag: "update", cluster: 0, id: 0, data: 0, endpoints: [], ttlSeconds: 1 },
                  { _tag: "advance", seconds: 2 },
                  { _tag: "gc" },
                  { _tag: "delete", cluster: 0, id: 0 }
                ]
              ],
              // An endpoint that expires before its affiliate, which a later update kept alive.
              [
                [
                  { _tag: "update", cluster: 1, id: 0, data: 1, endpoints: [1, 2], ttlSeconds: 1 },
                  { _tag: "update", cluster: 1, id: 0, data: 2, endpoints: [], ttlSeconds: 30 },
                  { _tag: "advance", seconds: 2 },
                  { _tag: "gc" }
                ]
              ]
            ]
          }
        )
      ),
    120_000
  )
})
