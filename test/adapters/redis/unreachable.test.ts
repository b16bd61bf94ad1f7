/**
 * A watch asked for while Redis cannot be reached fails at once with
 * UNAVAILABLE and gives its slot back, as every other call does: it does
 * not wait, holding a slot under `--max-watches`, until Redis is back
 * (found by an independent review of issue 22's fixes: the notifications'
 * connection waited for ever, and the third watch got RESOURCE_EXHAUSTED).
 */
import { Effect } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { instanceOn, recordingSink } from "./fixtures/backendState.ts"
import { freePort } from "./redisServer.ts"

describe("watches while Redis is unreachable", () => {
  it.live("fail at once with UNAVAILABLE and hold no slot", () =>
    Effect.gen(function* () {
      const port = yield* Effect.promise(() => freePort())
      const { backend, state } = yield* instanceOn(`redis://127.0.0.1:${port}`, {
        caps: { maxClusters: 10, maxWatches: 2 },
        connectTimeoutMillis: 200
      })
      for (let i = 0; i < 3; i++) {
        const failure = yield* Effect.flip(
          Effect.scoped(state.subscribe({ clusterId: `c${i}` }, recordingSink().sink)).pipe(
            Effect.timeoutOrElse({ duration: "2 seconds", orElse: () => Effect.die("the watch waited") })
          )
        )
        assert.strictEqual(failure._tag, "Unavailable")
      }
      assert.strictEqual((yield* backend.stats).watches, 0)
    }).pipe(Effect.scoped)
  )
})
