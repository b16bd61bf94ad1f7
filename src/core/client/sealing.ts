/**
 * Sealing and opening of the blobs a discovery client hands to the service,
 * byte-compatible with the Go client (PROTOCOL.md §5.2), with `node:crypto`
 * only.
 *
 * - Affiliate data: `nonce(12) ‖ AES-GCM ciphertext ‖ tag(16)`, no additional
 *   data. The nonce is random, so sealing twice gives different blobs.
 * - Endpoint: `[len(pb)] ‖ pb`, zero-padded to a multiple of 16, each 16-byte
 *   block AES-encrypted on its own (ECB, no IV). Deterministic, so the service
 *   can deduplicate endpoints reported by different nodes.
 *
 * Opening checks every bound (quirk Q19): a malformed blob gives a reason,
 * never an exception.
 *
 * @since 0.1.0
 */
import type { KeyObject } from "node:crypto"
import { createCipheriv, createDecipheriv, createSecretKey, randomBytes } from "node:crypto"
import { Result } from "effect"
import type { AffiliateInfo, AffiliateInfoInit, Endpoint, EndpointInit } from "./payload.ts"
import { decodeAffiliate, decodeEndpoint, encodeAffiliate, encodeEndpoint } from "./payload.ts"

/**
 * Bytes of the random nonce in front of sealed affiliate data.
 *
 * @category constants
 * @since 0.1.0
 */
export const nonceSize = 12

/**
 * Bytes of the GCM tag at the end of sealed affiliate data.
 *
 * @category constants
 * @since 0.1.0
 */
export const tagSize = 16

/**
 * AES block size: endpoint blobs are a positive multiple of it.
 *
 * @category constants
 * @since 0.1.0
 */
export const blockSize = 16

/**
 * The largest sealed affiliate data the service accepts (AffiliateDataMax).
 *
 * @category constants
 * @since 0.1.0
 */
export const maxSealedData = 2048

/**
 * The largest sealed endpoint the service accepts (AffiliateEndpointMax).
 *
 * @category constants
 * @since 0.1.0
 */
export const maxSealedEndpoint = 32

/**
 * The cluster key, checked and ready for use: 16, 24 or 32 bytes (AES-128,
 * AES-192 or AES-256).
 *
 * @category models
 * @since 0.1.0
 */
export interface ClusterKey {
  readonly bits: 128 | 192 | 256
  readonly key: KeyObject
}

/**
 * Checks the length of a cluster key and imports it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeKey = (key: Uint8Array): Result.Result<ClusterKey, string> => {
  const bits = key.length * 8
  return bits === 128 || bits === 192 || bits === 256
    ? Result.succeed({ bits, key: createSecretKey(key) })
    : Result.fail(`the cluster key must be 16, 24 or 32 bytes, got ${key.length}`)
}

const concat = (...parts: ReadonlyArray<Uint8Array>): Uint8Array => new Uint8Array(Buffer.concat(parts))

/**
 * Seals plaintext bytes with AES-GCM under `nonce` (12 bytes):
 * `nonce ‖ ciphertext ‖ tag`.
 *
 * @category sealing
 * @since 0.1.0
 */
export const sealData = (key: ClusterKey, plaintext: Uint8Array, nonce: Uint8Array): Uint8Array => {
  const cipher = createCipheriv(`aes-${key.bits}-gcm`, key.key, nonce, { authTagLength: tagSize })
  return concat(nonce, cipher.update(plaintext), cipher.final(), cipher.getAuthTag())
}

/**
 * Opens sealed data: the plaintext, or why it could not be opened (too short,
 * or authentication failed: wrong key, tampering or corruption).
 *
 * @category opening
 * @since 0.1.0
 */
export const openData = (key: ClusterKey, blob: Uint8Array): Result.Result<Uint8Array, string> => {
  if (blob.length < nonceSize + tagSize) {
    return Result.fail(`sealed data of ${blob.length} bytes is shorter than ${nonceSize + tagSize}`)
  }
  const decipher = createDecipheriv(`aes-${key.bits}-gcm`, key.key, blob.subarray(0, nonceSize), {
    authTagLength: tagSize
  })
  decipher.setAuthTag(blob.subarray(blob.length - tagSize))
  try {
    return Result.succeed(concat(decipher.update(blob.subarray(nonceSize, blob.length - tagSize)), decipher.final()))
  } catch {
    return Result.fail("sealed data failed authentication (wrong key, tampering or corruption)")
  }
}

/**
 * Seals an affiliate under a fresh random nonce (or the given one, for
 * reproducible tests). Fails when the blob would exceed the service's
 * 2048-byte limit.
 *
 * @category sealing
 * @since 0.1.0
 */
export const sealAffiliate = (
  key: ClusterKey,
  affiliate: AffiliateInfoInit,
  nonce: Uint8Array = randomBytes(nonceSize)
): Result.Result<Uint8Array, string> => {
  const plaintext = encodeAffiliate(affiliate)
  const size = plaintext.length + nonceSize + tagSize
  return size > maxSealedData
    ? Result.fail(`affiliate data seals to ${size} bytes; the service takes at most ${maxSealedData}`)
    : Result.succeed(sealData(key, plaintext, nonce))
}

/**
 * Opens sealed affiliate data and decodes it.
 *
 * @category opening
 * @since 0.1.0
 */
export const openAffiliate = (key: ClusterKey, blob: Uint8Array): Result.Result<AffiliateInfo, string> =>
  Result.flatMap(openData(key, blob), (plaintext) =>
    Result.mapError(decodeAffiliate(plaintext), (reason) => `affiliate data does not decode: ${reason}`)
  )

const ecb = (key: ClusterKey, input: Uint8Array, encrypt: boolean): Uint8Array => {
  const cipher = encrypt
    ? createCipheriv(`aes-${key.bits}-ecb`, key.key, null)
    : createDecipheriv(`aes-${key.bits}-ecb`, key.key, null)
  cipher.setAutoPadding(false)
  return concat(cipher.update(input), cipher.final())
}

/**
 * The plaintext of an endpoint blob before AES: the length byte, the
 * canonical Endpoint encoding, zero padding to a multiple of 16.
 *
 * @category sealing
 * @since 0.1.0
 */
export const endpointBlock = (endpoint: EndpointInit): Uint8Array => {
  const pb = encodeEndpoint(endpoint)
  const padded = new Uint8Array(Math.ceil((pb.length + 1) / blockSize) * blockSize)
  padded[0] = pb.length
  padded.set(pb, 1)
  return padded
}

/**
 * Seals an endpoint (deterministic). Fails when the blob would exceed the
 * service's 32-byte limit (the encoding is then over 31 bytes).
 *
 * @category sealing
 * @since 0.1.0
 */
export const sealEndpoint = (key: ClusterKey, endpoint: EndpointInit): Result.Result<Uint8Array, string> => {
  const block = endpointBlock(endpoint)
  return block.length > maxSealedEndpoint
    ? Result.fail(`endpoint seals to ${block.length} bytes; the service takes at most ${maxSealedEndpoint}`)
    : Result.succeed(ecb(key, block, true))
}

/**
 * Opens an endpoint blob. Every bound is checked: an empty blob, a length
 * that is not a multiple of 16, a size byte beyond the blob, or bytes that do
 * not decode as an Endpoint give a reason instead of a crash.
 *
 * @category opening
 * @since 0.1.0
 */
export const openEndpoint = (key: ClusterKey, blob: Uint8Array): Result.Result<Endpoint, string> => {
  if (blob.length === 0) return Result.fail("endpoint blob is empty")
  if (blob.length % blockSize !== 0) {
    return Result.fail(`endpoint blob of ${blob.length} bytes is not a multiple of ${blockSize}`)
  }
  const plain = ecb(key, blob, false)
  const size = plain[0]!
  if (size > plain.length - 1) {
    return Result.fail(`endpoint size byte ${size} exceeds the ${plain.length - 1} bytes that follow it`)
  }
  return Result.mapError(decodeEndpoint(plain.subarray(1, 1 + size)), (reason) => `endpoint does not decode: ${reason}`)
}
