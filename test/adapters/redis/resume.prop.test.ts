/**
 * Resumable watches on the Redis backend, as a property (see
 * `test/core/fixtures/resumeProperty.ts`): two instances on one real
 * redis-server, watchers that disconnect at random points and resume on
 * either instance (from its mirror's own log, or from the cluster's log in
 * Redis when the mirror is new). The server keeps stream nodes of 4 entries,
 * so the log trimmed to about 8 changes really drops old ones and some
 * resumes must fall back to a snapshot. (8, not less: one GC pass here makes
 * up to 5 changes, and a mirror that finds part of one step already trimmed
 * cuts its watchers off by design, which this property does not expect.)
 */
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { RedisBackend } from "../../../src/adapters/redis/index.ts"
import { makeOn } from "../../../src/core/server/ClusterState.ts"
import { historyArb, type InstancesUnderTest, runResumeHistory } from "../../core/fixtures/resumeProperty.ts"
import { redisProfile } from "./profile.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests(["--stream-node-max-entries", "4"])

const twoInstances: InstancesUnderTest = (caps) =>
  Effect.gen(function* () {
    const keyPrefix = `resume-${randomUUID()}:`
    const backends = [
      yield* RedisBackend.make({ url: redis.server.url, keyPrefix, caps, logLength: caps.watchLogLength }),
      yield* RedisBackend.make({ url: redis.server.url, keyPrefix, caps, logLength: caps.watchLogLength })
    ]
    const states = [yield* makeOn(backends[0]!, undefined), yield* makeOn(backends[1]!, undefined)]
    const profile = redisProfile(backends)
    return { states, profile, exactLog: undefined }
  })

describe("resumable watches on Redis", () => {
  it("a watcher that resumes on either instance rebuilds the cluster exactly", { timeout: 120_000 }, async () => {
    let resumed = 0
    let fresh = 0
    await fc.assert(
      fc.asyncProperty(historyArb, async (history) => {
        const counts = await runResumeHistory(history, twoInstances, 8)
        resumed += counts.resumed
        fresh += counts.fresh
      }),
      { numRuns: 120, seed: 0x4e5f, timeout: 20_000 }
    )
    // the histories exercise both outcomes
    assert.isAbove(resumed, 120)
    assert.isAbove(fresh, 3 * 120)
  })
})
