import { assert, describe, it } from "@effect/vitest"
import { formatByteSize, parseByteSize } from "../../src/cli/byteSize.ts"

describe("byteSize", () => {
  it("reads plain bytes and binary units, case-insensitively", () => {
    assert.strictEqual(parseByteSize("1048576"), 1048576)
    assert.strictEqual(parseByteSize("256MiB"), 256 * 1024 ** 2)
    assert.strictEqual(parseByteSize("1.5gib"), 1.5 * 1024 ** 3)
    assert.strictEqual(parseByteSize("64 K"), 64 * 1024)
    assert.strictEqual(parseByteSize("2MB"), 2 * 1024 ** 2)
  })

  it("refuses what is not a size", () => {
    for (const text of ["", "-1", "MiB", "12 parsecs", "1e3", "9999999999999GiB"]) {
      assert.isUndefined(parseByteSize(text), text)
    }
  })

  it("writes a size in its largest unit", () => {
    assert.strictEqual(formatByteSize(256 * 1024 ** 2), "256MiB")
    assert.strictEqual(formatByteSize(1.5 * 1024 ** 3), "1.5GiB")
    assert.strictEqual(formatByteSize(100), "100B")
  })
})
