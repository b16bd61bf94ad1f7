/**
 * FLUSHALL (or anything else that empties Redis under a running instance)
 * is noticed within about a second: the open watchers of the instance are
 * cut off, so they come back to a fresh snapshot; no new watch is served the
 * flushed affiliates and no resume crosses the flush (issue 22). Their
 * watches end counted as the backend's doing, not as falling behind.
 */
import { Effect, Exit, Metric, Scope } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { command, directConnection, eventually, instanceOn, recordingSink, updateOf } from "./fixtures/backendState.ts"
import { redisForTests } from "./redisServer.ts"
import { watchEndingsTotal } from "../../../src/core/server/changeReport.ts"
import type { WatchEndCause } from "../../../src/ports/ChangeCause.ts"

const redis = redisForTests()

const endings = (cause: WatchEndCause) =>
  Effect.map(Metric.value(Metric.withAttributes(watchEndingsTotal, { cause })), (state) => state.count)

describe("Redis emptied under a running instance", () => {
  it.live("open watchers are cut off, new watches and resumes start from the empty state", () =>
    Effect.gen(function* () {
      const { state } = yield* instanceOn(redis.server.url)
      const clusterId = "flushed"
      for (const id of ["a", "b", "c"]) yield* state.update(updateOf(clusterId, id))
      const open = recordingSink()
      const openScope = yield* Scope.make()
      const unavailable = yield* endings("backend_unavailable")
      const cutOff = yield* endings("cut_off")
      const start = yield* state.subscribe({ clusterId }, open.sink).pipe(Scope.provide(openScope))
      assert.strictEqual(start._tag, "Snapshot")
      const before = { epoch: start._tag === "Snapshot" ? start.epoch! : "", revision: start.revision }

      const probe = yield* directConnection(redis.server.url)
      yield* command(probe, "FLUSHALL")
      assert.deepStrictEqual(yield* state.list({ clusterId }), [])

      yield* eventually(() => open.ended.length > 0, "the open watcher was cut off", 3000)
      // its watch ended because the backend lost its sequence, not because it fell behind
      yield* Scope.close(openScope, Exit.void)
      assert.deepStrictEqual(
        [(yield* endings("backend_unavailable")) - unavailable, (yield* endings("cut_off")) - cutOff],
        [1, 0]
      )
      const fresh = yield* Effect.scoped(state.subscribe({ clusterId }, recordingSink().sink))
      assert.strictEqual(fresh._tag, "Snapshot")
      if (fresh._tag === "Snapshot") assert.deepStrictEqual(fresh.affiliates, [])
      const resumed = yield* Effect.scoped(state.subscribe({ clusterId, resume: before }, recordingSink().sink))
      assert.strictEqual(resumed._tag, "Snapshot", "no resume across the flush")
      if (resumed._tag === "Snapshot") assert.notStrictEqual(resumed.epoch, before.epoch)
    }).pipe(Effect.scoped)
  )
})
