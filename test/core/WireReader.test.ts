/**
 * The core's protobuf wire reader, against protobuf-es's writer: varints of
 * every width, the field loop, confinement to a nested message, skipping
 * each wire type, and the reasons it refuses bytes (a truncation marked as
 * such), with the group end check on and off.
 */
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire"
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { Malformed, WireReader, type WireReaderOptions } from "../../src/core/wire/WireReader.ts"
import { hex } from "../storage/fixtures/snapshots.ts"

const readerOf = (bytes: Uint8Array, options?: WireReaderOptions) => new WireReader(bytes, 0, bytes.length, options)

/** What reading with `read` throws, as `[reason, truncated]`. */
const refusal = (read: () => unknown): [string, boolean] => {
  try {
    read()
  } catch (error) {
    assert.instanceOf(error, Malformed)
    return [error.reason, error.truncated]
  }
  return assert.fail("read without throwing")
}

/** Skips the field whose tag starts `bytes`, as a field loop does; returns where it stopped. */
const skipFirst = (bytes: Uint8Array, options?: WireReaderOptions): number => {
  const reader = readerOf(bytes, options)
  const field = reader.nextField()
  reader.skip(reader.wireType, field)
  return reader.pos
}

describe("WireReader", () => {
  it("reads varints of up to 64 bits as protobuf-es writes them", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), (value) => {
        const reader = readerOf(new BinaryWriter().uint64(value).uint64(value).uint64(value).finish())
        reader.varint64()
        assert.strictEqual((BigInt(reader.hi) << 32n) | BigInt(reader.lo), value)
        assert.strictEqual(reader.uint32(), Number(value & 0xffff_ffffn))
        assert.strictEqual(reader.int64(), Number(BigInt.asIntN(64, value)))
        assert.strictEqual(reader.pos, reader.end)
      })
    )
  })

  it("reads lengths and tags as plain numbers, huge ones included", () => {
    assert.strictEqual(readerOf(hex("96 01")).uint(), 150)
    assert.strictEqual(readerOf(hex("80 80 80 80 80 80 80 08")).uint(), 2 ** 52)
  })

  it("loops over the fields of a message, and of a message nested in it once entered", () => {
    const bytes = new BinaryWriter()
      .tag(1, WireType.Varint)
      .int32(7)
      .tag(2, WireType.LengthDelimited)
      .fork()
      .tag(3, WireType.Bit32)
      .fixed32(9)
      .join()
      .tag(15, WireType.LengthDelimited)
      .string("ok")
      .finish()
    const reader = readerOf(bytes)
    const seen: Array<string> = []
    for (let field = reader.nextField(); field !== 0; field = reader.nextField()) {
      seen.push(`${field}/${reader.wireType}`)
      if (field !== 2) {
        reader.skip(reader.wireType, field)
        continue
      }
      const outer = reader.enter()
      for (let inner = reader.nextField(); inner !== 0; inner = reader.nextField()) {
        seen.push(`${field}.${inner}/${reader.wireType}`)
        reader.skip(reader.wireType, inner)
      }
      reader.leave(outer)
    }
    assert.deepStrictEqual(seen, ["1/0", "2/2", "2.3/5", "15/2"])
    assert.strictEqual(reader.pos, bytes.length)
  })

  it("reads only the bytes it is confined to", () => {
    const reader = new WireReader(hex("FF 08 01 FF"), 1, 3)
    assert.strictEqual(reader.nextField(), 1)
    assert.strictEqual(reader.uint32(), 1)
    assert.strictEqual(reader.nextField(), 0)
  })

  it("skips every wire type, groups inside groups included", () => {
    assert.strictEqual(skipFirst(hex("08 96 01 FF")), 3)
    assert.strictEqual(skipFirst(hex("09 01 02 03 04 05 06 07 08 FF")), 9)
    assert.strictEqual(skipFirst(hex("0A 02 AA BB FF")), 4)
    assert.strictEqual(skipFirst(hex("0D 01 02 03 04 FF")), 5)
    assert.strictEqual(skipFirst(hex("0B 13 08 01 14 0C FF")), 6)
  })

  it("refuses, with the reason, what it cannot read", () => {
    const wrongType = readerOf(hex("0A 00"))
    wrongType.nextField()
    const cases: ReadonlyArray<readonly [() => unknown, string]> = [
      [() => readerOf(hex("00")).nextField(), "field number 0"],
      [() => wrongType.expect(0, "Message.seconds"), "field Message.seconds has wire type 2, expected 0"],
      [() => readerOf(hex("FF FF FF FF FF FF FF FF FF 02")).varint64(), "varint overflows 64 bits"],
      [() => readerOf(hex("FF FF FF FF FF FF FF FF FF FF 00")).varint64(), "varint overflows 64 bits"],
      ...[4, 6, 7].map((type) => [() => readerOf(hex("")).skip(type, 1), `invalid wire type ${type}`] as const)
    ]
    for (const [read, reason] of cases) assert.deepStrictEqual(refusal(read), [reason, false])
  })

  it("marks a read past the end of its bytes as truncated", () => {
    const cases: ReadonlyArray<readonly [() => unknown, string]> = [
      [() => readerOf(hex("96")).uint(), "truncated varint"],
      [() => readerOf(hex("03 AA BB")).delimited(), "length runs past the end of its message"],
      [() => skipFirst(hex("09 01 02 03")), "truncated fixed-size field"],
      [() => skipFirst(hex("0B 08 01")), "truncated varint"]
    ]
    for (const [read, reason] of cases) assert.deepStrictEqual(refusal(read), [reason, true])
  })

  it("checks that a group ends with its own field number, unless told not to (vtprotobuf does not)", () => {
    const mismatched = hex("0B 08 01 14 FF")
    assert.deepStrictEqual(
      refusal(() => skipFirst(mismatched)),
      ["mismatched end of group", false]
    )
    assert.strictEqual(skipFirst(mismatched, { checkGroupEnd: false }), 4)
  })

  it("skips groups nested 33 deep and refuses one more", () => {
    const nested = (depth: number) => hex(`${"0B ".repeat(depth)}${"0C ".repeat(depth)}`)
    assert.strictEqual(skipFirst(nested(33)), 66)
    assert.deepStrictEqual(
      refusal(() => skipFirst(nested(34))),
      ["groups nested too deeply", false]
    )
  })
})
