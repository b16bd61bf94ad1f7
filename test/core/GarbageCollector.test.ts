import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Layer, Logger, References, Scope } from "effect"
import * as TestDiscovery from "../../src/adapters/testing/TestDiscovery.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import * as DiscoveryServer from "../../src/core/server/DiscoveryServer.ts"
import * as GarbageCollector from "../../src/core/server/GarbageCollector.ts"
import { gcCounts, record, settle, updateRequest, utf8 } from "./fixtures/discovery.ts"

interface LogLine {
  readonly level: string
  readonly message: Record<string, unknown>
}

/** A logger that keeps the GC's log lines (fields from the message or the annotations), with Debug enabled. */
const capture = () => {
  const lines: Array<LogLine> = []
  const logger = Logger.make((options) => {
    const message = options.message
    const parts = Array.isArray(message) ? message : [message]
    if (parts[0] !== "garbage collection run") return
    const annotations = options.fiber.getRef(References.CurrentLogAnnotations)
    lines.push({ level: options.logLevel, message: { ...annotations, ...(parts[1] as object | undefined) } })
  })
  const layer = Layer.mergeAll(Logger.layer([logger]), Layer.succeed(References.MinimumLogLevel, "Debug"))
  return { lines, layer }
}

describe("GarbageCollector", () => {
  describe("runOnce", () => {
    it.effect("returns what it removed and logs it at Info with the current counts", () => {
      const { lines, layer } = capture()
      return Effect.gen(function* () {
        const state = yield* ClusterState
        yield* state.update(updateRequest({ clusterId: "c1", affiliateId: "old", ttl: Duration.seconds(1) }))
        yield* state.update(updateRequest({ clusterId: "c2", affiliateId: "new", ttl: Duration.minutes(1) }))
        yield* TestDiscovery.advance("2 seconds")
        const report = yield* GarbageCollector.runOnce
        assert.deepStrictEqual(gcCounts(report), { removedClusters: 1, removedAffiliates: 1, trimmedAffiliates: 0 })
        assert.deepStrictEqual(lines, [
          {
            level: "Info",
            message: {
              removed_clusters: 1,
              removed_affiliates: 1,
              trimmed_affiliates: 0,
              current_clusters: 1,
              current_affiliates: 1,
              current_endpoints: 0,
              current_subscriptions: 0
            }
          }
        ])
      }).pipe(Effect.provide(TestDiscovery.layer()), Effect.provide(layer))
    })

    it.effect("logs at Debug when nothing was removed", () => {
      const { lines, layer } = capture()
      return Effect.gen(function* () {
        const report = yield* GarbageCollector.runOnce
        assert.deepStrictEqual(gcCounts(report), { removedClusters: 0, removedAffiliates: 0, trimmedAffiliates: 0 })
        assert.deepStrictEqual(
          lines.map((line) => line.level),
          ["Debug"]
        )
      }).pipe(Effect.provide(TestDiscovery.layer()), Effect.provide(layer))
    })
  })

  describe("layer", () => {
    it.effect("collects once right away and then once per interval", () => {
      const { lines, layer } = capture()
      return Effect.gen(function* () {
        yield* settle
        assert.strictEqual(lines.length, 1)
        yield* TestDiscovery.advance("999 millis")
        assert.strictEqual(lines.length, 1)
        yield* TestDiscovery.advance("1 millis")
        assert.strictEqual(lines.length, 2)
        yield* TestDiscovery.advance("3 seconds")
        assert.strictEqual(lines.length, 5)
      }).pipe(Effect.provide(TestDiscovery.layer({ gcInterval: "1 second" })), Effect.provide(layer))
    })

    it.effect("removes expired affiliates on its own and tells watchers", () =>
      Effect.gen(function* () {
        const state = yield* ClusterState
        yield* state.update(updateRequest({ affiliateId: "short", data: utf8("s"), ttl: Duration.millis(1500) }))
        yield* state.update(updateRequest({ affiliateId: "long", data: utf8("l"), ttl: Duration.minutes(1) }))
        const watcher = yield* record(state, "c1")
        yield* TestDiscovery.advance("1 second")
        assert.strictEqual((yield* state.stats).affiliates, 2)
        yield* TestDiscovery.advance("1 second")
        yield* settle
        assert.deepStrictEqual(
          (yield* state.list({ clusterId: "c1" })).map((a) => a.id),
          ["long"]
        )
        assert.deepStrictEqual(watcher.events.slice(1), [{ _tag: "Deleted", revision: 3, affiliateId: "short" }])
      }).pipe(Effect.provide(TestDiscovery.layer({ gcInterval: "1 second" })))
    )

    it.effect("runs the original's default of once a minute in the full core layer", () =>
      Effect.gen(function* () {
        const state = yield* ClusterState
        yield* state.update(updateRequest({ ttl: Duration.seconds(1) }))
        yield* TestDiscovery.advance("59 seconds")
        assert.strictEqual((yield* state.stats).affiliates, 1)
        yield* TestDiscovery.advance("1 second")
        assert.strictEqual((yield* state.stats).affiliates, 0)
      }).pipe(Effect.provide(DiscoveryServer.layer()))
    )

    it.effect("stops when its scope closes", () => {
      const { lines, layer } = capture()
      return Effect.gen(function* () {
        const scope = yield* Scope.make()
        yield* Layer.buildWithScope(TestDiscovery.layer({ gcInterval: "1 second" }), scope)
        yield* settle
        yield* TestDiscovery.advance("2 seconds")
        assert.strictEqual(lines.length, 3)
        yield* Scope.close(scope, Exit.void)
        yield* TestDiscovery.advance("5 seconds")
        assert.strictEqual(lines.length, 3)
      }).pipe(Effect.provide(layer))
    })

    it.effect("leaves expired entries alone in the test layer until runGc is called", () =>
      Effect.gen(function* () {
        const state = yield* ClusterState
        yield* state.update(updateRequest({ ttl: Duration.seconds(1) }))
        yield* TestDiscovery.advance("10 minutes")
        assert.strictEqual((yield* state.stats).affiliates, 1)
        assert.strictEqual((yield* TestDiscovery.runGc).removedAffiliates, 1)
        assert.strictEqual((yield* state.stats).affiliates, 0)
      }).pipe(Effect.provide(TestDiscovery.layer()))
    )
  })
})
