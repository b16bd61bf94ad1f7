/**
 * The core's protobuf wire writer, against protobuf-es's: varints and their
 * sizes, field headers and UTF-8 text, byte for byte, and read back by the
 * core's reader.
 */
import { BinaryWriter } from "@bufbuild/protobuf/wire"
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { utf8Length } from "../../src/core/utf8.ts"
import { WireReader } from "../../src/core/wire/WireReader.ts"
import { fieldSize, putHeader, putUtf8, putVarint, varintSize } from "../../src/core/wire/wireWriter.ts"

const toHex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex")

/** What `put` writes into a buffer of exactly `size` bytes, checking that it ends there. */
const written = (size: number, put: (bytes: Uint8Array) => number): Uint8Array => {
  const bytes = new Uint8Array(size)
  assert.strictEqual(put(bytes), size)
  return bytes
}

const integers = fc.oneof(
  fc.integer({ min: 0, max: 0x7fff_ffff }),
  fc.integer({ min: 0x8000_0000, max: Number.MAX_SAFE_INTEGER }),
  fc.integer({ min: Number.MIN_SAFE_INTEGER, max: -1 })
)

describe("wireWriter", () => {
  it("sizes and writes varints as protobuf-es writes int64s, negative ones in 10 bytes", () => {
    fc.assert(
      fc.property(integers, (value) => {
        const expected = new BinaryWriter().int64(value).finish()
        const bytes = written(varintSize(value), (bytes) => putVarint(bytes, 0, value))
        assert.strictEqual(toHex(bytes), toHex(expected))
        assert.strictEqual(new WireReader(bytes).int64(), value)
      })
    )
    assert.strictEqual(varintSize(-1), 10)
  })

  it("writes a length-delimited field's header and measures the field", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 15 }), fc.uint8Array({ maxLength: 300 }), (field, body) => {
        const expected = new BinaryWriter().tag(field, 2).bytes(body).finish()
        const bytes = written(fieldSize(body.length), (bytes) => {
          const pos = putHeader(bytes, 0, (field << 3) | 2, body.length)
          bytes.set(body, pos)
          return pos + body.length
        })
        assert.strictEqual(toHex(bytes), toHex(expected))
      })
    )
  })

  it("writes text as TextEncoder does, lone surrogates as U+FFFD, in as many bytes as utf8Length counts", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 40 }), (text) => {
        const bytes = written(utf8Length(text), (bytes) => putUtf8(bytes, 0, text))
        assert.strictEqual(toHex(bytes), toHex(new TextEncoder().encode(text)))
      })
    )
  })
})
