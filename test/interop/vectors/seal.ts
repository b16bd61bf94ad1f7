/**
 * Seals the plaintexts of vectors.json with our client code (fixed nonces),
 * for `go run . verify`: writes the JSON to stdout. Run by generate.sh.
 */
import { Result } from "effect"
import { makeKey, sealAffiliate, sealEndpoint } from "../../../src/core/client/sealing.ts"
import type { GoVectors, SealedByUs } from "./vectorFiles.ts"
import { affiliateFromJson, fromHex, nonceFor, readVectorFile, toHex } from "./vectorFiles.ts"
import { encodeAffiliate } from "../../../src/core/client/payload.ts"

const vectors = readVectorFile<GoVectors>("vectors.json")

const out: SealedByUs = {
  keys: vectors.keys.map((kv, keyIndex) => {
    const key = Result.getOrThrow(makeKey(fromHex(kv.key)))
    const endpoints = kv.endpoints.map((e) => ({
      ip: e.ip,
      port: e.port,
      sealed: toHex(Result.getOrThrow(sealEndpoint(key, { ip: fromHex(e.ip), port: e.port })))
    }))
    return {
      name: kv.name,
      key: kv.key,
      affiliates: kv.affiliates.map((a, index) => {
        const affiliate = affiliateFromJson(a.affiliate)
        const nonce = nonceFor(keyIndex, index)
        return {
          name: a.name,
          plaintext: toHex(encodeAffiliate(affiliate)),
          nonce: toHex(nonce),
          sealed: toHex(Result.getOrThrow(sealAffiliate(key, affiliate, nonce))),
          endpoints
        }
      })
    }
  })
}

process.stdout.write(`${JSON.stringify(out, null, 2)}\n`)
