/**
 * Epochs on Redis: a cluster whose revisions start over (its meta expired,
 * or Redis lost its data) gets a new epoch, even when the same instance makes
 * it again, so a watcher never resumes onto a sequence it did not see.
 */
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { RedisBackend } from "../../../src/adapters/redis/index.ts"
import { keyspace } from "../../../src/adapters/redis/keys.ts"
import { RedisConnection } from "../../../src/adapters/redis/RedisConnection.ts"
import { makeOn } from "../../../src/core/server/ClusterState.ts"
import type { WatchSink } from "../../../src/ports/ClusterApi.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests()

const sink: WatchSink = { offer: () => true, end: () => undefined }

describe("epochs on Redis", () => {
  it.live("a cluster made again by the same instance after its revisions were lost gets a new epoch", () =>
    Effect.gen(function* () {
      const keyPrefix = `epochs-${randomUUID()}:`
      const caps = { maxClusters: 100, maxWatches: 100 }
      const state = yield* makeOn(yield* RedisBackend.make({ url: redis.server.url, keyPrefix, caps }), undefined)
      const update = state.update({ clusterId: "c", affiliateId: "a", endpoints: [], ttl: Duration.minutes(1) })
      const startOf = Effect.scoped(state.subscribe({ clusterId: "c" }, sink))

      yield* update
      const before = yield* startOf
      assert.strictEqual(before.revision, 1)

      // what a Redis that lost the cluster's keys holds
      const connection = new RedisConnection({ url: redis.server.url }, "epochs-test")
      yield* Effect.promise(() => connection.connect())
      const keys = keyspace(keyPrefix).cluster("c")
      yield* Effect.promise(() => connection.send(["DEL", ...keys.own], keys.affiliates))
      connection.close()

      yield* Effect.orDie(update)
      const after = yield* startOf
      assert.strictEqual(after.revision, 1)
      assert.notStrictEqual(after.epoch, before.epoch)
      // and a watcher that asks to resume from the lost sequence gets a snapshot
      const resumed = yield* Effect.scoped(
        state.subscribe({ clusterId: "c", resume: { epoch: before.epoch!, revision: 1 } }, sink)
      )
      assert.strictEqual(resumed._tag, "Snapshot")
    }).pipe(Effect.scoped)
  )
})
