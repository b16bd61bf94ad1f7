import { assert, describe, it } from "@effect/vitest"
import { CallEvents } from "../../../../src/adapters/grpc/http2/CallEvents.ts"

describe("CallEvents", () => {
  it("calls listeners in order, once-listeners once, and removes them by the function given", () => {
    const events = new CallEvents()
    const seen: Array<string> = []
    const a = (value: string) => seen.push(`a${value}`)
    const b = (value: string) => seen.push(`b${value}`)
    events.on("x", a).once("x", b)
    assert.isFalse(events.emit("y"))
    assert.isTrue(events.emit("x", 1))
    assert.isTrue(events.emit("x", 2))
    assert.deepStrictEqual(seen, ["a1", "b1", "a2"])
    events.once("x", b).off("x", b).off("x", a)
    assert.strictEqual(events.listenerCount("x"), 0)
    assert.isFalse(events.emit("x", 3))
  })

  it("does not call a listener added while an event is emitted, and does not throw on an unheard error", () => {
    const events = new CallEvents()
    const seen: Array<string> = []
    events.on("x", () => events.on("x", () => seen.push("late")))
    events.emit("x")
    assert.deepStrictEqual(seen, [])
    assert.isFalse(events.emit("error", new Error("nobody listens")))
  })
})
