/**
 * Under Redis Cluster the index of clusters is kept by the instance right
 * after each change script, not in it. An instance that dies between the two
 * leaves the cluster out of the index; the GC pass that reconciles the index
 * with the clusters' keys (the first, then every tenth) puts it back, so its
 * affiliates still expire, and sets the counts behind the gauges to what the
 * clusters hold (they drift when a failover loses writes, issue 22). Real
 * Redis Cluster of 3 primaries.
 */
import { randomUUID } from "node:crypto"
import { Duration, Effect } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { RedisBackend } from "../../../src/adapters/redis/index.ts"
import { keyspace } from "../../../src/adapters/redis/keys.ts"
import { RedisConnection } from "../../../src/adapters/redis/RedisConnection.ts"
import { redisClusterForTests } from "./redisServer.ts"

const redis = redisClusterForTests(3)

describe("the index of clusters under Redis Cluster", () => {
  it.live("a cluster left out of the index is put back by the next reconciling GC pass, and expires", () =>
    Effect.gen(function* () {
      const keyPrefix = `index-${randomUUID()}:`
      const caps = { maxClusters: 100, maxWatches: 100 }
      const backend = yield* RedisBackend.make({ url: redis.cluster.url, cluster: true, keyPrefix, caps })
      const probe = new RedisConnection({ url: redis.cluster.url, cluster: true }, "index-probe")
      yield* Effect.promise(() => probe.connect())
      yield* Effect.addFinalizer(() => Effect.sync(() => probe.close()))
      const now = 1_800_000_000_000
      const ids = ["lost {one}", "kept%two", "third"]
      for (const clusterId of ids) {
        yield* backend.update(
          { clusterId, affiliateId: "af1", data: Uint8Array.of(1), endpoints: [], ttl: Duration.seconds(1) },
          now + 1000
        )
      }
      const index = keyspace(keyPrefix).index
      yield* Effect.promise(() => probe.send(["ZREM", index, "lost {one}"], index))
      assert.strictEqual(Number(yield* Effect.promise(() => probe.send(["ZCARD", index], index))), 2)
      const report = yield* backend.collectGarbage(now + 5000)
      assert.strictEqual(report.removedAffiliates, 3, "every expired affiliate went, the lost cluster's too")
      for (const clusterId of ids) assert.deepStrictEqual(yield* backend.list(clusterId), [])
      assert.strictEqual(Number(yield* Effect.promise(() => probe.send(["ZCARD", index], index))), 0)
    }).pipe(Effect.scoped)
  )

  it.live("the counts behind the gauges, wrong after a loss, are what the clusters hold after a reconciling pass", () =>
    Effect.gen(function* () {
      const keyPrefix = `counts-${randomUUID()}:`
      const caps = { maxClusters: 100, maxWatches: 100 }
      const backend = yield* RedisBackend.make({ url: redis.cluster.url, cluster: true, keyPrefix, caps })
      const probe = new RedisConnection({ url: redis.cluster.url, cluster: true }, "counts-probe")
      yield* Effect.promise(() => probe.connect())
      yield* Effect.addFinalizer(() => Effect.sync(() => probe.close()))
      const now = 1_800_000_000_000
      for (const [clusterId, endpoints] of [
        ["one", 2],
        ["two {x}", 1],
        ["three", 0]
      ] as const) {
        for (const affiliateId of ["a", "b"]) {
          yield* backend.update(
            {
              clusterId,
              affiliateId,
              data: Uint8Array.of(1),
              endpoints: Array.from({ length: endpoints }, (_, i) => Uint8Array.of(i + 1)),
              ttl: Duration.minutes(10)
            },
            now + 600_000
          )
        }
      }
      const counts = keyspace(keyPrefix).counts
      yield* Effect.promise(() => probe.send(["HSET", counts, "affiliates", "1", "endpoints", "-2"], counts))
      yield* backend.collectGarbage(now)
      yield* backend.refreshStats
      const stats = yield* backend.stats
      assert.strictEqual(stats.affiliates, 6)
      assert.strictEqual(stats.endpoints, 6)
      assert.strictEqual(stats.clusters, 3)
    }).pipe(Effect.scoped)
  )
})
