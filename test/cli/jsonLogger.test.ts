import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Logger } from "effect"
import * as JsonLogger from "../../src/cli/jsonLogger.ts"

/** Runs `program` with the command's logger and `Logger.formatJson` side by side; returns both outputs. */
const both = async (program: Effect.Effect<void>) => {
  const printed: Array<string> = []
  const expected: Array<string> = []
  const log = console.log
  console.log = (text: unknown) => {
    printed.push(...String(text).split("\n"))
  }
  try {
    const layer = Logger.layer([JsonLogger.make(), Logger.map(Logger.formatJson, (line) => expected.push(line))])
    await Effect.runPromise(program.pipe(Effect.provide(layer)))
    await new Promise((resolve) => setTimeout(resolve, JsonLogger.flushMillis * 3))
  } finally {
    console.log = log
  }
  return { printed, expected }
}

describe("JsonLogger", () => {
  it("prints the lines Logger.formatJson gives, for request log lines and anything else", async () => {
    const { printed, expected } = await both(
      Effect.gen(function* () {
        yield* Effect.logInfo("/sidero.discovery.server.Cluster/AffiliateUpdate").pipe(
          Effect.annotateLogs({
            "peer.address": "127.0.0.1",
            code: "OK",
            duration: 0.000016365,
            cluster_id: 'c"\u2028\\x',
            affiliate_id: "é",
            empty: null,
            missing: undefined,
            flag: true,
            nan: Number.NaN
          })
        )
        yield* Effect.logError("failed", Cause.fail(new Error("boom")))
        yield* Effect.logWarning({ nested: { value: 1 } })
        yield* Effect.logInfo("two", "parts")
        yield* Effect.logInfo("in a span").pipe(Effect.withLogSpan("span"))
        yield* Effect.logInfo("bigint").pipe(Effect.annotateLogs({ big: 1n }))
      })
    )
    assert.strictEqual(expected.length, 6)
    assert.deepStrictEqual(printed, expected)
  })

  it("writes a full batch at once, without waiting for the timer", async () => {
    const printed: Array<string> = []
    const log = console.log
    console.log = (text: unknown) => {
      printed.push(...String(text).split("\n"))
    }
    try {
      const program = Effect.forEach(
        Array.from({ length: JsonLogger.batchLines }, (_, i) => i),
        (i) => Effect.logInfo(`line ${i}`)
      )
      await Effect.runPromise(program.pipe(Effect.provide(Logger.layer([JsonLogger.make()]))))
      assert.strictEqual(printed.length, JsonLogger.batchLines)
    } finally {
      console.log = log
    }
  })
})
