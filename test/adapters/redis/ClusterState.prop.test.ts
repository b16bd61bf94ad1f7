/**
 * The core's property tests of the cluster state (the reference model of
 * `test/core/fixtures/stateModel.ts`: random interleavings of updates,
 * deletes, expiries, GC runs and watches that stop reading, checked after
 * every step) on the Redis backend, against a real `redis-server`. Where
 * Redis differs by design its profile says so: changes reach watchers
 * asynchronously (the runner waits until the feed has handed on every change
 * Redis holds), a GC pass changes a cluster's affiliates by due time, and a
 * cluster keeps its revisions after it empties.
 */
import { randomUUID } from "node:crypto"
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { RedisBackend } from "../../../src/adapters/redis/index.ts"
import { makeOn } from "../../../src/core/server/ClusterState.ts"
import { actionsArb, runCase, type StateUnderTest, stoppedReaderIsCutOff } from "../../core/fixtures/stateModel.ts"
import { redisProfile } from "./profile.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests()

const onRedis: StateUnderTest = (caps) =>
  Effect.gen(function* () {
    const backend = yield* RedisBackend.make({ url: redis.server.url, keyPrefix: `model-${randomUUID()}:`, caps })
    const state = yield* makeOn(backend, undefined)
    const profile = redisProfile([backend])
    return { state, profile }
  })

describe("ClusterState properties on Redis", () => {
  it("keeps watchers, List and the reference model in agreement over random interleavings", { timeout: 120_000 }, () =>
    fc.assert(
      fc.asyncProperty(actionsArb, async (actions) => {
        await runCase(actions, {}, onRedis)
      }),
      { numRuns: 120, seed: 0x5eed, timeout: 10_000 }
    )
  )

  it("never exceeds small caps on clusters and watches, and refusals change nothing", { timeout: 120_000 }, () =>
    fc.assert(
      fc.asyncProperty(actionsArb, async (actions) => {
        await runCase(actions, { maxClusters: 2, maxWatches: 3 }, onRedis)
      }),
      { numRuns: 120, seed: 0xca95, timeout: 10_000 }
    )
  )

  it("cuts off a stopped watcher after more than 32 unread events while another keeps reading", () =>
    stoppedReaderIsCutOff(onRedis))
})
