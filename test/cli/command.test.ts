import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import type { Pending } from "../../src/cli/command.ts"
import { normalizeArgs, refusals } from "../../src/cli/command.ts"
import { listenAddresses } from "../../src/cli/serve.ts"

const none: Pending = { debugAddr: Option.none() }

describe("command", () => {
  it("turns Go-style single-dash long flags into double-dash ones and leaves the rest alone", () => {
    assert.deepStrictEqual(normalizeArgs(["-addr=:3000", "-debug", "-h", "--gc-interval", "-1s", "value", "-x"]), [
      "--addr=:3000",
      "--debug",
      "-h",
      "--gc-interval",
      "-1s",
      "value",
      "-x"
    ])
  })

  it("accepts a pending flag only when it turns its feature off", () => {
    assert.deepStrictEqual(refusals(none), [])
    assert.deepStrictEqual(refusals({ debugAddr: Option.some("") }), [])
  })

  it("refuses a pending flag that asks for a missing feature, naming it", () => {
    assert.deepStrictEqual(refusals({ debugAddr: Option.some(":2123") }), [
      '--debug-addr: the debug server is not available in this build yet; only --debug-addr="" is accepted'
    ])
  })

  it("listens on every interface for an empty host, dual-stack first", () => {
    assert.deepStrictEqual(listenAddresses(":3000"), ["[::]:3000", "0.0.0.0:3000"])
    assert.deepStrictEqual(listenAddresses("127.0.0.1:0"), ["127.0.0.1:0"])
    assert.deepStrictEqual(listenAddresses("[::1]:3000"), ["[::1]:3000"])
  })
})
