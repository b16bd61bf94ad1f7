/**
 * The JSON files of the sealing vectors and how to read them: `vectors.json`
 * (sealed by the Go client) and `opened-by-go.json` (sealed by us, opened by
 * the Go client). Shared by `seal.ts` and test/client/vectors.test.ts.
 */
import { readFileSync } from "node:fs"
import { join } from "node:path"
import type { AffiliateInfoInit } from "../../../src/core/client/payload.ts"

/** The Go rendering of an affiliate: bytes as hex. */
export interface AffiliateJson {
  readonly nodeId: string
  readonly addresses: ReadonlyArray<string>
  readonly hostname: string
  readonly nodename: string
  readonly machineType: string
  readonly operatingSystem: string
  readonly kubespan?: {
    readonly publicKey: string
    readonly address: string
    readonly additionalAddresses: ReadonlyArray<{ readonly ip: string; readonly bits: number }>
  }
  readonly controlPlane?: { readonly apiServerPort: number }
}

/** One endpoint and its sealed blob. */
export interface EndpointVector {
  readonly ip: string
  readonly port: number
  readonly sealed: string
}

/** vectors.json */
export interface GoVectors {
  readonly source: string
  readonly keys: ReadonlyArray<{
    readonly name: string
    readonly key: string
    readonly affiliates: ReadonlyArray<{
      readonly name: string
      readonly affiliate: AffiliateJson
      readonly plaintext: string
      readonly sealed: string
    }>
    readonly endpoints: ReadonlyArray<EndpointVector>
  }>
}

/** One affiliate sealed by us (input of `vectors verify`). */
export interface SealedAffiliate {
  readonly name: string
  readonly plaintext: string
  readonly nonce: string
  readonly sealed: string
  readonly endpoints: ReadonlyArray<EndpointVector>
}

/** The file seal.ts writes for `vectors verify`. */
export interface SealedByUs {
  readonly keys: ReadonlyArray<{
    readonly name: string
    readonly key: string
    readonly affiliates: ReadonlyArray<SealedAffiliate>
  }>
}

/** opened-by-go.json */
export interface OpenedByGo {
  readonly source: string
  readonly keys: ReadonlyArray<{
    readonly name: string
    readonly key: string
    readonly affiliates: ReadonlyArray<
      SealedAffiliate & {
        readonly opened: string
        readonly openedEndpoints: ReadonlyArray<{ readonly ip: string; readonly port: number }>
      }
    >
  }>
}

/** Bytes from hex. */
export const fromHex = (text: string): Uint8Array => Uint8Array.from(Buffer.from(text, "hex"))

/** Hex of bytes. */
export const toHex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex")

/** The affiliate to seal, from its Go rendering. */
export const affiliateFromJson = (json: AffiliateJson): AffiliateInfoInit => ({
  nodeId: json.nodeId,
  addresses: json.addresses.map(fromHex),
  hostname: json.hostname,
  nodename: json.nodename,
  machineType: json.machineType,
  operatingSystem: json.operatingSystem,
  kubespan:
    json.kubespan === undefined
      ? undefined
      : {
          publicKey: json.kubespan.publicKey,
          address: fromHex(json.kubespan.address),
          additionalAddresses: json.kubespan.additionalAddresses.map((p) => ({ ip: fromHex(p.ip), bits: p.bits }))
        },
  controlPlane: json.controlPlane
})

/** The fixed nonce of our sealing of case `index` under key `keyIndex`. */
export const nonceFor = (keyIndex: number, index: number): Uint8Array =>
  Uint8Array.from({ length: 12 }, (_, j) => (keyIndex * 64 + index * 12 + j) & 0xff)

/** Reads one of the committed files next to this module. */
export const readVectorFile = <A>(name: "vectors.json" | "opened-by-go.json"): A =>
  JSON.parse(readFileSync(join(import.meta.dirname, name), "utf8")) as A
