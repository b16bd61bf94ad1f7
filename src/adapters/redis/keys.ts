/**
 * The key names of the Redis backend. Every key of one cluster carries the
 * hash tag `{<clusterId>}`, so a Redis Cluster keeps them in one slot and a
 * script may touch them all; braces and `%` in a cluster ID are escaped, so
 * the tag is always the whole ID.
 *
 * @since 0.1.0
 */

/**
 * The keys of one cluster, in the order the scripts take them (see
 * `scripts.ts`), with the instance-wide index and counters last.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClusterKeys {
  readonly affiliates: string
  readonly dueTimes: string
  readonly meta: string
  readonly log: string
  /** The sharded pub/sub channel where each change is announced. */
  readonly channel: string
  /** The cluster's own keys, as a script's KEYS under Redis Cluster. */
  readonly own: ReadonlyArray<string>
  /** Its keys with the instance-wide index, counts and held set, as a script's KEYS on a single Redis. */
  readonly all: ReadonlyArray<string>
}

const escapeBraces = (clusterId: string): string =>
  /[{}%]/.test(clusterId)
    ? clusterId.replace(/[{}%]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    : clusterId

const unescapeBraces = (escaped: string): string =>
  escaped.replace(/%(7B|7D|25)/g, (_, code: string) => String.fromCharCode(Number.parseInt(code, 16)))

const globEscaped = (text: string): string => text.replace(/[*?[\]\\]/g, (c) => `\\${c}`)

/**
 * The key names under `prefix`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const keyspace = (prefix: string) => {
  const index = `${prefix}clusters`
  const counts = `${prefix}counts`
  // the index's name as its hash tag: one slot with the index under Redis Cluster (see `reserve`)
  const held = `{${index}}:held`
  return {
    /** The sorted set of clusters by the next time something in them is due. */
    index,
    /** The hash of affiliate and endpoint counts. */
    counts,
    /** The sorted set of clusters held without affiliates because some instance watches them, by when their hold ends. */
    held,
    /** The hash of the instances' announcements, by instance name (see `RedisInstanceDirectory`). */
    instances: `${prefix}instances`,
    /** The dataset's marker: a random value that a flush removes (see `Prober`). */
    marker: `${prefix}marker`,
    /** A marker key with the hash tag `tag`, for the primary of its slot under Redis Cluster. */
    markerOf: (tag: string): string => `${prefix}{${tag}}:marker`,
    /** A SCAN pattern matching every cluster's due-times key. */
    dueTimesPattern: `${globEscaped(prefix)}{*}:x`,
    /** The cluster whose due-times key this is (as `dueTimesPattern` finds them). */
    clusterOfDueTimes: (key: string): string => unescapeBraces(key.slice(prefix.length + 1, key.length - 3)),
    /** The keys of one cluster. */
    cluster: (clusterId: string): ClusterKeys => {
      const base = `${prefix}{${escapeBraces(clusterId)}}:`
      const affiliates = `${base}a`
      const dueTimes = `${base}x`
      const meta = `${base}m`
      const log = `${base}s`
      const own = [affiliates, dueTimes, meta, log]
      return { affiliates, dueTimes, meta, log, channel: `${base}n`, own, all: [...own, index, counts, held] }
    }
  }
}

/**
 * The key names of a backend.
 *
 * @category models
 * @since 0.1.0
 */
export type Keyspace = ReturnType<typeof keyspace>

/** CRC16 (XMODEM), the checksum Redis Cluster computes a key's slot with. */
const crc16 = (bytes: Uint8Array): number => {
  let crc = 0
  for (const byte of bytes) {
    crc ^= byte << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
  }
  return crc
}

/**
 * The Redis Cluster slot of `key`: the CRC16 of its hash tag (the text
 * between the first `{` and the next `}`, when not empty) or of the whole key.
 *
 * @category constructors
 * @since 0.1.0
 */
export const keySlot = (key: string): number => {
  const bytes = Buffer.from(key, "utf8")
  const open = bytes.indexOf(0x7b)
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1)
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % 16384
  }
  return crc16(bytes) % 16384
}
