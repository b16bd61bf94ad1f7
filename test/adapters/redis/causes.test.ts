/**
 * Every cause of a change, produced by a scenario under `TestClock` on both
 * backends (memory, and Redis), and asserted in the three places that say
 * it: the debug log line, the counter by cause, and the cluster's history
 * as the inspect page shows it. Watch endings too: client gone, cut off,
 * shutdown, and a backend that ends a watch as unavailable.
 */
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Layer, Logger, Metric, References, Scope } from "effect"
import { TestClock } from "effect/testing"
import { inspectPage } from "../../../src/adapters/http/pages.ts"
import { RedisBackend } from "../../../src/adapters/redis/index.ts"
import { changesTotal, watchEndingsTotal } from "../../../src/core/server/changeReport.ts"
import * as ClusterState from "../../../src/core/server/ClusterState.ts"
import { ClusterStore } from "../../../src/core/server/ClusterStore.ts"
import * as MemoryBackend from "../../../src/core/server/MemoryBackend.ts"
import type { ChangeCause, WatchEndCause } from "../../../src/ports/ChangeCause.ts"
import type { WatchSink } from "../../../src/ports/ClusterApi.ts"
import { Unavailable } from "../../../src/ports/DiscoveryError.ts"
import type { StateBackendShape } from "../../../src/ports/StateBackend.ts"
import { endpoint, updateRequest, utf8 } from "../../core/fixtures/discovery.ts"
import { redisForTests, restartHeld } from "./redisServer.ts"

const redis = redisForTests()
const caps = { maxClusters: 100, maxWatches: 100 }
const client = Uint8Array.of(10, 1, 2, 3)

interface Line {
  readonly message: string
  readonly fields: Record<string, unknown>
}

/** A logger that keeps the lines of changes and watch endings, with Debug enabled. */
const capture = () => {
  const lines: Array<Line> = []
  const logger = Logger.make((options) => {
    const parts = Array.isArray(options.message) ? options.message : [options.message]
    const fields = options.fiber.getRef(References.CurrentLogAnnotations) as Record<string, unknown>
    if (typeof fields.cause === "string") lines.push({ message: String(parts[0]), fields })
  })
  return { lines, layer: Layer.mergeAll(Logger.layer([logger]), Layer.succeed(References.MinimumLogLevel, "Debug")) }
}

const changeCount = (cause: ChangeCause) =>
  Effect.map(Metric.value(Metric.withAttributes(changesTotal, { cause })), (state) => state.count)
const endingCount = (cause: WatchEndCause) =>
  Effect.map(Metric.value(Metric.withAttributes(watchEndingsTotal, { cause })), (state) => state.count)

/** A watcher that takes every change (or refuses them all: it is then cut off at the first). */
const sink = (refuse = false): WatchSink & { ended?: string } => {
  const watcher: WatchSink & { ended?: string } = {
    offer: () => !refuse,
    end: (error) => {
      watcher.ended = error._tag
    }
  }
  return watcher
}

/** Lets the Redis feed and its releases run (real time, not the test clock). */
const settle = Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))

const backends: ReadonlyArray<{
  readonly name: string
  readonly make: Effect.Effect<StateBackendShape, never, Scope.Scope>
}> = [
  { name: "memory", make: Effect.sync(() => MemoryBackend.make(new ClusterStore(caps))) },
  {
    name: "redis",
    make: Effect.suspend(() =>
      RedisBackend.make({ url: redis.server.url, keyPrefix: `causes-${randomUUID()}:`, caps, instanceName: "i1" })
    )
  }
]

describe.each(backends)("causes of changes, on the $name backend", ({ name, make }) => {
  it.live(
    "each cause shows in its log line, its counter and the cluster's history",
    () => {
      const { lines, layer } = capture()
      return Effect.gen(function* () {
        const state = yield* ClusterState.makeOn(yield* make, undefined)
        const counted = yield* Effect.forEach(
          ["created", "data_changed", "endpoints_added", "ttl_refreshed", "endpoint_expired"] as const,
          changeCount
        )
        const clusterId = `c-${name}`
        const at = (fields: Partial<Parameters<typeof updateRequest>[0]>) =>
          updateRequest({ clusterId, clientAddress: client, ...fields })
        // a watcher from the start: the memory backend keeps a watched cluster's history
        const watchScope = yield* Scope.make()
        yield* state.subscribe({ clusterId }, sink()).pipe(Scope.provide(watchScope))
        const start = yield* Clock.currentTimeMillis
        yield* state.update(at({ affiliateId: "a1", data: utf8("d1"), endpoints: [endpoint(1)] }))
        yield* TestClock.adjust(Duration.seconds(10))
        yield* state.update(at({ affiliateId: "a1", data: utf8("d1"), endpoints: [endpoint(1)] }))
        yield* state.update(at({ affiliateId: "a1", data: utf8("d2") }))
        yield* state.update(at({ affiliateId: "a1", endpoints: [endpoint(2)], ttl: Duration.seconds(5) }))
        yield* TestClock.adjust(Duration.seconds(6))
        yield* state.collectGarbage
        yield* state.update(at({ affiliateId: "a2", ttl: Duration.seconds(1) }))
        yield* TestClock.adjust(Duration.seconds(2))
        yield* state.collectGarbage
        yield* state.delete({ clusterId, affiliateId: "a1", clientAddress: client })

        const history = yield* state.history({ clusterId })
        const shown = history.map((change) => `${change.revision} ${change.affiliateId} ${change.cause}`)
        assert.deepStrictEqual(shown, [
          "7 a1 deleted",
          "6 a2 affiliate_expired",
          "5 a2 created",
          "4 a1 endpoint_expired",
          "3 a1 endpoints_added",
          "2 a1 data_changed",
          "1 a1 created"
        ])
        const byCause = new Map(history.map((change) => [change.cause, change] as const))
        const created = byCause.get("created")!
        assert.strictEqual(created.at, start)
        assert.strictEqual(created.ttlMillis, 60_000)
        assert.strictEqual(created.expiresAt, start + 60_000)
        assert.strictEqual(created.endpoints, 1)
        assert.deepStrictEqual(created.clientAddress, client)
        assert.strictEqual(byCause.get("data_changed")!.leftMillis, 60_000, "refreshed at +10 s to +70 s")
        assert.strictEqual(byCause.get("endpoints_added")!.endpoints, 1)
        const trimmed = byCause.get("endpoint_expired")!
        assert.strictEqual(trimmed.expiresAt, start + 15_000)
        assert.strictEqual(trimmed.endpoints, 1)
        assert.strictEqual(byCause.get("affiliate_expired")!.expiresAt, start + 17_000)
        const deleted = byCause.get("deleted")!
        assert.strictEqual(deleted.at, start + 18_000)
        assert.deepStrictEqual(deleted.clientAddress, client)
        if (name === "redis") assert.isTrue(history.every((change) => change.instance === "i1"))

        // the refresh has no revision: it is in the log lines and the counter, not the history
        const logged = lines.filter((line) => line.fields.cluster_id === clusterId)
        assert.deepStrictEqual(
          logged.map((line) => `${line.message}: ${line.fields.affiliate_id} ${line.fields.cause}`),
          [
            "affiliate created: a1 created",
            "affiliate TTL refreshed: a1 ttl_refreshed",
            "affiliate data changed: a1 data_changed",
            "affiliate endpoints added: a1 endpoints_added",
            "affiliate endpoints expired: a1 endpoint_expired",
            "affiliate created: a2 created",
            "affiliate expired: a2 affiliate_expired",
            "affiliate deleted: a1 deleted"
          ]
        )
        const refresh = logged[1]!.fields
        assert.strictEqual(refresh.left_ms, 50_000)
        assert.strictEqual(refresh.ttl_ms, 60_000)
        assert.strictEqual(refresh.client_ip, "10.1.2.3")
        assert.isUndefined(refresh.revision)
        assert.strictEqual(logged[0]!.fields.revision, 1)
        assert.strictEqual(logged[0]!.fields.expires_at, new Date(start + 60_000).toISOString())
        for (const line of logged) assert.notProperty(line.fields, "data")
        const after = yield* Effect.forEach(
          ["created", "data_changed", "endpoints_added", "ttl_refreshed", "endpoint_expired"] as const,
          changeCount
        )
        assert.deepStrictEqual(
          after.map((count, i) => count - counted[i]!),
          [2, 1, 1, 1, 1]
        )

        // the inspect page shows the history, newest first, without the client's address
        const page = inspectPage(clusterId, { _tag: "Cluster", affiliates: [], history })
        const causes = [...page.matchAll(/<td class="cause"[^>]*>([a-z_]+)</g)].map((match) => match[1])
        assert.deepStrictEqual(causes, [
          "deleted",
          "affiliate_expired",
          "created",
          "endpoint_expired",
          "endpoints_added",
          "data_changed",
          "created"
        ])
        assert.notInclude(page, "10.1.2.3")
        if (name === "redis") assert.notInclude(page, ">i1<")

        // the watcher leaves: its client is gone, and the cluster, empty and unwatched, is dropped
        const gone = yield* endingCount("client_gone")
        const dropped = yield* changeCount("cluster_dropped")
        yield* Scope.close(watchScope, Exit.void)
        yield* settle
        yield* state.collectGarbage
        assert.strictEqual((yield* endingCount("client_gone")) - gone, 1)
        assert.strictEqual((yield* changeCount("cluster_dropped")) - dropped, 1)
        const ended = lines.find((line) => line.message === "watch ended" && line.fields.cluster_id === clusterId)
        assert.strictEqual(ended?.fields.cause, "client_gone")
        assert.isDefined(
          lines.find((line) => line.fields.cause === "cluster_dropped" && line.fields.cluster_id === clusterId)
        )
      }).pipe(Effect.scoped, Effect.provide(Layer.mergeAll(TestClock.layer(), layer)))
    },
    30_000
  )

  it.live(
    "a watcher that falls behind ends cut off, and open watches end with the instance",
    () =>
      Effect.gen(function* () {
        const cutOff = yield* endingCount("cut_off")
        const shutdown = yield* endingCount("shutdown")
        const clusterId = `w-${name}`
        const outer = yield* Scope.make()
        const state = yield* ClusterState.makeOn(yield* make.pipe(Scope.provide(outer)), undefined).pipe(
          Scope.provide(outer)
        )
        const slow = sink(true)
        const steady = sink()
        const slowScope = yield* Scope.make()
        const steadyScope = yield* Scope.make()
        yield* state.subscribe({ clusterId }, slow).pipe(Scope.provide(slowScope))
        yield* state.subscribe({ clusterId }, steady).pipe(Scope.provide(steadyScope))
        yield* state.update(updateRequest({ clusterId }))
        for (let i = 0; i < 50 && slow.ended === undefined; i++) yield* settle
        assert.strictEqual(slow.ended, "SubscriptionLost")
        yield* Scope.close(slowScope, Exit.void)
        assert.strictEqual((yield* endingCount("cut_off")) - cutOff, 1)
        // the instance stops: its open watches end, then their transports let go of them
        yield* Scope.close(outer, Exit.void)
        assert.strictEqual(steady.ended, "Unavailable")
        yield* Scope.close(steadyScope, Exit.void)
        assert.strictEqual((yield* endingCount("shutdown")) - shutdown, 1)
      }).pipe(Effect.provide(TestClock.layer())),
    30_000
  )
})

describe("causes of watch endings", () => {
  it.effect("a backend that ends a watch as unavailable counts it as such", () =>
    Effect.gen(function* () {
      const before = yield* endingCount("backend_unavailable")
      const memory = MemoryBackend.make(new ClusterStore(caps))
      const failing: StateBackendShape = {
        ...memory,
        subscribe: (clusterId, watcher, resume) =>
          Effect.tap(memory.subscribe(clusterId, watcher, resume), () =>
            Effect.sync(() => watcher.end(new Unavailable({ message: "state backend unavailable: gone" })))
          )
      }
      const state = yield* ClusterState.makeOn(failing, undefined)
      yield* Effect.scoped(state.subscribe({ clusterId: "c1" }, sink()))
      assert.strictEqual((yield* endingCount("backend_unavailable")) - before, 1)
    }).pipe(Effect.scoped)
  )
})

/** Instances of the service on one Redis under one key prefix, each named as its changes say. */
const instancesOn = (prefix: string) => (instanceName: string) =>
  Effect.flatMap(RedisBackend.make({ url: redis.server.url, keyPrefix: prefix, caps, instanceName }), (backend) =>
    ClusterState.makeOn(backend, undefined)
  )

describe("causes with several instances on one Redis", () => {
  it.live(
    "a change is logged once, by the instance that applied it, and every instance reads the same history",
    () => {
      const first = capture()
      const second = capture()
      return Effect.gen(function* () {
        const on = instancesOn(`instances-${randomUUID()}:`)
        const one = yield* on("one")
        const two = yield* on("two")
        const clusterId = "shared"
        yield* one
          .update(updateRequest({ clusterId, affiliateId: "a1", ttl: Duration.seconds(1) }))
          .pipe(Effect.provide(first.layer))
        yield* TestClock.adjust(Duration.seconds(2))
        yield* two.collectGarbage.pipe(Effect.provide(second.layer))
        yield* one.collectGarbage.pipe(Effect.provide(first.layer))
        const histories = [yield* one.history({ clusterId }), yield* two.history({ clusterId })]
        assert.deepStrictEqual(histories[0], histories[1])
        assert.deepStrictEqual(
          histories[0]!.map((change) => `${change.affiliateId} ${change.cause} by ${change.instance}`),
          ["a1 affiliate_expired by two", "a1 created by one"]
        )
        const causes = (lines: ReadonlyArray<Line>) =>
          lines.filter((line) => line.fields.cluster_id === clusterId).map((line) => `${line.fields.cause}`)
        assert.deepStrictEqual(causes(first.lines), ["created"])
        assert.deepStrictEqual(causes(second.lines), ["affiliate_expired", "cluster_dropped"])
      }).pipe(Effect.scoped, Effect.provide(TestClock.layer()))
    },
    30_000
  )

  it.live(
    "a cluster emptied while another instance watches it is dropped once, when that watcher leaves",
    () => {
      const watching = capture()
      const sweeping = capture()
      return Effect.gen(function* () {
        const on = instancesOn(`watched-${randomUUID()}:`)
        const one = yield* on("one")
        const two = yield* on("two")
        const clusterId = "held"
        const watchScope = yield* Scope.make()
        yield* one.subscribe({ clusterId }, sink()).pipe(Scope.provide(watchScope))
        yield* one.update(updateRequest({ clusterId, affiliateId: "a1", ttl: Duration.seconds(1) }))
        yield* TestClock.adjust(Duration.seconds(2))
        yield* two.collectGarbage.pipe(Effect.provide(sweeping.layer))
        const dropped = (lines: ReadonlyArray<Line>) =>
          lines.filter((line) => line.fields.cluster_id === clusterId && line.fields.cause === "cluster_dropped").length
        assert.strictEqual(dropped(sweeping.lines), 0, "still watched by one")
        yield* Scope.close(watchScope, Exit.void).pipe(Effect.provide(watching.layer))
        for (let i = 0; i < 20; i++) {
          yield* settle
          yield* one.collectGarbage.pipe(Effect.provide(watching.layer))
          if (dropped(watching.lines) > 0) break
        }
        yield* two.collectGarbage.pipe(Effect.provide(sweeping.layer))
        assert.deepStrictEqual([dropped(watching.lines), dropped(sweeping.lines)], [1, 0])
      }).pipe(Effect.scoped, Effect.provide(TestClock.layer()))
    },
    30_000
  )
})

describe("causes when Redis fails a GC pass", () => {
  it.live(
    "the changes a failed pass held are reported by the next one",
    () => {
      const { lines, layer } = capture()
      return Effect.gen(function* () {
        const state = yield* ClusterState.makeOn(
          yield* RedisBackend.make({ url: redis.server.url, keyPrefix: `failed-${randomUUID()}:`, caps }),
          undefined
        )
        const clusterId = "let-go"
        const watchScope = yield* Scope.make()
        yield* state.subscribe({ clusterId }, sink()).pipe(Scope.provide(watchScope))
        yield* Scope.close(watchScope, Exit.void)
        yield* settle
        // the watcher let go of the empty cluster; Redis goes away before a pass reports it
        yield* Effect.promise(() => redis.server.stop(true))
        const failed = yield* Effect.exit(state.collectGarbage)
        assert.isTrue(Exit.isFailure(failed))
        yield* Effect.promise(() => restartHeld(redis))
        let reported = 0
        for (let i = 0; i < 100 && reported === 0; i++) {
          yield* settle
          const pass = yield* Effect.exit(state.collectGarbage)
          if (Exit.isSuccess(pass)) {
            reported = lines.filter(
              (line) => line.fields.cluster_id === clusterId && line.fields.cause === "cluster_dropped"
            ).length
          }
        }
        assert.strictEqual(reported, 1)
      }).pipe(Effect.scoped, Effect.provide(layer))
    },
    60_000
  )
})
