/**
 * A Redis restart ends the instance's watches (UNAVAILABLE) and forgets
 * their mirrors, channel listeners included: once the connections are back,
 * nothing listens to the channel of a cluster nobody watches any more, so
 * restarts do not pile up listeners and mirrors (issue 22).
 */
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { keyspace } from "../../../src/adapters/redis/keys.ts"
import {
  command,
  directConnection,
  eventually,
  instanceOn,
  killAndRestart,
  pause,
  recordingSink,
  updateOf
} from "./fixtures/backendState.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests()

describe("watches across a Redis restart", () => {
  it.live("the watch ends, and its channel has no listener once the instance is connected again", () =>
    Effect.gen(function* () {
      const keyPrefix = `restart-${randomUUID()}:`
      const { backend, state } = yield* instanceOn(redis.server.url, { keyPrefix })
      const clusterId = "watched"
      yield* state.update(updateOf(clusterId, "a"))
      const watcher = recordingSink()
      yield* state.subscribe({ clusterId }, watcher.sink)

      yield* killAndRestart(redis)
      yield* eventually(() => watcher.ended.length > 0, "the watch ended")
      assert.include(watcher.ended[0]!, "Unavailable")
      yield* eventually(() => backend.available!(), "the backend reconnected", 10_000)
      // a second cluster watched afterwards brings the notifications' connection back
      yield* state.subscribe({ clusterId: "after" }, recordingSink().sink)
      yield* pause(300)

      const probe = yield* directConnection(redis.server.url)
      const channel = keyspace(keyPrefix).cluster(clusterId).channel
      const reply = (yield* command(probe, "PUBSUB", "SHARDNUMSUB", channel)) as ReadonlyArray<unknown>
      assert.strictEqual(Number(reply[1]), 0, "no listener left on the unwatched cluster's channel")
      assert.strictEqual((yield* backend.stats).watches, 1)
    }).pipe(Effect.scoped)
  )
})
