import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import { parseGoDuration } from "../../src/cli/goDuration.ts"

const millis = (text: string) => {
  const duration = parseGoDuration(text)
  return duration === undefined ? undefined : Duration.toMillis(duration)
}

describe("goDuration", () => {
  it("parses the units Go accepts", () => {
    assert.strictEqual(millis("1m"), 60_000)
    assert.strictEqual(millis("10s"), 10_000)
    assert.strictEqual(millis("300ms"), 300)
    assert.strictEqual(millis("1h30m"), 5_400_000)
    assert.strictEqual(millis("1.5s"), 1_500)
    assert.strictEqual(millis("2us"), 0.002)
    assert.strictEqual(millis("0"), 0)
    assert.strictEqual(millis("-1s"), -1000)
  })

  it("rejects what Go rejects", () => {
    for (const text of ["", "1", "m", "1x", "1m garbage", "--1s", "1.s.s"]) {
      assert.isUndefined(parseGoDuration(text), text)
    }
  })
})
