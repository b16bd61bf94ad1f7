import { fromBinary, toBinary } from "@bufbuild/protobuf"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import type { ClusterEntry } from "../../src/core/server/SnapshotCodec.ts"
import { decode, encode, encodeTo, maxClusterSize } from "../../src/core/server/SnapshotCodec.ts"
import { AffiliateSnapshotSchema, StateSnapshotSchema } from "../../src/gen/discovery/storage/discovery_pb.ts"
import { joinPieces } from "../../src/ports/SnapshotStore.ts"
import {
  affiliateEntry,
  affiliateMessage,
  clusterEntry,
  clusterMessage,
  clusterRecord,
  concat,
  duration,
  endpointEntry,
  endpointMessage,
  generatedEntry,
  hex,
  now,
  plainEntries,
  plainState,
  record,
  smallSnapshot,
  stateBinary,
  timestamp,
  toHex,
  utf8,
  varint
} from "../storage/fixtures/snapshots.ts"

const workedExample = "0A 18 0A 01 63 12 13 0A 01 78 1A 01 64 22 07 12 01 65 1A 02 08 1E 2A 02 08 3C"

/** The T28 export case: 100 clusters × 5 affiliates, every even cluster's aff0 with one endpoint, TTLs 1h. */
const hundredClusters = (): Array<ClusterEntry> =>
  Array.from({ length: 100 }, (_, c) =>
    clusterEntry(
      `cluster${c}`,
      Array.from({ length: 5 }, (_, a) =>
        affiliateEntry(
          `aff${a}`,
          utf8(`data-${c}-${a}`),
          3600,
          c % 2 === 0 && a === 0 ? [endpointEntry(utf8(`endpoint-${c}`), 3600)] : []
        )
      )
    )
  )

describe("SnapshotCodec", () => {
  describe("encode", () => {
    it("writes the worked example of PROTOCOL.md §1.5 byte for byte (26 bytes)", () => {
      const state = [clusterEntry("c", [affiliateEntry("x", utf8("d"), 60, [endpointEntry(utf8("e"), 30)])])]
      const encoded = encode(state, now)
      assert.strictEqual(toHex(encoded.bytes), workedExample)
      assert.strictEqual(encoded.bytes.length, 26)
      assert.deepStrictEqual(
        { clusters: encoded.clusters, affiliates: encoded.affiliates, endpoints: encoded.endpoints },
        { clusters: 1, affiliates: 1, endpoints: 1 }
      )
    })

    it("writes an empty state as empty bytes", () => {
      assert.strictEqual(encode([], now).bytes.length, 0)
    })

    it("writes a cluster without affiliates as a record holding only its id", () => {
      assert.strictEqual(toHex(encode([clusterEntry("c")], now).bytes), "0A 03 0A 01 63")
    })

    it("writes a zero TTL as 2A 00 and omits empty data", () => {
      const bytes = encode([clusterEntry("c", [affiliateEntry("x", new Uint8Array(0), 0)])], now).bytes
      assert.strictEqual(toHex(bytes), "0A 0A 0A 01 63 12 05 0A 01 78 2A 00")
    })

    it("writes TTLs as whole seconds truncated toward zero, negative ones as 10-byte varints", () => {
      const ttlOf = (millis: number) => {
        const affiliate = { id: "x", data: new Uint8Array(0), expiresAt: now + millis, endpoints: [] }
        const bytes = encode([{ id: "c", affiliates: new Map([["x", affiliate]]) }], now).bytes
        return toHex(bytes.subarray(10))
      }
      assert.strictEqual(ttlOf(-5000), "2A 0B 08 FB FF FF FF FF FF FF FF FF 01")
      assert.strictEqual(ttlOf(-5999), "2A 0B 08 FB FF FF FF FF FF FF FF FF 01")
      assert.strictEqual(ttlOf(59_999), "2A 02 08 3B")
      assert.strictEqual(ttlOf(999), "2A 00")
      assert.strictEqual(ttlOf(-999), "2A 00")
    })

    it("saturates TTLs at Go's largest duration", () => {
      const affiliate = { id: "x", data: new Uint8Array(0), expiresAt: Number.POSITIVE_INFINITY, endpoints: [] }
      const bytes = encode([{ id: "c", affiliates: new Map([["x", affiliate]]) }], now).bytes
      const decoded = fromBinary(StateSnapshotSchema, bytes)
      assert.strictEqual(decoded.clusters[0]!.affiliates[0]!.ttl!.seconds, 9_223_372_036n)
    })

    it("encodes multi-byte UTF-8 ids like TextEncoder", () => {
      const id = "ÿ€😀\ud800x"
      const bytes = encode([clusterEntry(id)], now).bytes
      assert.deepStrictEqual(Array.from(bytes.subarray(4)), Array.from(utf8(id)))
    })

    it("T28: exports states that decode as an equal StateSnapshot, with matching stats", () => {
      const cases: Array<Array<ClusterEntry>> = [[], [clusterEntry("c1"), clusterEntry("c2")], hundredClusters()]
      for (const clusters of cases) {
        const encoded = encode(clusters, now)
        const decoded = fromBinary(StateSnapshotSchema, encoded.bytes)
        const expected = stateBinary(
          clusters.map((c) =>
            clusterMessage({
              id: c.id,
              affiliates: [...c.affiliates.values()].map((a) =>
                affiliateMessage({
                  id: a.id,
                  data: a.data,
                  ttl: duration(3600),
                  endpoints: a.endpoints.map((e) => endpointMessage({ data: e.data, ttl: duration(3600) }))
                })
              )
            })
          )
        )
        assert.deepStrictEqual(plainState(decoded), plainState(fromBinary(StateSnapshotSchema, expected)))
        const affiliates = clusters.reduce((n, c) => n + c.affiliates.size, 0)
        const endpoints = clusters.reduce(
          (n, c) => n + [...c.affiliates.values()].reduce((m, a) => m + a.endpoints.length, 0),
          0
        )
        assert.deepStrictEqual(
          [encoded.clusters, encoded.affiliates, encoded.endpoints, encoded.bytes.length],
          [clusters.length, affiliates, endpoints, toBinary(StateSnapshotSchema, decoded).length]
        )
      }
      assert.strictEqual(encode(hundredClusters(), now).endpoints, 50)
    })

    it("writes the same bytes as protobuf-es's canonical encoding", () => {
      const encoded = encode(hundredClusters(), now).bytes
      assert.deepStrictEqual(toBinary(StateSnapshotSchema, fromBinary(StateSnapshotSchema, encoded)), encoded)
    })

    it("emits the same bytes in pieces of whole cluster records, a large record in a piece of its own", () => {
      const clusters = [
        ...hundredClusters(),
        clusterEntry("large", [affiliateEntry("a", new Uint8Array(5000).fill(7), 60)])
      ]
      const whole = encode(clusters, now)
      for (const pieceBytes of [1, 64, 1000, 4096, Number.POSITIVE_INFINITY]) {
        const pieces: Array<Uint8Array> = []
        const buffers = new Set<ArrayBufferLike>()
        const contents = encodeTo(
          clusters,
          now,
          (piece) => {
            buffers.add(piece.buffer)
            // The buffer is reused: a piece is only valid during the call.
            pieces.push(piece.slice())
          },
          pieceBytes
        )
        const joined = joinPieces(pieces)
        for (const piece of pieces) {
          // Each piece is a run of whole records: it decodes on its own with nothing skipped.
          assert.deepStrictEqual(decode(piece, now).skipped, [])
          if (pieceBytes !== Number.POSITIVE_INFINITY) assert.isAtMost(piece.length, Math.max(pieceBytes, 5100))
        }
        assert.deepStrictEqual(joined, whole.bytes, `pieces of ${pieceBytes} bytes`)
        assert.deepStrictEqual(
          [contents.clusters, contents.affiliates, contents.endpoints, contents.size],
          [whole.clusters, whole.affiliates, whole.endpoints, whole.bytes.length]
        )
        if (pieceBytes === 4096) {
          assert.isAbove(pieces.length, 1)
          assert.isAtMost(buffers.size, 4, "two buffers in turn, each grown at most once for the large record")
        }
      }
      assert.deepStrictEqual(
        encodeTo([], now, () => assert.fail("nothing to emit")),
        { clusters: 0, affiliates: 0, endpoints: 0, oversized: [], size: 0 }
      )
    })

    it("leaves out a cluster whose record would exceed the limit", () => {
      const big = new Uint8Array(1 << 20)
      const affiliates = Array.from({ length: 132 }, (_, i) => affiliateEntry(`a${i}`, big, 60))
      const encoded = encode([clusterEntry("big", affiliates), clusterEntry("small")], now)
      assert.deepStrictEqual(encoded.oversized, ["big"])
      assert.strictEqual(toHex(encoded.bytes), "0A 07 0A 05 73 6D 61 6C 6C")
    })
  })

  describe("decode", () => {
    it("hands over a packed cluster's affiliates once read: changes to that map are what is written", () => {
      const bytes = encode(
        [clusterEntry("c1", [affiliateEntry("a1", utf8("1"), 60), affiliateEntry("a2", utf8("2"), 60)])],
        now
      ).bytes
      const saved = (pack: boolean) => {
        const [cluster] = decode(bytes, now, { pack }).clusters
        assert.strictEqual(cluster!.packed !== undefined, pack)
        cluster!.affiliates.delete("a2")
        assert.isUndefined(cluster!.packed, "no longer packed once its map is handed out")
        return toHex(encode([cluster!], now).bytes)
      }
      assert.strictEqual(saved(true), saved(false))
      assert.strictEqual(
        saved(true),
        toHex(encode([clusterEntry("c1", [affiliateEntry("a1", utf8("1"), 60)])], now).bytes)
      )
    })

    it("keeps odd but valid records packed, and writes them back byte for byte as when built at once", () => {
      const legacy = toBinary(
        AffiliateSnapshotSchema,
        affiliateMessage({
          id: "a1",
          data: utf8("x"),
          expiration: timestamp(now + 120_000),
          endpoints: [
            endpointMessage({ data: utf8("e1"), ttl: duration(60, 500_000_000) }),
            endpointMessage({ data: utf8("e2"), expiration: timestamp(now + 90_000) })
          ]
        })
      )
      // An unknown field, then the data again (the last one wins), after protobuf-es's fields.
      const odd = concat(legacy, hex("3A 01 00 1A 01 79"))
      const second = toBinary(AffiliateSnapshotSchema, affiliateMessage({ id: "é-2", ttl: duration(30) }))
      const body = concat(hex("12"), varint(odd.length), odd, hex("0A 02 63 31 12"), varint(second.length), second)
      const bytes = record(body)
      const [packed] = decode(bytes, now).clusters
      assert.isDefined(packed!.packed)
      assert.strictEqual(packed!.id, "c1")
      const [built] = decode(bytes, now).clusters
      const later = now + 5000
      const fromPacked = encode([{ id: "c1", affiliates: new Map(), packed: packed!.packed }], later).bytes
      const fromBuilt = encode([{ id: "c1", affiliates: built!.affiliates }], later).bytes
      assert.strictEqual(toHex(fromPacked), toHex(fromBuilt))
      assert.deepStrictEqual(
        plainEntries(decode(fromPacked, later).clusters),
        plainEntries([
          clusterEntry("c1", [
            affiliateEntry("a1", utf8("y"), 120, [endpointEntry(utf8("e1"), 60), endpointEntry(utf8("e2"), 90)]),
            affiliateEntry("é-2", new Uint8Array(0), 30)
          ])
        ])
      )
    })

    it("reads the worked example", () => {
      const decoded = decode(hex(workedExample), now)
      assert.deepStrictEqual(decoded.skipped, [])
      assert.deepStrictEqual(
        plainEntries(decoded.clusters),
        plainEntries([clusterEntry("c", [affiliateEntry("x", utf8("d"), 60, [endpointEntry(utf8("e"), 30)])])])
      )
    })

    it("round-trips records → bytes → records, and protobuf-es reads the same bytes", () => {
      const ttl = fc.integer({ min: -1_000_000, max: 1_000_000_000 })
      const bytes = fc.uint8Array({ maxLength: 40 })
      const affiliate = fc.record({
        id: fc.string({ unit: "binary", maxLength: 12 }),
        data: bytes,
        ttl,
        endpoints: fc.array(fc.record({ data: fc.uint8Array({ minLength: 1, maxLength: 40 }), ttl }), {
          maxLength: 4
        })
      })
      const cluster = fc.record({
        id: fc.string({ unit: "binary", minLength: 1, maxLength: 12 }),
        affiliates: fc.uniqueArray(affiliate, { selector: (a) => a.id, maxLength: 5 })
      })
      const state = fc.uniqueArray(cluster, { selector: (c) => c.id, maxLength: 6 })
      fc.assert(
        fc.property(state, (generated) => {
          const clusters = generated.map(generatedEntry)
          const encoded = encode(clusters, now)
          const decoded = decode(encoded.bytes, now)
          assert.deepStrictEqual(decoded.skipped, [])
          assert.deepStrictEqual(plainEntries(decoded.clusters), plainEntries(clusters))
          const viaProtobufEs = toBinary(StateSnapshotSchema, fromBinary(StateSnapshotSchema, encoded.bytes))
          assert.deepStrictEqual(viaProtobufEs, encoded.bytes)
        }),
        { numRuns: 200 }
      )
    })

    it("T30: takes the legacy expiration when there is no TTL, and the TTL when both are present", () => {
      const bytes = stateBinary([
        clusterMessage({
          id: "c",
          affiliates: [
            affiliateMessage({
              id: "legacy",
              expiration: timestamp(now + 30 * 60_000),
              endpoints: [endpointMessage({ data: utf8("e"), expiration: timestamp(now + 15 * 60_000) })]
            }),
            affiliateMessage({
              id: "both",
              expiration: timestamp(now + 5_000),
              ttl: duration(120, 500_000_000),
              endpoints: [endpointMessage({ data: utf8("e"), expiration: timestamp(now + 5_000), ttl: duration(90) })]
            }),
            affiliateMessage({ id: "neither" })
          ]
        })
      ])
      const [cluster] = decode(bytes, now).clusters
      const expiry = (id: string) => {
        const a = cluster!.affiliates.get(id)!
        return [a.expiresAt - now, ...a.endpoints.map((e) => e.expiresAt - now)]
      }
      assert.deepStrictEqual(expiry("legacy"), [30 * 60_000, 15 * 60_000])
      assert.deepStrictEqual(expiry("both"), [120_500, 90_000])
      assert.deepStrictEqual(expiry("neither"), [-now])
    })

    it("T31: imports a cluster of exactly the maximum size and skips one affiliate more", () => {
      // One affiliate of the maximal cluster, encoded by protobuf-es: a 256-byte id, 2048-byte
      // data, 64 endpoints of 2048 bytes, and TTLs of the largest Go duration.
      const maxTtl = duration(9_223_372_036, 854_775_807)
      const affiliate = toBinary(
        AffiliateSnapshotSchema,
        affiliateMessage({
          id: "a".repeat(256),
          data: new Uint8Array(2048).fill(1),
          ttl: maxTtl,
          endpoints: Array.from({ length: 64 }, (_, i) =>
            endpointMessage({ data: new Uint8Array(2048).fill(i), ttl: maxTtl })
          )
        })
      )
      const affiliateField = concat(hex("12"), varint(affiliate.length), affiliate)
      const clusterId = concat(hex("0A"), varint(256), utf8("c".repeat(256)))
      const body = new Uint8Array(clusterId.length + 1024 * affiliateField.length)
      body.set(clusterId)
      for (let i = 0; i < 1024; i++) {
        const at = clusterId.length + i * affiliateField.length
        body.set(affiliateField, at)
        // A distinct id for each affiliate: its index in hex over the first characters.
        body.set(utf8(i.toString(16).padStart(4, "0")), at + affiliateField.length - affiliate.length + 3)
      }
      assert.strictEqual(body.length, maxClusterSize)

      const fits = decode(record(body), now)
      assert.deepStrictEqual(fits.skipped, [])
      assert.strictEqual(fits.clusters[0]!.affiliates.size, 1024)
      assert.strictEqual(fits.clusters[0]!.affiliates.get(`0000${"a".repeat(252)}`)!.endpoints.length, 64)

      const overflow = toBinary(AffiliateSnapshotSchema, affiliateMessage({ id: "overflow", ttl: duration(60) }))
      const tooLarge = concat(record(concat(body, hex("12"), varint(overflow.length), overflow)), hex("0A 03 0A 01 64"))
      const skipped = decode(tooLarge, now)
      assert.deepStrictEqual(
        skipped.clusters.map((c) => c.id),
        ["d"]
      )
      assert.strictEqual(skipped.skipped.length, 1)
      assert.match(skipped.skipped[0]!.reason, /over the 137912579-byte limit/)
      assert.strictEqual(skipped.skipped[0]!.length, tooLarge.length - 5)
    })

    it("refuses a record length over the limit without reading further", () => {
      const bytes = concat(hex("0A"), varint(maxClusterSize + 1), hex("0A 01 63"))
      const decoded = decode(bytes, now)
      assert.deepStrictEqual(decoded.clusters, [])
      assert.deepStrictEqual(
        decoded.skipped.map((s) => [s.offset, s.length]),
        [[0, bytes.length]]
      )
      assert.match(decoded.skipped[0]!.reason, /claims 137912580 bytes, over the 137912579-byte limit/)
    })

    it("loads every complete record of a file cut at any byte, and reports the rest", () => {
      const { bytes, ends } = smallSnapshot()
      const all = plainEntries(decode(bytes, now).clusters)
      assert.strictEqual(all.length, 3)
      for (let cut = 0; cut <= bytes.length; cut++) {
        const decoded = decode(bytes.subarray(0, cut), now)
        const complete = ends.filter((end) => end <= cut)
        const lastEnd = complete.length === 0 ? 0 : complete[complete.length - 1]!
        assert.deepStrictEqual(plainEntries(decoded.clusters), all.slice(0, complete.length), `cut at ${cut}`)
        if (cut === lastEnd) assert.deepStrictEqual(decoded.skipped, [], `cut at ${cut}`)
        else {
          assert.strictEqual(decoded.skipped.length, 1, `cut at ${cut}`)
          assert.deepStrictEqual([decoded.skipped[0]!.offset, decoded.skipped[0]!.length], [lastEnd, cut - lastEnd])
          assert.match(decoded.skipped[0]!.reason, /truncated/)
        }
      }
    })

    it("does not import a phantom cluster from a file cut right after a tag byte (Q14)", () => {
      const decoded = decode(hex("0A 03 0A 01 63 0A"), now)
      assert.deepStrictEqual(
        decoded.clusters.map((c) => c.id),
        ["c"]
      )
      assert.deepStrictEqual(
        decoded.skipped.map((s) => [s.offset, s.length]),
        [[5, 1]]
      )
    })

    it("skips and reports a record whose ID is not valid UTF-8 instead of changing the ID", () => {
      // Cluster "c" (valid), then a cluster whose id is FF FE, then cluster "d".
      const decoded = decode(hex("0A 03 0A 01 63 0A 04 0A 02 FF FE 0A 03 0A 01 64"), now)
      assert.deepStrictEqual(
        decoded.clusters.map((c) => c.id),
        ["c", "d"]
      )
      assert.deepStrictEqual(
        decoded.skipped.map((s) => [s.offset, s.length]),
        [[5, 6]]
      )
      assert.match(decoded.skipped[0]!.reason, /not valid UTF-8/)
    })

    it("skips an overlong varint and everything after it", () => {
      const decoded = decode(hex("0A 03 0A 01 63 0A FF FF FF FF FF FF FF FF FF FF 01 0A 03 0A 01 64"), now)
      assert.deepStrictEqual(
        decoded.clusters.map((c) => c.id),
        ["c"]
      )
      assert.deepStrictEqual(
        decoded.skipped.map((s) => [s.offset, s.length]),
        [[5, 17]]
      )
    })

    it("skips unknown top-level fields of every wire type and keeps reading", () => {
      const bytes = concat(
        hex("0A 03 0A 01 61"),
        hex("10 96 01"), // field 2, varint
        hex("19 01 02 03 04 05 06 07 08"), // field 3, fixed64
        hex("22 02 AA BB"), // field 4, length-delimited
        hex("2B 08 01 2C"), // field 5, group holding a varint
        hex("35 01 02 03 04"), // field 6, fixed32
        hex("0A 03 0A 01 62")
      )
      const decoded = decode(bytes, now)
      assert.deepStrictEqual(
        decoded.clusters.map((c) => c.id),
        ["a", "b"]
      )
      assert.deepStrictEqual(
        decoded.skipped.map((s) => [s.offset, s.length]),
        [
          [5, 3],
          [8, 9],
          [17, 4],
          [21, 4],
          [25, 5]
        ]
      )
      assert.match(decoded.skipped[0]!.reason, /unknown top-level field 2/)
    })

    it("ends the file at an invalid tag", () => {
      const decoded = decode(hex("0A 03 0A 01 61 00 0A 03 0A 01 62"), now)
      assert.deepStrictEqual(
        decoded.clusters.map((c) => c.id),
        ["a"]
      )
      assert.deepStrictEqual(
        decoded.skipped.map((s) => [s.offset, s.length]),
        [[5, 6]]
      )
    })

    it("keeps the first of two records with the same cluster id and loads the rest", () => {
      const first = clusterRecord(clusterMessage({ id: "c", affiliates: [affiliateMessage({ id: "first" })] }))
      const second = clusterRecord(clusterMessage({ id: "c", affiliates: [affiliateMessage({ id: "second" })] }))
      const other = clusterRecord(clusterMessage({ id: "d" }))
      const decoded = decode(concat(first, second, other), now)
      assert.deepStrictEqual(
        decoded.clusters.map((c) => [c.id, [...c.affiliates.keys()]]),
        [
          ["c", ["first"]],
          ["d", []]
        ]
      )
      assert.deepStrictEqual(
        decoded.skipped.map((s) => [s.offset, s.length]),
        [[first.length, second.length]]
      )
      assert.match(decoded.skipped[0]!.reason, /duplicate cluster "c"/)
    })

    it("skips a malformed record alone, and a record without a cluster id", () => {
      // The affiliate claims 9 bytes where its cluster record has 3 left.
      const malformed = hex("0A 06 0A 01 62 12 09 0A")
      const bytes = concat(hex("0A 03 0A 01 61"), malformed, hex("0A 00"), hex("0A 03 0A 01 63"))
      const decoded = decode(bytes, now)
      assert.deepStrictEqual(
        decoded.clusters.map((c) => c.id),
        ["a", "c"]
      )
      assert.deepStrictEqual(
        decoded.skipped.map((s) => [s.offset, s.length]),
        [
          [5, 8],
          [13, 2]
        ]
      )
      assert.match(decoded.skipped[0]!.reason, /malformed record/)
      assert.match(decoded.skipped[1]!.reason, /no cluster ID/)
    })

    it("ignores unknown nested fields, and the last affiliate with a repeated id wins", () => {
      const affiliate = (data: string) =>
        concat(toBinary(AffiliateSnapshotSchema, affiliateMessage({ id: "x", data: utf8(data) })), hex("78 01"))
      const body = concat(
        hex("0A 01 63"),
        hex("12"),
        varint(affiliate("one").length),
        affiliate("one"),
        hex("12"),
        varint(affiliate("two").length),
        affiliate("two"),
        hex("18 07")
      )
      const decoded = decode(record(body), now)
      assert.deepStrictEqual(decoded.skipped, [])
      assert.deepStrictEqual(
        [...decoded.clusters[0]!.affiliates.values()].map((a) => new TextDecoder().decode(a.data)),
        ["two"]
      )
    })

    it("returns plain byte arrays that do not share memory with the file, even from a Buffer", () => {
      const file = Buffer.from(hex(workedExample))
      const decoded = decode(file, now)
      file.fill(0)
      const data = decoded.clusters[0]!.affiliates.get("x")!.data
      assert.strictEqual(new TextDecoder().decode(data), "d")
      assert.strictEqual(Object.getPrototypeOf(data), Uint8Array.prototype)
    })

    it("treats a stray end-group tag at the top level as invalid", () => {
      const decoded = decode(hex("0A 03 0A 01 61 0C 0A 03 0A 01 62"), now)
      assert.deepStrictEqual(
        decoded.clusters.map((c) => c.id),
        ["a"]
      )
      assert.match(decoded.skipped[0]!.reason, /invalid record tag 0xc at offset 5/)
    })

    it("skips a record holding a group that ends with another field number", () => {
      // Cluster "c" with an unknown field 3: start group { field 1 varint } end group of field 4.
      const decoded = decode(hex("0A 07 0A 01 63 1B 08 01 24 0A 03 0A 01 64"), now)
      assert.deepStrictEqual(
        decoded.clusters.map((c) => c.id),
        ["d"]
      )
      assert.strictEqual(decoded.skipped[0]!.reason, "malformed record at offset 0: mismatched end of group")
    })

    it("skips a record whose TTL has the wrong wire type", () => {
      // Affiliate "x" with ttl { seconds as a length-delimited field }.
      const decoded = decode(hex("0A 0C 0A 01 63 12 07 0A 01 78 2A 02 0A 00 0A 03 0A 01 64"), now)
      assert.deepStrictEqual(
        decoded.clusters.map((c) => c.id),
        ["d"]
      )
      assert.match(decoded.skipped[0]!.reason, /field seconds has wire type 2, expected 0/)
    })
  })

  describe("ClusterState snapshots", () => {
    const inState = <A, E>(body: Effect.Effect<A, E, ClusterState>) =>
      Effect.gen(function* () {
        yield* TestClock.setTime(now)
        return yield* body
      }).pipe(Effect.provide(ClusterState.layer))

    it.effect("T29: imports snapshots with matching stats and re-exports the same bytes", () =>
      Effect.gen(function* () {
        const twoByFive = Array.from({ length: 2 }, (_, c) =>
          clusterEntry(
            `c${c}`,
            Array.from({ length: 5 }, (_, a) =>
              affiliateEntry(`a${a}`, utf8(`d${c}${a}`), 60 * (a + 1), [endpointEntry(utf8(`e${a}`), 30)])
            )
          )
        )
        const cases = [[], [clusterEntry("c", [affiliateEntry("x", utf8("d"), 60)])], twoByFive]
        for (const clusters of cases) {
          const bytes = encode(clusters, now).bytes
          const result = yield* inState(
            Effect.gen(function* () {
              const state = yield* ClusterState
              const imported = yield* state.importSnapshot(bytes)
              const exported = yield* state.exportSnapshot
              return { imported, exported }
            })
          )
          assert.deepStrictEqual(
            [result.imported.clusters, result.imported.affiliates, result.imported.endpoints],
            [clusters.length, clusters.length * (clusters.length === 2 ? 5 : 1), clusters.length === 2 ? 10 : 0]
          )
          assert.deepStrictEqual(result.imported.skipped, [])
          assert.deepStrictEqual(toHex(result.exported.bytes), toHex(bytes))
        }
      })
    )

    it.effect("T30: legacy expirations re-export as TTLs of exactly 30m and 15m", () =>
      inState(
        Effect.gen(function* () {
          const state = yield* ClusterState
          const legacy = stateBinary([
            clusterMessage({
              id: "c",
              affiliates: [
                affiliateMessage({
                  id: "x",
                  expiration: timestamp(now + 30 * 60_000),
                  endpoints: [endpointMessage({ data: utf8("e"), expiration: timestamp(now + 15 * 60_000) })]
                })
              ]
            })
          ])
          yield* state.importSnapshot(legacy)
          const exported = fromBinary(StateSnapshotSchema, (yield* state.exportSnapshot).bytes)
          const affiliate = exported.clusters[0]!.affiliates[0]!
          assert.strictEqual(affiliate.ttl!.seconds, 1800n)
          assert.strictEqual(affiliate.endpoints[0]!.ttl!.seconds, 900n)
          assert.isUndefined(affiliate.expiration)
        })
      )
    )

    it.effect("drops entries that expired before the import, by GC's rules, and keeps empty clusters", () =>
      inState(
        Effect.gen(function* () {
          const state = yield* ClusterState
          const bytes = encode(
            [
              clusterEntry("c", [
                affiliateEntry("gone", utf8("d"), -1),
                affiliateEntry("now", utf8("d"), 0, [endpointEntry(utf8("e0"), 0), endpointEntry(utf8("e1"), 1)])
              ]),
              clusterEntry("empty")
            ],
            now
          ).bytes
          const imported = yield* state.importSnapshot(bytes)
          assert.deepStrictEqual([imported.clusters, imported.affiliates, imported.endpoints], [2, 1, 1])
          assert.deepStrictEqual([imported.expiredAffiliates, imported.expiredEndpoints], [1, 1])
          const listed = yield* state.list({ clusterId: "c" })
          assert.deepStrictEqual(
            listed.map((a) => [a.id, a.endpoints.length]),
            [["now", 1]]
          )
          assert.strictEqual((yield* state.stats).clusters, 2)
        })
      )
    )

    it.effect("reports a cluster already in memory instead of replacing it", () =>
      inState(
        Effect.gen(function* () {
          const state = yield* ClusterState
          yield* state.update({ clusterId: "c", affiliateId: "live", endpoints: [], ttl: Duration.minutes(1) })
          const imported = yield* state.importSnapshot(encode([clusterEntry("c"), clusterEntry("d")], now).bytes)
          assert.strictEqual(imported.clusters, 1)
          assert.match(imported.skipped[0]!.reason, /already in memory/)
          assert.deepStrictEqual(
            (yield* state.list({ clusterId: "c" })).map((a) => a.id),
            ["live"]
          )
        })
      )
    )
  })
})
