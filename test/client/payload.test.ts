import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import fc from "fast-check"
import type { Affiliate } from "../../src/gen/discovery/client/affiliate_pb.ts"
import { AffiliateSchema, EndpointSchema } from "../../src/gen/discovery/client/affiliate_pb.ts"
import type { AffiliateInfo, AffiliateInfoInit } from "../../src/core/client/payload.ts"
import { decodeAffiliate, decodeEndpoint, encodeAffiliate, encodeEndpoint } from "../../src/core/client/payload.ts"
import { hex, toHex } from "./fixtures.ts"

const bytes = fc.uint8Array({ maxLength: 20 })
const uint32 = fc.nat({ max: 0xffffffff })
const text = fc.string({ unit: "grapheme", maxLength: 12 })

const affiliateArb: fc.Arbitrary<AffiliateInfo> = fc.record({
  nodeId: text,
  addresses: fc.array(bytes, { maxLength: 3 }),
  hostname: text,
  nodename: text,
  machineType: text,
  operatingSystem: text,
  kubespan: fc.option(
    fc.record({
      publicKey: text,
      address: bytes,
      additionalAddresses: fc.array(fc.record({ ip: bytes, bits: uint32 }), { maxLength: 3 })
    }),
    { nil: undefined }
  ),
  controlPlane: fc.option(fc.record({ apiServerPort: uint32 }), { nil: undefined })
})

const toMessage = (a: AffiliateInfo): Affiliate =>
  create(AffiliateSchema, {
    ...a,
    addresses: [...a.addresses],
    kubespan: a.kubespan && { ...a.kubespan, additionalAddresses: [...a.kubespan.additionalAddresses] }
  })

// protobuf-es messages carry $typeName: strip it to compare with our plain objects
const plain = (value: unknown): unknown =>
  value instanceof Uint8Array
    ? toHex(value)
    : Array.isArray(value)
      ? value.map(plain)
      : value !== null && typeof value === "object"
        ? Object.fromEntries(
            Object.entries(value)
              .filter(([k, v]) => k !== "$typeName" && v !== undefined)
              .map(([k, v]) => [k, plain(v)])
          )
        : value

const decoded = (buf: Uint8Array): AffiliateInfo => Result.getOrThrow(decodeAffiliate(buf))

describe("payload", () => {
  it("encodes affiliates exactly as protobuf-es does (canonical form)", () => {
    fc.assert(
      fc.property(affiliateArb, (a) => {
        assert.strictEqual(toHex(encodeAffiliate(a)), toHex(toBinary(AffiliateSchema, toMessage(a))))
      }),
      { numRuns: 150 }
    )
  })

  it("decodes what protobuf-es encodes to the same values", () => {
    fc.assert(
      fc.property(affiliateArb, (a) => {
        const wire = toBinary(AffiliateSchema, toMessage(a))
        assert.deepStrictEqual(plain(decoded(wire)), plain(fromBinary(AffiliateSchema, wire)))
        assert.deepStrictEqual(plain(decoded(wire)), plain(a))
      }),
      { numRuns: 150 }
    )
  })

  it("round-trips endpoints and agrees with protobuf-es", () => {
    fc.assert(
      fc.property(bytes, uint32, (ip, port) => {
        const wire = encodeEndpoint({ ip, port })
        assert.strictEqual(toHex(wire), toHex(toBinary(EndpointSchema, create(EndpointSchema, { ip, port }))))
        assert.deepStrictEqual(Result.getOrThrow(decodeEndpoint(wire)), { ip, port })
      })
    )
  })

  it("takes a protobuf-es message as it is", () => {
    const message: AffiliateInfoInit = create(AffiliateSchema, {
      nodeId: "n",
      kubespan: { publicKey: "k", additionalAddresses: [{ ip: Uint8Array.of(10, 0, 0, 0), bits: 8 }] },
      controlPlane: { apiServerPort: 6443 }
    })
    assert.strictEqual(toHex(encodeAffiliate(message)), toHex(toBinary(AffiliateSchema, message as Affiliate)))
  })

  it("writes present but empty sub-messages and leaves defaults out", () => {
    assert.strictEqual(toHex(encodeAffiliate({})), "")
    assert.strictEqual(toHex(encodeAffiliate({ kubespan: {}, controlPlane: {} })), "3a004200")
    assert.strictEqual(toHex(encodeAffiliate({ addresses: [new Uint8Array(0)] })), "1200")
    assert.deepStrictEqual(decoded(hex("3a004200")).kubespan, {
      publicKey: "",
      address: new Uint8Array(0),
      additionalAddresses: []
    })
    assert.deepStrictEqual(decoded(hex("3a004200")).controlPlane, { apiServerPort: 0 })
    assert.isUndefined(decoded(hex("")).kubespan)
  })

  it("skips unknown fields of every wire type, groups included", () => {
    const unknown = [
      "4801", // field 9 varint
      "510203040506070809", // field 10 fixed64
      "5a03616263", // field 11 bytes
      "650a0b0c0d", // field 12 fixed32
      "6b" + "0801" + "6c" // field 13 start group { field 1 varint } end group
    ].join("")
    assert.strictEqual(decoded(hex(`0a016e${unknown}1a0168`)).hostname, "h")
    assert.strictEqual(decoded(hex(`0a016e${unknown}1a0168`)).nodeId, "n")
    assert.deepStrictEqual(Result.getOrThrow(decodeEndpoint(hex("1801100a"))), { ip: new Uint8Array(0), port: 10 })
  })

  it("skips a group whose end tag carries another field number, as the Go client's UnmarshalVT does", () => {
    // field 13 start group { field 1 varint } end group of field 14
    assert.strictEqual(decoded(hex("0a016e" + "6b080174" + "1a0168")).hostname, "h")
    assert.deepStrictEqual(Result.getOrThrow(decodeEndpoint(hex("6b0801741005"))), { ip: new Uint8Array(0), port: 5 })
  })

  it("merges repeated sub-messages and keeps the last scalar, like Go", () => {
    // kubespan { public_key "a" }, kubespan { additional { bits 1 } }, control_plane twice
    const wire = hex("3a030a0161" + "3a041a021001" + "42020801" + "42020802" + "0a0178" + "0a0179")
    const a = decoded(wire)
    assert.strictEqual(a.kubespan?.publicKey, "a")
    assert.deepStrictEqual(a.kubespan?.additionalAddresses, [{ ip: new Uint8Array(0), bits: 1 }])
    assert.strictEqual(a.controlPlane?.apiServerPort, 2)
    assert.strictEqual(a.nodeId, "y")
  })

  it("keeps the low 32 bits of an oversized uint32 varint, like Go", () => {
    // port = 2^32 + 5 as a 5-byte varint
    assert.strictEqual(Result.getOrThrow(decodeEndpoint(hex("108580808010"))).port, 5)
  })

  it("turns invalid UTF-8 into replacement characters instead of failing (Go does not check)", () => {
    assert.strictEqual(decoded(hex("1a02c328")).hostname, "\ufffd(")
  })

  it("fails on truncated data, wrong wire types, field 0 and overlong varints", () => {
    for (const bad of ["0a05616263", "0a", "08", "0801", "1a", "00", "488080808080808080808001", "3a020a", "0f"]) {
      assert.isTrue(Result.isFailure(decodeAffiliate(hex(bad))), bad)
    }
    assert.isTrue(Result.isFailure(decodeEndpoint(hex("0801"))), "ip as a varint")
    assert.isTrue(Result.isFailure(decodeEndpoint(hex("1201"))), "port as bytes")
  })
})
