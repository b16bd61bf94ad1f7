/**
 * A GC pass on Redis always ends: affiliates whose expiry is exactly the
 * pass's `now` stay (removal is strictly past), and are looked at again only
 * once they can go, so a cluster with more of them than one sweep takes (one
 * bulk load, or any TestClock test) does not make the sweep return the same
 * batch for ever (issue 22).
 */
import { Duration, Effect } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { instanceOn, updateOf } from "./fixtures/backendState.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests()

describe("the sweep of affiliates due exactly now", () => {
  it.live(
    "300 affiliates expiring at now: the pass ends and keeps them; a millisecond later it removes them",
    () =>
      Effect.gen(function* () {
        const { backend } = yield* instanceOn(redis.server.url)
        const now = 1_800_000_000_000
        const clusterId = "due-now"
        yield* Effect.forEach(
          Array.from({ length: 300 }, (_, i) => i),
          (i) => backend.update(updateOf(clusterId, `a${i}`, 1, Duration.zero), now),
          { concurrency: 16 }
        )
        const kept = yield* backend
          .collectGarbage(now)
          .pipe(Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.die("the GC pass never ended") }))
        assert.strictEqual(kept.removedAffiliates, 0)
        assert.strictEqual((yield* backend.list(clusterId)).length, 300)
        const removed = yield* backend
          .collectGarbage(now + 1)
          .pipe(Effect.timeoutOrElse({ duration: "5 seconds", orElse: () => Effect.die("the GC pass never ended") }))
        assert.strictEqual(removed.removedAffiliates, 300)
      }).pipe(Effect.scoped),
    15_000
  )
})
