import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Result } from "effect"
import { ClusterRpcs } from "../../../src/adapters/grpc/ClusterService.ts"
import type { CallContext, Interceptor } from "../../../src/adapters/grpc/interceptors.ts"
import { intercept, serverChain } from "../../../src/adapters/grpc/interceptors.ts"
import { ResourceExhausted } from "../../../src/ports/DiscoveryError.ts"

const recording = (name: string, events: Array<string>): Interceptor<string> => ({
  name,
  start: () => {
    events.push(`${name} start`)
    return `${name} state`
  },
  end: (_context, exit, started) => {
    events.push(`${name} end ${exit._tag} with ${started}`)
    return Effect.sync(() => events.push(`${name} effect`))
  }
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

const handler = (events: Array<string>) =>
  Effect.sync(() => {
    events.push("handler")
    return 42
  })

describe("interceptors", () => {
  it.effect("start outermost first, end innermost first, and run the effects of the ends in that order", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const chain = ["a", "b", "c"].map((name) => recording(name, events))
      const result = yield* intercept(chain, context, handler(events))
      assert.strictEqual(result, 42)
      assert.deepStrictEqual(events, [
        "a start",
        "b start",
        "c start",
        "handler",
        "c end Success with c state",
        "b end Success with b state",
        "a end Success with a state",
        "c effect",
        "b effect",
        "a effect"
      ])
    })
  )

  it.effect("let an admission wait before the inner interceptors start", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const waiting: Interceptor = {
        name: "wait",
        admit: () => Effect.sync(() => events.push("admitted")),
        start: () => events.push("wait start")
      }
      const effect = intercept(
        [recording("log", events), waiting, recording("metrics", events)],
        context,
        handler(events)
      )
      assert.deepStrictEqual(events, ["log start"])
      assert.strictEqual(yield* effect, 42)
      assert.deepStrictEqual(events.slice(0, 5), ["log start", "admitted", "wait start", "metrics start", "handler"])
    })
  )

  it.effect("let an outer interceptor refuse the call before the inner ones see it, and end the outer ones", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const refusing: Interceptor = {
        name: "refuse",
        admit: () => Effect.fail(new ResourceExhausted({ message: "refused" })),
        end: () => {
          events.push("refuse end")
          return undefined
        }
      }
      const exit = yield* Effect.exit(
        intercept([recording("log", events), refusing, recording("metrics", events)], context, handler(events))
      )
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual(events, ["log start", "log end Failure with log state", "log effect"])
    })
  )

  it.effect("hand the handler's failure to every end", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const exit = yield* Effect.exit(
        intercept([recording("log", events)], context, Effect.fail(new ResourceExhausted({ message: "no" })))
      )
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual(events, ["log start", "log end Failure with log state", "log effect"])
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
