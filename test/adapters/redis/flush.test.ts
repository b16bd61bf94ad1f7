/**
 * FLUSHALL (or anything else that empties Redis under a running instance)
 * is noticed within about a second: the open watchers of the instance are
 * cut off, so they come back to a fresh snapshot; no new watch is served the
 * flushed affiliates and no resume crosses the flush (issue 22).
 */
import { Effect } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { command, directConnection, eventually, instanceOn, recordingSink, updateOf } from "./fixtures/backendState.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests()

describe("Redis emptied under a running instance", () => {
  it.live("open watchers are cut off, new watches and resumes start from the empty state", () =>
    Effect.gen(function* () {
      const { state } = yield* instanceOn(redis.server.url)
      const clusterId = "flushed"
      for (const id of ["a", "b", "c"]) yield* state.update(updateOf(clusterId, id))
      const open = recordingSink()
      const start = yield* state.subscribe({ clusterId }, open.sink)
      assert.strictEqual(start._tag, "Snapshot")
      const before = { epoch: start._tag === "Snapshot" ? start.epoch! : "", revision: start.revision }

      const probe = yield* directConnection(redis.server.url)
      yield* command(probe, "FLUSHALL")
      assert.deepStrictEqual(yield* state.list({ clusterId }), [])

      yield* eventually(() => open.ended.length > 0, "the open watcher was cut off", 3000)
      const fresh = yield* Effect.scoped(state.subscribe({ clusterId }, recordingSink().sink))
      assert.strictEqual(fresh._tag, "Snapshot")
      if (fresh._tag === "Snapshot") assert.deepStrictEqual(fresh.affiliates, [])
      const resumed = yield* Effect.scoped(state.subscribe({ clusterId, resume: before }, recordingSink().sink))
      assert.strictEqual(resumed._tag, "Snapshot", "no resume across the flush")
      if (resumed._tag === "Snapshot") assert.notStrictEqual(resumed.epoch, before.epoch)
    }).pipe(Effect.scoped)
  )
})
