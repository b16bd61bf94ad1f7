/**
 * The stored form of an affiliate in the Redis backend (see `scripts.ts`):
 * `>dHH` (expiry, data length, endpoint count), the data, then per endpoint
 * `>dH` (expiry, length) and its bytes. Read here into what watchers see.
 *
 * @since 0.1.0
 */
import type { AffiliateEntry } from "../../core/server/Affiliate.ts"
import type { AffiliateView } from "../../ports/ClusterApi.ts"

/**
 * Thrown for a record that does not follow the format.
 *
 * @category errors
 * @since 0.1.0
 */
export class MalformedRecord extends Error {}

/**
 * The affiliate `id` as watchers see it, from its record: data and endpoint
 * bytes are views of `record`, which must not change afterwards.
 *
 * @category constructors
 * @since 0.1.0
 */
export const viewOf = (id: string, record: Buffer): AffiliateView => {
  if (record.length < 12) throw new MalformedRecord(`record of ${JSON.stringify(id)} is ${record.length} bytes`)
  const dataLength = record.readUInt16BE(8)
  const count = record.readUInt16BE(10)
  let position = 12 + dataLength
  const data = record.subarray(12, position)
  const endpoints = new Array<Uint8Array>(count)
  for (let i = 0; i < count; i++) {
    const length = record.readUInt16BE(position + 8)
    position += 10
    endpoints[i] = record.subarray(position, position + length)
    position += length
  }
  if (position !== record.length) throw new MalformedRecord(`record of ${JSON.stringify(id)} has stray bytes`)
  return { id, data, endpoints }
}

/**
 * The record of an affiliate with its expiries, as the scripts store it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const recordOf = (entry: AffiliateEntry): Buffer => {
  let size = 12 + entry.data.length
  for (const endpoint of entry.endpoints) size += 10 + endpoint.data.length
  const record = Buffer.allocUnsafe(size)
  record.writeDoubleBE(entry.expiresAt, 0)
  record.writeUInt16BE(entry.data.length, 8)
  record.writeUInt16BE(entry.endpoints.length, 10)
  record.set(entry.data, 12)
  let position = 12 + entry.data.length
  for (const endpoint of entry.endpoints) {
    record.writeDoubleBE(endpoint.expiresAt, position)
    record.writeUInt16BE(endpoint.data.length, position + 8)
    record.set(endpoint.data, position + 10)
    position += 10 + endpoint.data.length
  }
  return record
}

/**
 * An affiliate with its expiries, from its record (for a snapshot file).
 *
 * @category constructors
 * @since 0.1.0
 */
export const entryOf = (id: string, record: Buffer): AffiliateEntry => {
  const view = viewOf(id, record)
  const endpoints = []
  let position = 12 + view.data.length
  for (const data of view.endpoints) {
    endpoints.push({ data, expiresAt: record.readDoubleBE(position) })
    position += 10 + data.length
  }
  return { id, data: view.data, expiresAt: record.readDoubleBE(0), endpoints }
}
