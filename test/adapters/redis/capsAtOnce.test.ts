/**
 * The caps on clusters and watches hold when many watches arrive at once on
 * the Redis backend, as they do in memory: each is reserved before the
 * backend is asked, so the calls in flight together cannot all pass a check
 * made before any of them was counted (issue 22).
 */
import { randomUUID } from "node:crypto"
import { Effect, Exit, Scope } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { instanceOn, recordingSink, updateOf } from "./fixtures/backendState.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests()

const caps = { maxClusters: 10, maxWatches: 20 }

/** Opens every watch at once, keeps the ones that start open, and tells how many started. */
const openAtOnce = (subscribe: (i: number) => Effect.Effect<unknown, unknown, never>, count: number) =>
  Effect.map(
    Effect.all(
      Array.from({ length: count }, (_, i) => Effect.exit(subscribe(i))),
      { concurrency: "unbounded" }
    ),
    (exits) => exits.filter(Exit.isSuccess).length
  )

describe("caps on Redis under watches that arrive at once", () => {
  it.live("60 watches of 60 new clusters: exactly the cap on clusters is served", () =>
    Effect.gen(function* () {
      const { state, backend } = yield* instanceOn(redis.server.url, { caps })
      const scope = yield* Effect.scope
      const served = yield* openAtOnce(
        (i) =>
          state.subscribe({ clusterId: `new-${randomUUID()}-${i}` }, recordingSink().sink).pipe(Scope.provide(scope)),
        60
      )
      assert.strictEqual(served, 10)
      assert.strictEqual(yield* backend.clusterCount, 10)
    }).pipe(Effect.scoped)
  )

  it.live("30 watches of one cluster at once: exactly the cap on watches is served", () =>
    Effect.gen(function* () {
      const { state, backend } = yield* instanceOn(redis.server.url, { caps })
      yield* state.update(updateOf("busy", "a"))
      const scope = yield* Effect.scope
      const served = yield* openAtOnce(
        () => state.subscribe({ clusterId: "busy" }, recordingSink().sink).pipe(Scope.provide(scope)),
        30
      )
      assert.strictEqual(served, 20)
      assert.strictEqual((yield* backend.stats).watches, 20)
    }).pipe(Effect.scoped)
  )
})
