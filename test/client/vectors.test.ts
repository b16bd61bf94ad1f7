/**
 * Our sealing against the published Go client (test/interop/vectors, made by
 * generate.sh): every byte must match where sealing is deterministic, and each
 * side must open what the other sealed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { decodeAffiliate, encodeAffiliate } from "../../src/core/client/payload.ts"
import {
  makeKey,
  openAffiliate,
  openData,
  openEndpoint,
  sealAffiliate,
  sealData,
  sealEndpoint
} from "../../src/core/client/sealing.ts"
import type { GoVectors, OpenedByGo } from "../interop/vectors/vectorFiles.ts"
import { affiliateFromJson, fromHex, nonceFor, readVectorFile, toHex } from "../interop/vectors/vectorFiles.ts"

const vectors = readVectorFile<GoVectors>("vectors.json")
const opened = readVectorFile<OpenedByGo>("opened-by-go.json")

describe("sealing vectors from the Go client", () => {
  it("cover AES-128, AES-192 and AES-256 with every case", () => {
    assert.deepStrictEqual(
      vectors.keys.map((k) => [k.name, k.affiliates.length, k.endpoints.length]),
      [
        ["aes-128", 5, 11],
        ["aes-192", 5, 11],
        ["aes-256", 5, 11]
      ]
    )
    assert.deepStrictEqual(
      opened.keys.map((k) => k.name),
      vectors.keys.map((k) => k.name)
    )
  })

  for (const kv of vectors.keys) {
    describe(kv.name, () => {
      const key = Result.getOrThrow(makeKey(fromHex(kv.key)))

      it("seals every endpoint to the same bytes as Go", () => {
        for (const e of kv.endpoints) {
          const ours = Result.getOrThrow(sealEndpoint(key, { ip: fromHex(e.ip), port: e.port }))
          assert.strictEqual(toHex(ours), e.sealed, `${e.ip}:${e.port}`)
        }
      })

      it("opens every endpoint Go sealed", () => {
        for (const e of kv.endpoints) {
          const endpoint = Result.getOrThrow(openEndpoint(key, fromHex(e.sealed)))
          assert.deepStrictEqual([toHex(endpoint.ip), endpoint.port], [e.ip, e.port])
        }
      })

      it("encodes every affiliate plaintext to the same bytes as Go's MarshalVT", () => {
        for (const a of kv.affiliates) {
          assert.strictEqual(toHex(encodeAffiliate(affiliateFromJson(a.affiliate))), a.plaintext, a.name)
        }
      })

      it("opens every affiliate blob Go sealed to Go's plaintext", () => {
        for (const a of kv.affiliates) {
          const sealed = fromHex(a.sealed)
          assert.strictEqual(toHex(Result.getOrThrow(openData(key, sealed))), a.plaintext, a.name)
          const affiliate = Result.getOrThrow(openAffiliate(key, sealed))
          assert.deepStrictEqual(affiliate, Result.getOrThrow(decodeAffiliate(fromHex(a.plaintext))), a.name)
          assert.strictEqual(toHex(encodeAffiliate(affiliate)), a.plaintext, a.name)
        }
      })

      it("seals Go's plaintext with Go's nonce to exactly Go's blob", () => {
        for (const a of kv.affiliates) {
          const sealed = fromHex(a.sealed)
          const nonce = sealed.subarray(0, 12)
          assert.strictEqual(toHex(sealData(key, fromHex(a.plaintext), nonce)), a.sealed, a.name)
        }
      })
    })
  }
})

describe("our blobs opened by the Go client", () => {
  opened.keys.forEach((kv, keyIndex) => {
    const goKey = vectors.keys[keyIndex]!
    const key = Result.getOrThrow(makeKey(fromHex(kv.key)))

    it(`${kv.name}: are still what our code seals (same plaintext, nonce and key)`, () => {
      assert.strictEqual(kv.key, goKey.key)
      kv.affiliates.forEach((a, index) => {
        const affiliate = affiliateFromJson(goKey.affiliates[index]!.affiliate)
        assert.strictEqual(a.nonce, toHex(nonceFor(keyIndex, index)))
        assert.strictEqual(a.sealed, toHex(Result.getOrThrow(sealAffiliate(key, affiliate, fromHex(a.nonce)))), a.name)
        for (const e of a.endpoints) {
          assert.strictEqual(e.sealed, toHex(Result.getOrThrow(sealEndpoint(key, { ip: fromHex(e.ip), port: e.port }))))
        }
      })
    })

    it(`${kv.name}: were opened by Go to the plaintexts we sealed`, () => {
      kv.affiliates.forEach((a, index) => {
        assert.strictEqual(a.plaintext, goKey.affiliates[index]!.plaintext, a.name)
        assert.strictEqual(a.opened, a.plaintext, a.name)
        assert.deepStrictEqual(
          a.openedEndpoints,
          a.endpoints.map((e) => ({ ip: e.ip, port: e.port })),
          a.name
        )
      })
    })
  })
})
