import { assert, describe, it } from "@effect/vitest"
import { Effect, Result } from "effect"
import { ClusterRpcs } from "../../../src/adapters/grpc/ClusterService.ts"
import type { CallContext, Interceptor } from "../../../src/adapters/grpc/interceptors.ts"
import { intercept, serverChain } from "../../../src/adapters/grpc/interceptors.ts"

const recording = (name: string, events: Array<string>): Interceptor => ({
  name,
  around: (_context, next) =>
    Effect.suspend(() => {
      events.push(`${name} before`)
      return Effect.ensuring(
        next,
        Effect.sync(() => events.push(`${name} after`))
      )
    })
})

const context: CallContext = {
  rpc: ClusterRpcs.List,
  call: {
    cancelled: false,
    metadata: undefined as never,
    getPeer: () => "127.0.0.1:1",
    getDeadline: () => Number.POSITIVE_INFINITY,
    on: () => undefined
  },
  decoded: Result.succeed({ clusterId: "c" }),
  address: undefined
}

describe("interceptors", () => {
  it.effect("run outermost first around the handler, and unwind in reverse", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const chain = ["a", "b", "c"].map((name) => recording(name, events))
      const result = yield* intercept(
        chain,
        context,
        Effect.sync(() => {
          events.push("handler")
          return 42
        })
      )
      assert.strictEqual(result, 42)
      assert.deepStrictEqual(events, ["a before", "b before", "c before", "handler", "c after", "b after", "a after"])
    })
  )

  it.effect("let an outer interceptor stop the call before the inner ones see it", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const refusing: Interceptor = { name: "refuse", around: () => Effect.die("refused") }
      const exit = yield* Effect.exit(
        intercept([recording("log", events), refusing, recording("metrics", events)], context, Effect.void)
      )
      assert.strictEqual(exit._tag, "Failure")
      assert.deepStrictEqual(events, ["log before", "log after"])
    })
  )

  it("put the server's concerns in the original's order, leaving out those turned off", () => {
    const events: Array<string> = []
    const [requestLog, rateLimit, metrics] = ["requestLog", "rateLimit", "metrics"].map((name) =>
      recording(name, events)
    )
    assert.deepStrictEqual(
      serverChain({ metrics, rateLimit, requestLog }).map((interceptor) => interceptor.name),
      ["requestLog", "rateLimit", "metrics"]
    )
    assert.deepStrictEqual(
      serverChain({ metrics, requestLog }).map((interceptor) => interceptor.name),
      ["requestLog", "metrics"]
    )
  })
})
