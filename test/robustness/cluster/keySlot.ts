/**
 * The Redis Cluster hash slot of a key: CRC16 (XMODEM) of the key, or of
 * its hash tag (the part between the first `{` and the next `}` when that is
 * not empty), modulo 16384. The same function as `CLUSTER KEYSLOT`, computed
 * here so that the harness can aim a fault at a discovery cluster's slot
 * without asking a node.
 */

/** Slots in a Redis Cluster. */
export const slotCount = 16_384

const table = Array.from({ length: 256 }, (_, byte) => {
  let crc = byte << 8
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  return crc
})

const crc16 = (bytes: Uint8Array): number => {
  let crc = 0
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ table[((crc >> 8) ^ byte) & 0xff]!
  return crc
}

const hashed = (key: Buffer): Buffer => {
  const open = key.indexOf("{")
  if (open < 0) return key
  const close = key.indexOf("}", open + 1)
  return close > open + 1 ? key.subarray(open + 1, close) : key
}

/** The slot of `key` (a string is taken as UTF-8). */
export const keySlot = (key: string | Buffer): number =>
  crc16(hashed(Buffer.isBuffer(key) ? key : Buffer.from(key, "utf8"))) % slotCount
