/**
 * Differential property test of packed records: any file — records with
 * unknown fields of every wire type, legacy expirations, TTLs with nanos,
 * repeated fields, missing, empty, non-ASCII and invalid UTF-8 IDs — decodes
 * with packing exactly as with every affiliate built at once: the same
 * clusters and skipped ranges, and the same restore reports, stats, GC
 * reports and saved bytes, at later instants too.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import type { Affiliate } from "../../src/core/server/Affiliate.ts"
import { ClusterStore } from "../../src/core/server/ClusterStore.ts"
import type { DecodedSnapshot } from "../../src/core/server/SnapshotCodec.ts"
import { decode, encode } from "../../src/core/server/SnapshotCodec.ts"
import { now } from "../storage/fixtures/snapshots.ts"

const varint = (value: number): Array<number> => {
  let rest = BigInt.asUintN(64, BigInt(value))
  const out: Array<number> = []
  while (rest >= 0x80n) {
    out.push(Number(rest & 0x7fn) | 0x80)
    rest >>= 7n
  }
  out.push(Number(rest))
  return out
}
const tag = (field: number, type: number) => varint(field * 8 + type)
const delimited = (field: number, body: ReadonlyArray<number>) => [...tag(field, 2), ...varint(body.length), ...body]

/** A Duration's fields (seconds, nanos, an unknown one), in any order and repeated. */
const duration = fc
  .array(
    fc.oneof(
      fc.integer({ min: -5, max: 40 }).map((s) => [...tag(1, 0), ...varint(s)]),
      fc.integer({ min: 0, max: 999_999_999 }).map((n) => [...tag(2, 0), ...varint(n)]),
      fc.constant([...tag(7, 0), 1])
    ),
    { maxLength: 3 }
  )
  .map((parts) => parts.flat())
/** A Timestamp's seconds, around `now`. */
const timestamp = fc.integer({ min: now / 1000 - 5, max: now / 1000 + 40 }).map((s) => [...tag(1, 0), ...varint(s)])
const idBytes = fc.constantFrom<Array<number>>(
  [0x61],
  [0x62],
  [],
  [0xc3, 0xa9], // é
  [0xef, 0xbb, 0xbf, 0x61], // a BOM, then a
  [0xc3], // not UTF-8: a lead byte alone
  [0xed, 0xa0, 0x80] // not UTF-8: an encoded surrogate
)
const unknown = fc.constantFrom<Array<number>>(
  [...tag(9, 0), 5],
  [...tag(10, 1), 1, 2, 3, 4, 5, 6, 7, 8],
  [...tag(11, 5), 1, 2, 3, 4],
  delimited(12, [1, 2]),
  [...tag(13, 3), ...tag(1, 0), 1, ...tag(13, 4)]
)
const blob = fc.uint8Array({ maxLength: 6 }).map((b) => Array.from(b))
const endpoint = fc
  .array(
    fc.oneof(
      timestamp.map((t) => delimited(1, t)),
      blob.map((b) => delimited(2, b)),
      duration.map((t) => delimited(3, t)),
      unknown
    ),
    { maxLength: 4 }
  )
  .map((parts) => parts.flat())
const affiliate = fc
  .array(
    fc.oneof(
      { weight: 3, arbitrary: idBytes.map((b) => delimited(1, b)) },
      { weight: 1, arbitrary: timestamp.map((t) => delimited(2, t)) },
      { weight: 2, arbitrary: blob.map((b) => delimited(3, b)) },
      { weight: 3, arbitrary: endpoint.map((e) => delimited(4, e)) },
      { weight: 3, arbitrary: duration.map((t) => delimited(5, t)) },
      { weight: 1, arbitrary: unknown }
    ),
    { maxLength: 6 }
  )
  .map((parts) => parts.flat())
const cluster = fc
  .tuple(
    fc.constantFrom("c1", "c2", "cé"),
    fc.array(
      fc.oneof({ weight: 5, arbitrary: affiliate.map((a) => delimited(2, a)) }, { weight: 1, arbitrary: unknown }),
      { maxLength: 5 }
    )
  )
  .map(([id, parts]) => delimited(1, [...delimited(1, Array.from(new TextEncoder().encode(id))), ...parts.flat()]))
const file = fc.array(cluster, { maxLength: 3 }).map((clusters) => Uint8Array.from(clusters.flat()))

const plainAffiliate = (affiliate: Affiliate) => [affiliate.id, affiliate.unsafeRecord, [...affiliate.unsafeLayout]]
const plainDecoded = (decoded: DecodedSnapshot) => ({
  clusters: decoded.clusters.map((c) => [c.id, [...c.affiliates].map(([id, a]) => [id, plainAffiliate(a)])]),
  skipped: decoded.skipped,
  size: decoded.size
})

describe("packed records", () => {
  it("decode, restore, count, expire and save as records built at once do", () => {
    let packedSeen = 0
    fc.assert(
      fc.property(
        file,
        fc.integer({ min: -2000, max: 45_000 }),
        fc.integer({ min: 0, max: 45_000 }),
        (bytes, restoreAfter, gcAfter) => {
          const packed = decode(bytes, now)
          const built = decode(bytes, now, { pack: false })
          for (const c of packed.clusters) {
            if (c.packed === undefined) continue
            packedSeen++
            assert.strictEqual(c.packed.affiliates, c.affiliates.size)
          }
          assert.isTrue(built.clusters.every((c) => c.packed === undefined))
          assert.deepStrictEqual(plainDecoded(packed), plainDecoded(built))

          const at = now + restoreAfter
          const stores = [new ClusterStore(), new ClusterStore()] as const
          const reports = [decode(bytes, now), decode(bytes, now, { pack: false })].map((decoded, i) =>
            decoded.clusters.map((c) => stores[i]!.restore(c.id, c.packed ?? c.affiliates, at))
          )
          assert.deepStrictEqual(reports[0], reports[1])
          const same = <A>(f: (store: ClusterStore) => A) => assert.deepStrictEqual(f(stores[0]), f(stores[1]))
          const saved = (time: number) => (store: ClusterStore) =>
            Array.from(encode(store.clusters.values(), time).bytes)
          same((store) => store.stats())
          same(saved(at))
          same((store) => store.collectGarbage(at + gcAfter))
          same((store) => store.stats())
          same(saved(at + gcAfter))
        }
      ),
      { numRuns: 3000 }
    )
    assert.isAbove(packedSeen, 100, "the runs kept enough clusters packed")
  })
})
