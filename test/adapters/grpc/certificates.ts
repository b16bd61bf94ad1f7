/**
 * Self-signed ECDSA P-256 server certificates for 127.0.0.1 and ::1, valid
 * for an hour (like the original's cert_test.go helpers). node:crypto makes
 * the key and the signature; the certificate's DER is assembled here, which
 * takes a few dozen lines and no dependency. A client that trusts the
 * certificate itself can connect to a server using it.
 */
import * as crypto from "node:crypto"

/** A certificate and its private key, both PEM. */
export interface PemPair {
  readonly certificate: string
  readonly privateKey: string
}

const length = (n: number): Buffer => {
  if (n < 0x80) return Buffer.of(n)
  const bytes: Array<number> = []
  for (let rest = n; rest > 0; rest >>= 8) bytes.unshift(rest & 0xff)
  return Buffer.of(0x80 | bytes.length, ...bytes)
}
const tlv = (tag: number, ...content: ReadonlyArray<Uint8Array>): Buffer => {
  const body = Buffer.concat(content)
  return Buffer.concat([Buffer.of(tag), length(body.length), body])
}
const sequence = (...items: ReadonlyArray<Uint8Array>) => tlv(0x30, ...items)
const integer = (value: number) => {
  const bytes = [value & 0xff]
  for (let rest = value >> 8; rest > 0; rest >>= 8) bytes.unshift(rest & 0xff)
  return tlv(0x02, Buffer.from(bytes[0]! & 0x80 ? [0, ...bytes] : bytes))
}
const oid = (dotted: string): Buffer => {
  const [first = 0, second = 0, ...rest] = dotted.split(".").map(Number)
  const bytes = [first * 40 + second]
  for (const arc of rest) {
    const base128 = [arc & 0x7f]
    for (let value = arc >> 7; value > 0; value >>= 7) base128.unshift(0x80 | (value & 0x7f))
    bytes.push(...base128)
  }
  return tlv(0x06, Buffer.from(bytes))
}
const utcTime = (date: Date) => tlv(0x17, Buffer.from(`${date.toISOString().slice(2, 19).replace(/[-T:]/g, "")}Z`))
const name = (commonName: string) => sequence(tlv(0x31, sequence(oid("2.5.4.3"), tlv(0x0c, Buffer.from(commonName)))))
const extension = (id: string, critical: boolean, value: Uint8Array) =>
  sequence(oid(id), ...(critical ? [Buffer.of(0x01, 0x01, 0xff)] : []), tlv(0x04, value))

const ecdsaWithSha256 = sequence(oid("1.2.840.10045.4.3.2"))
const loopback = [Buffer.of(127, 0, 0, 1), Buffer.concat([Buffer.alloc(15), Buffer.of(1)])]

let serial = 1

/** Makes a new self-signed server certificate and key, with `commonName` as subject and issuer. */
export const selfSigned = (commonName: string): PemPair => {
  const { privateKey, publicKey } = crypto.generateKeyPairSync("ec", { namedCurve: "prime256v1" })
  const now = Date.now()
  const tbs = sequence(
    tlv(0xa0, integer(2)),
    integer(serial++),
    ecdsaWithSha256,
    name(commonName),
    sequence(utcTime(new Date(now - 60_000)), utcTime(new Date(now + 3_600_000))),
    name(commonName),
    publicKey.export({ type: "spki", format: "der" }),
    tlv(
      0xa3,
      sequence(
        extension("2.5.29.19", true, sequence(Buffer.of(0x01, 0x01, 0xff))),
        extension("2.5.29.17", false, sequence(...loopback.map((ip) => tlv(0x87, ip))))
      )
    )
  )
  const signature = crypto.sign("sha256", tbs, privateKey)
  const der = sequence(tbs, ecdsaWithSha256, tlv(0x03, Buffer.of(0), signature))
  const base64 = der.toString("base64").match(/.{1,64}/g) ?? []
  return {
    certificate: `-----BEGIN CERTIFICATE-----\n${base64.join("\n")}\n-----END CERTIFICATE-----\n`,
    privateKey: privateKey.export({ type: "pkcs8", format: "pem" }).toString()
  }
}
