import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { BinaryStringBuilder, sameBytes, toBytes, writeBytes } from "../../src/core/server/binaryString.ts"

const everyByte = Uint8Array.from({ length: 256 }, (_, i) => i)

describe("binary strings", () => {
  it("hold one char per byte, for every byte value, and give the same bytes back", () => {
    const builder = new BinaryStringBuilder(8)
    builder.bytes(everyByte, 0, 256)
    const text = builder.finish()
    assert.strictEqual(text.length, 256)
    for (let i = 0; i < 256; i++) assert.strictEqual(text.charCodeAt(i), i)
    assert.deepStrictEqual(toBytes(text, 0, 256), everyByte)
    assert.isTrue(sameBytes(text, 10, 20, everyByte.subarray(10, 20)))
    assert.isFalse(sameBytes(text, 10, 20, everyByte.subarray(11, 21)))
    assert.isFalse(sameBytes(text, 10, 20, everyByte.subarray(10, 19)))
  })

  it("build from pieces of bytes and of other binary strings, growing past the first capacity, then start over", () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 600 }), { maxLength: 6 }),
        fc.integer({ min: 1, max: 64 }),
        (pieces, capacity) => {
          const builder = new BinaryStringBuilder(capacity)
          for (const [i, piece] of pieces.entries()) {
            builder.bytes(piece, 0, piece.length)
            if (i % 2 === 1) {
              // Round trip what was built so far through a string and back into the builder.
              const sofar = builder.finish()
              builder.chars(sofar, 0, sofar.length)
            }
          }
          const text = builder.finish()
          assert.strictEqual(builder.finish(), "")
          const out = new Uint8Array(text.length + 2)
          writeBytes(text, 0, text.length, out, 1)
          assert.deepStrictEqual(
            Array.from(out.subarray(1, -1)),
            pieces.flatMap((piece) => Array.from(piece))
          )
        }
      )
    )
  })

  it("take sub-ranges of bytes and of strings", () => {
    const builder = new BinaryStringBuilder()
    builder.bytes(everyByte, 250, 256)
    builder.bytes(everyByte, 3, 3)
    builder.chars("\u0000\u00ff\u0080abc", 1, 4)
    assert.deepStrictEqual(Array.from(toBytes(builder.finish(), 0, 9)), [250, 251, 252, 253, 254, 255, 0xff, 0x80, 97])
  })
})
