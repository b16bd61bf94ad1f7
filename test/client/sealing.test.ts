import { createCipheriv } from "node:crypto"
import { create, toBinary } from "@bufbuild/protobuf"
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { EndpointSchema } from "../../src/gen/discovery/client/affiliate_pb.ts"
import { encodeAffiliate, encodeEndpoint } from "../../src/core/client/payload.ts"
import type { ClusterKey } from "../../src/core/client/sealing.ts"
import {
  endpointBlock,
  makeKey,
  openAffiliate,
  openData,
  openEndpoint,
  sealAffiliate,
  sealData,
  sealEndpoint
} from "../../src/core/client/sealing.ts"
import { hex, key32, toHex } from "./fixtures.ts"

const keyOf = (bytes: Uint8Array): ClusterKey => Result.getOrThrow(makeKey(bytes))
const key = keyOf(key32)
const otherKey = keyOf(new Uint8Array(32).fill(7))

/** A 16-byte blob whose ECB plaintext is `block` (to forge malformed endpoints). */
const forge = (block: Uint8Array): Uint8Array => {
  const cipher = createCipheriv("aes-256-ecb", key32, null)
  cipher.setAutoPadding(false)
  return new Uint8Array(Buffer.concat([cipher.update(block), cipher.final()]))
}

const failure = <A>(result: Result.Result<A, string>): string => {
  assert.isTrue(Result.isFailure(result), "expected a failure")
  return (result as Result.Failure<A, string>).failure
}

const ipv4 = Uint8Array.of(192, 168, 1, 10)
const ipv6 = hex("20010db8000000000000000000000001")

describe("sealing", () => {
  describe("endpoints", () => {
    it("encodes the PROTOCOL.md §5.2 example byte for byte", () => {
      assert.strictEqual(toHex(encodeEndpoint({ ip: ipv4, port: 51820 })), "0a04c0a8010a10ec9403")
      assert.strictEqual(toHex(endpointBlock({ ip: ipv4, port: 51820 })), "0a0a04c0a8010a10ec94030000000000")
    })

    it("writes what protobuf-es toBinary writes", () => {
      const cases = [
        { ip: ipv4, port: 51820 },
        { ip: ipv6, port: 0xffffffff },
        { ip: ipv4, port: 0 },
        { ip: new Uint8Array(0), port: 1 },
        { ip: new Uint8Array(0), port: 0 },
        { ip: new Uint8Array(23).fill(0xb0), port: 128 }
      ]
      for (const endpoint of cases) {
        assert.strictEqual(
          toHex(encodeEndpoint(endpoint)),
          toHex(toBinary(EndpointSchema, create(EndpointSchema, endpoint)))
        )
      }
    })

    it("pads to 16 bytes only when needed: IPv4 gives one block, IPv6 two, an empty endpoint one", () => {
      assert.strictEqual(endpointBlock({ ip: ipv4, port: 51820 }).length, 16)
      assert.strictEqual(endpointBlock({ ip: ipv6, port: 0xffffffff }).length, 32)
      assert.strictEqual(toHex(endpointBlock({})), "00".repeat(16))
      // size byte + 15 bytes of encoding is exactly one block
      assert.strictEqual(endpointBlock({ ip: new Uint8Array(9), port: 16384 }).length, 16)
    })

    it("encrypts each block on its own with raw AES (ECB)", () => {
      const block = endpointBlock({ ip: ipv4, port: 51820 })
      assert.strictEqual(toHex(Result.getOrThrow(sealEndpoint(key, { ip: ipv4, port: 51820 }))), toHex(forge(block)))
      assert.strictEqual(
        toHex(Result.getOrThrow(sealEndpoint(key, { ip: ipv4, port: 51820 }))),
        "075e82691e1d1a3e3ebba165ea90e5fa"
      )
    })

    it("round-trips under every key size and is deterministic", () => {
      for (const size of [16, 24, 32]) {
        const k = keyOf(Uint8Array.from({ length: size }, (_, i) => i * 3))
        for (const endpoint of [
          { ip: ipv4, port: 51820 },
          { ip: ipv6, port: 0xffffffff },
          { ip: new Uint8Array(0), port: 0 }
        ]) {
          const sealed = Result.getOrThrow(sealEndpoint(k, endpoint))
          assert.deepStrictEqual(sealed, Result.getOrThrow(sealEndpoint(k, endpoint)))
          assert.deepStrictEqual(Result.getOrThrow(openEndpoint(k, sealed)), endpoint)
        }
      }
    })

    it("refuses an endpoint that would exceed the service's 32 bytes", () => {
      assert.include(failure(sealEndpoint(key, { ip: new Uint8Array(24), port: 0xffffffff })), "at most 32")
      assert.isTrue(Result.isSuccess(sealEndpoint(key, { ip: new Uint8Array(23), port: 0xffffffff })))
    })

    it("skips malformed blobs with a reason instead of crashing (Q19)", () => {
      assert.include(failure(openEndpoint(key, new Uint8Array(0))), "empty")
      assert.include(failure(openEndpoint(key, new Uint8Array(15))), "not a multiple of 16")
      assert.include(failure(openEndpoint(key, new Uint8Array(33))), "not a multiple of 16")
      const size200 = new Uint8Array(16)
      size200[0] = 200
      assert.include(failure(openEndpoint(key, forge(size200))), "size byte 200")
      const size15 = new Uint8Array(16)
      size15[0] = 15
      assert.isTrue(Result.isFailure(openEndpoint(key, forge(size15))), "15 zero bytes are not an Endpoint")
      const badWire = Uint8Array.of(2, 0x0b, 0x00, ...new Uint8Array(13))
      assert.include(failure(openEndpoint(key, forge(badWire))), "does not decode")
    })

    it("opens padding it does not check, like Go", () => {
      const block = endpointBlock({ ip: ipv4, port: 51820 })
      block[15] = 0xff
      assert.deepStrictEqual(Result.getOrThrow(openEndpoint(key, forge(block))), { ip: ipv4, port: 51820 })
    })
  })

  describe("affiliate data", () => {
    const affiliate = { nodeId: "n1", hostname: "host", addresses: [ipv4] }

    it("is nonce ‖ AES-GCM ciphertext ‖ tag, with no additional data", () => {
      const nonce = Uint8Array.from({ length: 12 }, (_, i) => i)
      const plaintext = encodeAffiliate(affiliate)
      const sealed = Result.getOrThrow(sealAffiliate(key, affiliate, nonce))
      assert.strictEqual(sealed.length, 12 + plaintext.length + 16)
      assert.deepStrictEqual(sealed.subarray(0, 12), nonce)
      const cipher = createCipheriv("aes-256-gcm", key32, nonce)
      const expected = Buffer.concat([nonce, cipher.update(plaintext), cipher.final(), cipher.getAuthTag()])
      assert.strictEqual(toHex(sealed), toHex(expected))
      assert.deepStrictEqual(sealData(key, plaintext, nonce), sealed)
    })

    it("uses a fresh random nonce each time and round-trips under every key size", () => {
      for (const size of [16, 24, 32]) {
        const k = keyOf(new Uint8Array(size).fill(size))
        const a = Result.getOrThrow(sealAffiliate(k, affiliate))
        const b = Result.getOrThrow(sealAffiliate(k, affiliate))
        assert.notStrictEqual(toHex(a.subarray(0, 12)), toHex(b.subarray(0, 12)))
        const opened = Result.getOrThrow(openAffiliate(k, a))
        assert.strictEqual(opened.hostname, "host")
        assert.deepStrictEqual(opened.addresses, [ipv4])
      }
    })

    it("fails to open with the wrong key, after tampering, or when shorter than 28 bytes", () => {
      const sealed = Result.getOrThrow(sealAffiliate(key, affiliate))
      assert.include(failure(openData(otherKey, sealed)), "authentication")
      const tampered = sealed.slice()
      tampered[14] = tampered[14]! ^ 1
      assert.include(failure(openData(key, tampered)), "authentication")
      assert.include(failure(openData(key, sealed.subarray(0, 27))), "shorter than 28")
      assert.include(failure(openData(key, new Uint8Array(0))), "shorter than 28")
      // an empty plaintext seals to exactly 28 bytes and opens
      assert.deepStrictEqual(
        Result.getOrThrow(openData(key, sealData(key, new Uint8Array(0), new Uint8Array(12)))),
        new Uint8Array(0)
      )
    })

    it("reports data that opens but does not decode", () => {
      const sealed = sealData(key, Uint8Array.of(0x0a, 0x05, 0x61), new Uint8Array(12))
      assert.include(failure(openAffiliate(key, sealed)), "does not decode")
    })

    it("refuses data that would exceed the service's 2048 bytes", () => {
      const fits = { hostname: "h".repeat(2020 - 3) } // 1A + 2-byte length + text = 2020
      assert.strictEqual(encodeAffiliate(fits).length, 2020)
      assert.strictEqual(Result.getOrThrow(sealAffiliate(key, fits)).length, 2048)
      assert.include(failure(sealAffiliate(key, { hostname: "h".repeat(2018) })), "at most 2048")
    })
  })

  it("accepts keys of 16, 24 and 32 bytes only", () => {
    for (const size of [16, 24, 32]) assert.isTrue(Result.isSuccess(makeKey(new Uint8Array(size))))
    for (const size of [0, 15, 20, 31, 33, 64]) assert.include(failure(makeKey(new Uint8Array(size))), "16, 24 or 32")
  })
})
