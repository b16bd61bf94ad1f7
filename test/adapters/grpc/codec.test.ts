import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { DurationSchema } from "@bufbuild/protobuf/wkt"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Result } from "effect"
import fc from "fast-check"
import { ClusterService } from "../../../src/adapters/grpc/ClusterService.ts"
import * as Codec from "../../../src/adapters/grpc/codec.ts"
import {
  AffiliateDeleteRequestSchema,
  AffiliateUpdateRequestSchema,
  HelloRequestSchema,
  HelloResponseSchema,
  ListRequestSchema,
  ListResponseSchema,
  WatchRequestSchema,
  WatchResponseSchema
} from "../../../src/gen/discovery/server/cluster_pb.ts"
import type { AffiliateView, WatchEvent } from "../../../src/ports/ClusterApi.ts"

const int64Max = (1n << 63n) - 1n
const int64Min = -(1n << 63n)

const id = fc.string({ unit: "binary", maxLength: 40 }).filter((s) => s.isWellFormed())
const multibyteId = fc.constantFrom("é", "€", "😀", "ключ-😀-€", "\uFFFD")
const anyId = fc.oneof(id, multibyteId)
const bytes = fc.uint8Array({ maxLength: 64 })
const ttl = fc.bigInt({ min: int64Min, max: int64Max }).map(Duration.nanos)
const affiliate: fc.Arbitrary<AffiliateView> = fc.record({
  id: anyId,
  data: bytes,
  endpoints: fc.array(bytes, { maxLength: 6 })
})

const ttlOf = (seconds: bigint, nanos = 0) => Codec.ttlFromProto(create(DurationSchema, { seconds, nanos }))

const assertNanos = (duration: Duration.Duration, expected: bigint) =>
  assert.strictEqual(Duration.toNanosUnsafe(duration), expected)

const decoded = <A>(result: Codec.DecodedRequest<A>): A => {
  if (Result.isFailure(result)) assert.fail(`unexpected failure: ${result.failure.message}`)
  return result.success
}

const rejection = <A>(result: Codec.DecodedRequest<A>): string => {
  if (Result.isSuccess(result)) return assert.fail("expected an InvalidArgument")
  assert.strictEqual(result.failure._tag, "InvalidArgument")
  return result.failure.message
}

/** A string field as protobuf writes it, with raw (possibly invalid) UTF-8 bytes. */
const varint = (n: number): Array<number> => (n < 0x80 ? [n] : [(n & 0x7f) | 0x80, ...varint(n >>> 7)])

const field = (fieldNo: number, value: ReadonlyArray<number>) => [(fieldNo << 3) | 2, ...varint(value.length), ...value]

describe("codec", () => {
  describe("TTL", () => {
    it("reads a missing TTL as zero", () => {
      assertNanos(Codec.ttlFromProto(undefined), 0n)
    })

    it("reads seconds and nanos as seconds * 1e9 + nanos", () => {
      assert.isTrue(Duration.equals(ttlOf(1800n), Duration.minutes(30)))
      assertNanos(ttlOf(1800n, 1), 1_800_000_000_001n)
      assert.isTrue(Duration.isGreaterThan(ttlOf(1800n, 1), Duration.minutes(30)))
      assertNanos(ttlOf(-5n), -5_000_000_000n)
      assertNanos(ttlOf(-1n, -500_000_000), -1_500_000_000n)
      assertNanos(ttlOf(1n, -1), 999_999_999n)
      assertNanos(ttlOf(0n, 2_147_483_647), 2_147_483_647n)
    })

    it("saturates like Go on overflow", () => {
      assertNanos(ttlOf(9_223_372_036n, 854_775_807), int64Max)
      assertNanos(ttlOf(9_223_372_036n, 854_775_808), int64Max)
      assertNanos(ttlOf(-9_223_372_036n, -854_775_808), int64Min)
      assertNanos(ttlOf(-9_223_372_036n, -854_775_809), int64Min)
      assertNanos(ttlOf(1n << 62n), int64Max)
      assertNanos(ttlOf(-(1n << 62n)), int64Min)
      assertNanos(ttlOf(int64Max, 999_999_999), int64Max)
      assertNanos(ttlOf(int64Min, -999_999_999), int64Min)
      // Go flags the multiplication itself, even when the nanos would bring the sum back in range.
      assertNanos(ttlOf(9_223_372_037n, -999_999_999), int64Max)
    })

    it("writes whole seconds truncated toward zero and same-sign nanos", () => {
      const written = (duration: Duration.Duration) => {
        const proto = Codec.ttlToProto(duration)
        return [proto.seconds, proto.nanos] as const
      }
      assert.deepStrictEqual(written(Duration.minutes(30)), [1800n, 0])
      assert.deepStrictEqual(written(Duration.millis(1500)), [1n, 500_000_000])
      assert.deepStrictEqual(written(Duration.nanos(-1_500_000_000n)), [-1n, -500_000_000])
      assert.deepStrictEqual(written(Duration.zero), [0n, 0])
      assert.deepStrictEqual(written(Duration.infinity), [9_223_372_036n, 854_775_807])
      assert.deepStrictEqual(written(Duration.negativeInfinity), [-9_223_372_036n, -854_775_808])
      assert.deepStrictEqual([...toBinary(DurationSchema, Codec.ttlToProto(Duration.minutes(30)))], [0x08, 0x88, 0x0e])
    })

    it("round-trips every int64 nanosecond count through the wire", () => {
      fc.assert(
        fc.property(ttl, (duration) => {
          const wire = toBinary(DurationSchema, Codec.ttlToProto(duration))
          const back = Codec.ttlFromProto(fromBinary(DurationSchema, wire))
          assert.strictEqual(Duration.toNanosUnsafe(back), Duration.toNanosUnsafe(duration))
        })
      )
    })
  })

  describe("requests round-trip: port -> proto -> bytes -> proto -> port", () => {
    it("AffiliateUpdate, keeping absent data apart from empty data", () => {
      fc.assert(
        fc.property(anyId, anyId, fc.option(bytes, { nil: undefined }), fc.array(bytes), ttl, (c, a, data, eps, t) => {
          const request = { clusterId: c, affiliateId: a, data, endpoints: eps, ttl: t }
          const wire = toBinary(AffiliateUpdateRequestSchema, Codec.affiliateUpdateRequestToProto(request))
          // the caller's address is the transport's, not the message's: it comes back as the server saw it
          const address = new Uint8Array([192, 0, 2, 1])
          const back = Codec.affiliateUpdateRequestFromProto(decoded(Codec.decodeAffiliateUpdateRequest(wire)), address)
          assert.deepStrictEqual({ ...back, ttl: undefined }, { ...request, ttl: undefined, clientAddress: address })
          assert.isTrue(Duration.equals(back.ttl, request.ttl))
        })
      )
    })

    it("Hello, AffiliateDelete, List and Watch", () => {
      fc.assert(
        fc.property(anyId, anyId, id, (c, a, version) => {
          const hello = { clusterId: c, clientVersion: version }
          const helloWire = toBinary(HelloRequestSchema, Codec.helloRequestToProto(hello))
          const address = new Uint8Array([127, 0, 0, 1])
          assert.deepStrictEqual(Codec.helloRequestFromProto(decoded(Codec.decodeHelloRequest(helloWire)), address), {
            ...hello,
            clientAddress: address
          })

          const del = { clusterId: c, affiliateId: a }
          const delWire = toBinary(AffiliateDeleteRequestSchema, Codec.affiliateDeleteRequestToProto(del))
          assert.deepStrictEqual(
            Codec.affiliateDeleteRequestFromProto(decoded(Codec.decodeAffiliateDeleteRequest(delWire)), address),
            { ...del, clientAddress: address }
          )

          const cluster = { clusterId: c }
          const listWire = toBinary(ListRequestSchema, Codec.listRequestToProto(cluster))
          assert.deepStrictEqual(Codec.clusterRequestFromProto(decoded(Codec.decodeListRequest(listWire))), cluster)
          const watchWire = toBinary(WatchRequestSchema, Codec.watchRequestToProto(cluster))
          assert.deepStrictEqual(Codec.watchRequestFromProto(decoded(Codec.decodeWatchRequest(watchWire))), cluster)
        })
      )
    })
  })

  describe("responses round-trip", () => {
    it("HelloResponse: the service's serializer writes the bytes protobuf-es writes", () => {
      const serialize = ClusterService.Hello.responseSerialize
      const unknown = fc.option(
        fc.uint8Array({ minLength: 1, maxLength: 8 }).map((data) => [{ no: 9, wireType: 2, data }]),
        { nil: undefined }
      )
      const redirect = fc.option(
        fc.record({ endpoint: fc.oneof(fc.string(), fc.string({ unit: "grapheme", minLength: 60 })), unknown }),
        { nil: undefined }
      )
      fc.assert(
        fc.property(redirect, fc.uint8Array({ maxLength: 200 }), unknown, (r, clientIp, $unknown) => {
          const message = create(HelloResponseSchema, {
            clientIp,
            ...(r === undefined ? {} : { redirect: { endpoint: r.endpoint, $unknown: r.unknown } })
          })
          if ($unknown !== undefined) message.$unknown = $unknown
          assert.deepStrictEqual(Array.from(serialize(message)), Array.from(toBinary(HelloResponseSchema, message)))
        }),
        { numRuns: 500 }
      )
    })

    it("HelloResponse, with an absent redirect or address staying absent", () => {
      const redirect = fc.option(fc.string({ minLength: 1 }), { nil: undefined })
      const address = fc.option(fc.uint8Array({ minLength: 1, maxLength: 20 }), { nil: undefined })
      fc.assert(
        fc.property(redirect, address, (r, ip) => {
          const response = { redirect: r, clientIp: ip }
          const wire = toBinary(HelloResponseSchema, Codec.helloResponseToProto(response))
          assert.deepStrictEqual(Codec.helloResponseFromProto(fromBinary(HelloResponseSchema, wire)), response)
        })
      )
    })

    it("ListResponse", () => {
      fc.assert(
        fc.property(fc.array(affiliate, { maxLength: 8 }), (affiliates) => {
          const wire = toBinary(ListResponseSchema, Codec.listResponseToProto(affiliates))
          assert.deepStrictEqual(Codec.listResponseFromProto(fromBinary(ListResponseSchema, wire)), affiliates)
        })
      )
    })

    it("watch deltas: Updated carries the full affiliate, Deleted the ID alone", () => {
      fc.assert(
        fc.property(affiliate, fc.boolean(), fc.nat(), (view, deleted, revision) => {
          const event: WatchEvent = deleted
            ? { _tag: "Deleted", revision, affiliateId: view.id }
            : { _tag: "Updated", revision, affiliate: view }
          const [wire, ...rest] = Codec.encodeWatchEvent(event, 1)
          assert.strictEqual(rest.length, 0)
          const message = fromBinary(WatchResponseSchema, wire!)
          assert.strictEqual(message.deleted, deleted)
          if (deleted) assert.deepStrictEqual(message.affiliates[0]!.data, new Uint8Array(0))
          assert.deepStrictEqual(Codec.watchResponseToEvents(message, false, revision), [event])
        })
      )
    })

    it("an empty snapshot is one empty message", () => {
      const messages = Codec.encodeWatchEvent({ _tag: "Snapshot", revision: 0, affiliates: [] }, 1024)
      assert.deepStrictEqual(messages, [new Uint8Array(0)])
      assert.deepStrictEqual(Codec.watchResponseToEvents(fromBinary(WatchResponseSchema, messages[0]!), true, 0), [
        { _tag: "Snapshot", revision: 0, affiliates: [] }
      ])
    })

    it("a snapshot within budget is exactly the WatchResponse protobuf-es would write", () => {
      fc.assert(
        fc.property(fc.array(affiliate, { maxLength: 8 }), (affiliates) => {
          const messages = Codec.encodeSnapshot(affiliates, 1 << 20)
          const expected = toBinary(WatchResponseSchema, create(WatchResponseSchema, { affiliates: [] }))
          const whole = toBinary(
            WatchResponseSchema,
            create(WatchResponseSchema, { affiliates: affiliates.map(Codec.affiliateToProto) })
          )
          assert.deepStrictEqual(messages, [affiliates.length === 0 ? expected : whole])
        })
      )
    })

    it("a snapshot over budget splits into messages within budget that together hold every affiliate", () => {
      fc.assert(
        fc.property(
          fc.array(affiliate, { minLength: 1, maxLength: 30 }),
          fc.integer({ min: 1, max: 600 }),
          (all, budget) => {
            const messages = Codec.encodeSnapshot(all, budget)
            const decodedMessages = messages.map((m) => fromBinary(WatchResponseSchema, m))
            for (const [i, message] of messages.entries()) {
              assert.isTrue(message.length <= budget || decodedMessages[i]!.affiliates.length === 1)
              assert.isFalse(decodedMessages[i]!.deleted)
            }
            const [first, ...later] = decodedMessages
            const snapshot = Codec.watchResponseToEvents(first!, true, 0)
            const merged = [
              ...(snapshot[0]!._tag === "Snapshot" ? snapshot[0]!.affiliates : []),
              ...later.flatMap((m) =>
                Codec.watchResponseToEvents(m, false, 1).map((e) => (e._tag === "Updated" ? e.affiliate : undefined))
              )
            ]
            assert.deepStrictEqual(merged, all)
          }
        )
      )
    })
  })

  describe("UTF-8 of IDs (quirk Q20)", () => {
    const invalid = [0xff, 0xfe]
    const replacement = [0xef, 0xbf, 0xbd]

    it("rejects a cluster ID that is not valid UTF-8", () => {
      const wire = new Uint8Array([...field(1, invalid), ...field(2, [0x76])])
      assert.strictEqual(rejection(Codec.decodeHelloRequest(wire)), "cluster ID is not valid UTF-8")
      assert.strictEqual(rejection(Codec.decodeListRequest(wire)), "cluster ID is not valid UTF-8")
      assert.strictEqual(rejection(Codec.decodeWatchRequest(wire)), "cluster ID is not valid UTF-8")
    })

    it("rejects an affiliate ID that is not valid UTF-8, after checking the cluster ID", () => {
      const badAffiliate = new Uint8Array([...field(1, [0x63]), ...field(2, invalid)])
      assert.strictEqual(rejection(Codec.decodeAffiliateUpdateRequest(badAffiliate)), "affiliate ID is not valid UTF-8")
      assert.strictEqual(rejection(Codec.decodeAffiliateDeleteRequest(badAffiliate)), "affiliate ID is not valid UTF-8")
      const bothBad = new Uint8Array([...field(1, [0xc3]), ...field(2, invalid)])
      assert.strictEqual(rejection(Codec.decodeAffiliateUpdateRequest(bothBad)), "cluster ID is not valid UTF-8")
    })

    it("answers a bad ID in the order of §2.3: empty and too long before UTF-8, cluster before affiliate", () => {
      const emptyClusterBadAffiliate = new Uint8Array([...field(2, invalid)])
      assert.strictEqual(
        rejection(Codec.decodeAffiliateUpdateRequest(emptyClusterBadAffiliate)),
        "cluster ID can't be empty"
      )
      const longBadCluster = new Uint8Array([
        ...field(
          1,
          Array.from({ length: 300 }, () => 0xff)
        )
      ])
      assert.strictEqual(rejection(Codec.decodeListRequest(longBadCluster)), "cluster ID is too long")
      const longBadAffiliate = new Uint8Array([
        ...field(1, [0x63]),
        ...field(
          2,
          Array.from({ length: 257 }, () => 0xff)
        )
      ])
      assert.strictEqual(rejection(Codec.decodeAffiliateDeleteRequest(longBadAffiliate)), "affiliate ID is too long")
    })

    it("accepts a real U+FFFD and skips other fields while scanning", () => {
      const ttlField = [0x2a, 0x02, 0x08, 0x3c]
      const valid = new Uint8Array([...field(1, replacement), ...ttlField, ...field(2, replacement)])
      const message = decoded(Codec.decodeAffiliateUpdateRequest(valid))
      assert.strictEqual(message.clusterId, "\uFFFD")
      assert.strictEqual(message.affiliateId, "\uFFFD")
      assert.strictEqual(message.ttl?.seconds, 60n)
      const invalidAfterTtl = new Uint8Array([...field(1, replacement), ...ttlField, ...field(2, [0xff])])
      assert.strictEqual(
        rejection(Codec.decodeAffiliateUpdateRequest(invalidAfterTtl)),
        "affiliate ID is not valid UTF-8"
      )
    })

    it("reads an invalid client version with replacement characters, as the original never checks it", () => {
      const wire = new Uint8Array([...field(1, [0x63]), ...field(2, [0x76, 0xff, 0x31])])
      const message = decoded(Codec.decodeHelloRequest(wire))
      assert.strictEqual(message.clusterId, "c")
      assert.strictEqual(message.clientVersion, "v\uFFFD1")
    })

    it("still throws on bytes that are not protobuf at all", () => {
      assert.throws(() => Codec.decodeHelloRequest(new Uint8Array([0x0a, 0x05, 0x61])))
    })
  })
})
