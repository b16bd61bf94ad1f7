/**
 * Moving a state between a snapshot file (the original's `state.binpb`
 * format) and Redis, so an operator can go from the original or a single
 * instance to several instances and back. Both directions measure TTLs from
 * `now`, as the memory backend's snapshots do; what has expired by then is
 * left out.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import type { AffiliateEntry } from "../../core/server/Affiliate.ts"
import { Limits } from "../../core/server/limits.ts"
import * as SnapshotCodec from "../../core/server/SnapshotCodec.ts"
import type { EncodedSnapshot } from "../../core/server/snapshotFormat.ts"
import { scriptKeys, settled, withPlace } from "./bookkeeping.ts"
import { keyspace } from "./keys.ts"
import { entryOf, recordOf } from "./record.ts"
import type { RedisConnection, Reply } from "./RedisConnection.ts"
import { script } from "./RedisConnection.ts"
import * as Scripts from "./scripts.ts"

/**
 * What an import put into Redis and what it left out.
 *
 * @category models
 * @since 0.1.0
 */
export interface ImportReport {
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
  /** Affiliates of the file that had expired by `now`. */
  readonly expiredAffiliates: number
  /** Clusters Redis already held affiliates of, left as they were. */
  readonly alreadyHeld: ReadonlyArray<string>
  /** Damaged or unknown parts of the file. */
  readonly damaged: number
}

/**
 * Where in Redis the state lives.
 *
 * @category models
 * @since 0.1.0
 */
export interface TransferTarget {
  readonly keyPrefix: string
  readonly maxClusters: number
  readonly logLength?: number | undefined
  readonly emptyRetentionMillis?: number | undefined
}

const restore = script(Scripts.restore)

/**
 * Loads the clusters of a snapshot file into Redis, one script per cluster.
 *
 * @category constructors
 * @since 0.1.0
 */
export const importSnapshot = async (
  redis: RedisConnection,
  target: TransferTarget,
  bytes: Uint8Array,
  now: number
): Promise<ImportReport> => {
  const keys = keyspace(target.keyPrefix)
  const epoch = randomUUID()
  const decoded = SnapshotCodec.decode(bytes, now)
  const alreadyHeld: Array<string> = []
  let clusters = 0
  let affiliates = 0
  let endpoints = 0
  let expiredAffiliates = 0
  for (const cluster of decoded.clusters) {
    const held = cluster.packed?.unpack() ?? cluster.affiliates
    const args: Array<string | Buffer> = [
      cluster.id,
      epoch,
      String(target.logLength ?? 1000),
      String(target.emptyRetentionMillis ?? 3_600_000),
      String(target.maxClusters)
    ]
    let kept = 0
    let keptEndpoints = 0
    for (const [id, affiliate] of held) {
      if (affiliate.expire(now) === "expired") {
        expiredAffiliates++
        continue
      }
      args.push(id, recordOf(affiliate))
      kept++
      keptEndpoints += affiliate.endpointCount
    }
    if (kept === 0) continue
    const reply = await withPlace(
      redis,
      keys,
      cluster.id,
      { maxClusters: target.maxClusters, leaseMillis: 30_000 },
      (reserved) =>
        redis.run(restore, scriptKeys(redis, keys, cluster.id), [...args.slice(0, 5), reserved, ...args.slice(5)])
    )
    const restored = Number(await settled(redis, keys, cluster.id, reply))
    if (restored < 0) {
      alreadyHeld.push(cluster.id)
      continue
    }
    clusters++
    affiliates += kept
    endpoints += keptEndpoints
  }
  return { clusters, affiliates, endpoints, expiredAffiliates, alreadyHeld, damaged: decoded.skipped.length }
}

/**
 * The whole state in Redis as a snapshot file's bytes, with TTLs measured
 * from `now`. Each cluster is read in one step (HGETALL); changes made while
 * the export runs may or may not be in it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const exportSnapshot = async (
  redis: RedisConnection,
  keyPrefix: string,
  now: number
): Promise<EncodedSnapshot> => {
  const keys = keyspace(keyPrefix)
  const entries: Array<{ readonly id: string; readonly affiliates: ReadonlyMap<string, AffiliateEntry> }> = []
  for (let start = 0; ; start += 1000) {
    const page = (await redis.send(
      ["ZRANGE", keys.index, String(start), String(start + 999)],
      keys.index
    )) as ReadonlyArray<Buffer>
    for (const member of page) {
      const id = member.toString("utf8")
      const affiliatesKey = keys.cluster(id).affiliates
      const pairs = (await redis.send(["HGETALL", affiliatesKey], affiliatesKey)) as ReadonlyArray<Reply>
      const affiliates = new Map<string, AffiliateEntry>()
      for (let i = 0; i + 1 < pairs.length; i += 2) {
        const affiliateId = (pairs[i] as Buffer).toString("utf8")
        affiliates.set(affiliateId, entryOf(affiliateId, pairs[i + 1] as Buffer))
      }
      if (affiliates.size > 0 && affiliates.size <= Limits.clusterAffiliatesMax) entries.push({ id, affiliates })
    }
    if (page.length < 1000) break
  }
  return SnapshotCodec.encode(entries, now)
}
