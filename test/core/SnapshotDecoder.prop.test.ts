/**
 * Property tests of the incremental snapshot decoder: a file fed in pieces of
 * random sizes, the way the file store reads it (the bytes not consumed come
 * again, followed by the next piece), gives exactly what decoding it whole
 * gives, clusters and skipped ranges alike, for intact files and for files
 * damaged in every way the decoder reports.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import type { DecodedSnapshot } from "../../src/core/server/SnapshotCodec.ts"
import { decode, encode, maxClusterSize, SnapshotDecoder } from "../../src/core/server/SnapshotCodec.ts"
import {
  affiliateEntry,
  clusterEntry,
  concat,
  endpointEntry,
  generatedEntry,
  hex,
  now,
  varint
} from "../storage/fixtures/snapshots.ts"

/** Decodes `bytes` handed over in pieces of the given sizes (the last piece is the rest). */
const decodeInPieces = (bytes: Uint8Array, sizes: ReadonlyArray<number>): DecodedSnapshot => {
  const decoder = new SnapshotDecoder(now)
  let held = new Uint8Array(0)
  let read = 0
  for (let i = 0; ; i++) {
    const size = i < sizes.length ? Math.min(sizes[i]!, bytes.length - read) : bytes.length - read
    const final = read + size === bytes.length
    // A new buffer each time: a piece stays valid only while it is fed, as with the store's reused buffer.
    const buffer = concat(held, bytes.subarray(read, read + size))
    read += size
    const stop = decoder.feed(buffer, 0, buffer.length, final)
    if (final) {
      assert.strictEqual(stop, buffer.length, "the final bytes are all consumed")
      buffer.fill(0xee)
      return decoder.result()
    }
    held = buffer.slice(stop)
    buffer.fill(0xee)
  }
}

/** The plain form of a decode, records and layouts included, for deep equality. */
const plain = (decoded: DecodedSnapshot) => ({
  size: decoded.size,
  skipped: decoded.skipped,
  clusters: decoded.clusters.map((cluster) => ({
    id: cluster.id,
    affiliates: [...cluster.affiliates.values()].map((a) => ({
      id: a.id,
      record: a.unsafeRecord,
      layout: [...a.unsafeLayout]
    }))
  }))
})

const blob = fc.uint8Array({ maxLength: 40 })
const ttl = fc.integer({ min: -100, max: 4000 })
const idText = fc.string({ minLength: 0, maxLength: 6 })

/** Random clusters, some sharing an ID (a duplicate record), encoded one record at a time. */
const records = fc
  .array(
    fc.record({
      id: fc.oneof(idText, fc.constantFrom("dup", "c")),
      affiliates: fc.array(
        fc.record({
          id: idText,
          data: blob,
          ttl,
          endpoints: fc.array(fc.record({ data: blob, ttl }), { maxLength: 3 })
        }),
        { maxLength: 4 }
      )
    }),
    { maxLength: 8 }
  )
  .map((clusters) => clusters.map((c) => encode([generatedEntry(c)], now).bytes))

/** Top-level items that are not records, or records the decoder skips whole. */
const oddities = fc.oneof(
  // Unknown fields of each wire type, the length-delimited ones up to a few hundred bytes.
  fc.uint8Array({ maxLength: 300 }).map((payload) => concat(hex("12"), varint(payload.length), payload)),
  fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map((value) => concat(hex("18"), varint(Number(value)))),
  fc.uint8Array({ minLength: 8, maxLength: 8 }).map((payload) => concat(hex("21"), payload)),
  fc.uint8Array({ minLength: 4, maxLength: 4 }).map((payload) => concat(hex("2D"), payload)),
  fc.constant(hex("33 08 01 1A 00 34")),
  // Records whose framing is intact but whose content is not: malformed, without ID, not UTF-8.
  fc.constant(hex("0A 03 12 05 0A")),
  fc.constant(hex("0A 02 12 00")),
  fc.constant(hex("0A 03 0A 01 FF")),
  // A record over the size limit, cut by the end of the file: it claims the rest.
  fc.constant(concat(hex("0A"), varint(maxClusterSize + 1), hex("0A 01 63")))
)

/** Damage applied to the file after it is assembled. */
const damage = fc.oneof(
  fc.record({ kind: fc.constant("none" as const) }),
  fc.record({ kind: fc.constant("cut" as const), at: fc.nat() }),
  fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }),
  fc.record({
    kind: fc.constant("garbage" as const),
    at: fc.nat(),
    bytes: fc.uint8Array({ minLength: 1, maxLength: 12 })
  })
)

const assemble = (
  parts: ReadonlyArray<Uint8Array>,
  hurt: { readonly kind: string; readonly at?: number; readonly value?: number; readonly bytes?: Uint8Array }
): Uint8Array => {
  const bytes = concat(...parts)
  if (bytes.length === 0) return bytes
  const at = (hurt.at ?? 0) % bytes.length
  switch (hurt.kind) {
    case "cut":
      return bytes.slice(0, at)
    case "flip":
      bytes[at] = hurt.value ?? 0
      return bytes
    case "garbage":
      return concat(bytes.subarray(0, at), hurt.bytes ?? new Uint8Array(0), bytes.subarray(at))
    default:
      return bytes
  }
}

const pieceSizes = fc.array(fc.integer({ min: 0, max: 64 }), { maxLength: 40 })

describe("SnapshotDecoder", () => {
  it("gives what decoding the whole file gives, for any split of a valid or damaged file", () => {
    fc.assert(
      fc.property(
        records,
        fc.array(fc.tuple(fc.nat(), oddities), { maxLength: 3 }),
        damage,
        pieceSizes,
        (recordBytes, inserted, hurt, sizes) => {
          const parts = [...recordBytes]
          for (const [at, item] of inserted) parts.splice(at % (parts.length + 1), 0, item)
          const bytes = assemble(parts, hurt)
          assert.deepStrictEqual(plain(decodeInPieces(bytes, sizes)), plain(decode(bytes, now)))
        }
      ),
      { numRuns: 400 }
    )
  })

  it("gives the same for one byte at a time", () => {
    const bytes = concat(
      encode([clusterEntry("a", [affiliateEntry("x", hex("01 02"), 60, [endpointEntry(hex("03"), 30)])])], now).bytes,
      hex("12 03 01 02 03"),
      encode([clusterEntry("a")], now).bytes,
      hex("0A 02 12 00"),
      concat(hex("0A"), varint(maxClusterSize + 5), hex("0A 01 63"))
    )
    const whole = decode(bytes, now)
    assert.deepStrictEqual(
      whole.skipped.map((range) => range.reason.split(" at offset")[0]),
      ["unknown top-level field 2 (wire type 2)", 'duplicate cluster "a"', "record", "record"]
    )
    assert.deepStrictEqual(
      plain(
        decodeInPieces(
          bytes,
          Array.from(bytes, () => 1)
        )
      ),
      plain(whole)
    )
  })

  it("gives the same for a file cut at any byte and split in two at any byte", () => {
    const bytes = concat(
      encode([clusterEntry("a", [affiliateEntry("x", hex("01 02"), 60, [endpointEntry(hex("03"), 30)])])], now).bytes,
      hex("18 96 01 0A 02 12 00 80 01 05"),
      encode([clusterEntry("b")], now).bytes,
      hex("12 03 01 02 03")
    )
    for (let cut = 0; cut <= bytes.length; cut++) {
      const file = bytes.subarray(0, cut)
      const whole = plain(decode(file, now))
      for (let split = 0; split <= cut; split++) {
        assert.deepStrictEqual(plain(decodeInPieces(file, [split])), whole, `cut at ${cut}, split at ${split}`)
      }
    }
  })

  it("skips an unknown field or an oversized record that spans many pieces without holding it", () => {
    const payload = new Uint8Array(10_000).fill(7)
    const bytes = concat(hex("12"), varint(payload.length), payload, encode([clusterEntry("c")], now).bytes)
    const decoder = new SnapshotDecoder(now)
    let offset = 0
    let held = 0
    for (const size of [3, 100, 4000, 4000, 3000]) {
      const stop = decoder.feed(bytes, offset, Math.min(offset + size, bytes.length), offset + size >= bytes.length)
      held = Math.max(held, Math.min(offset + size, bytes.length) - stop)
      offset = stop
    }
    assert.isAtMost(held, 3, "only a cut header is ever held")
    assert.deepStrictEqual(plain(decoder.result()), plain(decode(bytes, now)))
  })
})
