import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import {
  asciiText,
  BinaryStringBuilder,
  binaryText,
  hostLatin1,
  type Latin1Native,
  sameBytes,
  toBytes,
  writeBytes
} from "../../src/core/server/binaryString.ts"

const everyByte = Uint8Array.from({ length: 256 }, (_, i) => i)

it("finds the host's native one-byte copies on Node", () => {
  assert.isDefined(hostLatin1)
})

const paths: ReadonlyArray<readonly [string, Latin1Native | null]> = [
  ["native copies", hostLatin1 ?? null],
  ["portable loops", null]
]

describe.each(paths)("binary strings, %s", (_, native) => {
  it("hold one char per byte, for every byte value, and give the same bytes back", () => {
    const builder = new BinaryStringBuilder(8, native)
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
          const builder = new BinaryStringBuilder(capacity, native)
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
          writeBytes(text, 0, text.length, out, 1, native)
          assert.deepStrictEqual(
            Array.from(out.subarray(1, -1)),
            pieces.flatMap((piece) => Array.from(piece))
          )
        }
      )
    )
  })

  it("take sub-ranges of bytes and of strings", () => {
    const builder = new BinaryStringBuilder(4096, native)
    builder.bytes(everyByte, 250, 256)
    builder.bytes(everyByte, 3, 3)
    builder.chars("\u0000\u00ff\u0080abc", 1, 4)
    assert.deepStrictEqual(Array.from(toBytes(builder.finish(), 0, 9)), [250, 251, 252, 253, 254, 255, 0xff, 0x80, 97])
  })

  it("take strings of their own from what was built, keeping it", () => {
    const builder = new BinaryStringBuilder(16, native)
    builder.bytes(everyByte, 0, 256)
    const piece = builder.take(100, 150)
    assert.deepStrictEqual(Array.from(toBytes(piece, 0, piece.length)), Array.from(everyByte.subarray(100, 150)))
    assert.strictEqual(builder.take(7, 7), "")
    assert.strictEqual(builder.size, 256, "take leaves the built chars in place")
    assert.deepStrictEqual(Array.from(toBytes(builder.finish(), 250, 256)), [250, 251, 252, 253, 254, 255])
  })

  it("copy a range of bytes into a string of its own", () => {
    for (const [start, end] of [
      [0, 256],
      [3, 70],
      [9, 9]
    ] as const) {
      const bytes = everyByte.slice()
      const text = binaryText(bytes, start, end, native)
      bytes.fill(0)
      assert.deepStrictEqual(toBytes(text, 0, text.length), everyByte.subarray(start, end))
    }
  })

  it("read ASCII bytes as text in one step with native copies, and leave anything else to the caller", () => {
    const bytes = Uint8Array.from("xnode-1\u00e9", (c) => c.charCodeAt(0))
    assert.strictEqual(asciiText(bytes, 1, 7, native), native === null ? undefined : "node-1")
    assert.strictEqual(asciiText(bytes, 1, 1, native), native === null ? undefined : "")
    assert.isUndefined(asciiText(bytes, 1, 8, native))
  })

  it("write sub-ranges of strings, short and long, as bytes", () => {
    const builder = new BinaryStringBuilder(4096, native)
    builder.bytes(everyByte, 0, 256)
    const text = builder.finish()
    for (const [start, end] of [
      [0, 256],
      [0, 100],
      [5, 40],
      [1, 255],
      [200, 200]
    ] as const) {
      const out = new Uint8Array(end - start + 2).fill(7)
      writeBytes(text, start, end, out, 1, native)
      assert.deepStrictEqual(Array.from(out), [7, ...everyByte.subarray(start, end), 7])
    }
  })
})
