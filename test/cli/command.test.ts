import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import type { Pending } from "../../src/cli/command.ts"
import { normalizeArgs, refusals } from "../../src/cli/command.ts"
import { listenAddresses } from "../../src/cli/serve.ts"

const none: Pending = {
  landingAddr: Option.none(),
  metricsAddr: Option.none(),
  debugAddr: Option.none(),
  snapshotsEnabled: Option.none(),
  snapshotPath: Option.none(),
  snapshotInterval: Option.none(),
  certificatePath: Option.none(),
  keyPath: Option.none()
}

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

  it("accepts pending flags only when they turn their feature off", () => {
    assert.deepStrictEqual(refusals(none), [])
    assert.deepStrictEqual(
      refusals({
        ...none,
        landingAddr: Option.some(""),
        metricsAddr: Option.some(""),
        debugAddr: Option.some(""),
        snapshotsEnabled: Option.some(false)
      }),
      []
    )
  })

  it("refuses pending flags that ask for a missing feature, naming each", () => {
    const problems = refusals({
      landingAddr: Option.some(":3001"),
      metricsAddr: Option.some(":2122"),
      debugAddr: Option.some(":2123"),
      snapshotsEnabled: Option.some(true),
      snapshotPath: Option.some("/tmp/state.binpb"),
      snapshotInterval: Option.some("10m"),
      certificatePath: Option.some("cert.pem"),
      keyPath: Option.some("key.pem")
    })
    assert.strictEqual(problems.length, 8)
    for (const name of ["landing-addr", "metrics-addr", "debug-addr", "snapshots-enabled", "snapshot-path"]) {
      assert.isTrue(
        problems.some((p) => p.startsWith(`--${name}:`)),
        name
      )
    }
  })

  it("listens on every interface for an empty host, dual-stack first", () => {
    assert.deepStrictEqual(listenAddresses(":3000"), ["[::]:3000", "0.0.0.0:3000"])
    assert.deepStrictEqual(listenAddresses("127.0.0.1:0"), ["127.0.0.1:0"])
    assert.deepStrictEqual(listenAddresses("[::1]:3000"), ["[::1]:3000"])
  })
})
