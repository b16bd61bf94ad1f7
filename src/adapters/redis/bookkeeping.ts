/**
 * The instance-wide index of clusters (by next due time), the set of
 * clusters held without affiliates, and the counts of affiliates and
 * endpoints, kept beside each cluster's keys. On a single Redis every change
 * script keeps them itself; under Redis Cluster they live in other slots
 * than the cluster's keys, so the script reports what changed and the
 * instance applies it right after, in a separate step: an instance that dies
 * in between leaves them stale until the next reconciliation.
 *
 * @since 0.1.0
 */
import type { Keyspace } from "./keys.ts"
import { type RedisConnection, type Reply, script } from "./RedisConnection.ts"
import * as Scripts from "./scripts.ts"

const reserveScript = script(Scripts.reserve)

/**
 * Runs a change script that may make a cluster, with the cap on clusters:
 * `run` is given the script's `reserved` argument. On a single Redis the
 * script counts the clusters itself ("0"); under Redis Cluster it answers
 * `RESERVE place` when it would make one, and then a place is reserved where the
 * index and the held set live and the script runs again ("-1"), or the cap
 * refuses it with `LIMIT clusters`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const withPlace = async (
  redis: RedisConnection,
  keys: Keyspace,
  clusterId: string,
  limits: { readonly maxClusters: number; readonly leaseMillis: number },
  run: (reserved: string) => Promise<Reply>
): Promise<Reply> => {
  if (!redis.cluster) return run("0")
  try {
    return await run("-2")
  } catch (error) {
    if (!(error instanceof Error) || error.message !== "RESERVE place") throw error
  }
  const placed = await redis.run(
    reserveScript,
    [keys.index, keys.held],
    [clusterId, String(limits.maxClusters), String(limits.leaseMillis)]
  )
  if (placed !== 1) throw new Error("LIMIT clusters")
  return run("-1")
}

/**
 * A change script's KEYS for a cluster: with the index and counts on a
 * single Redis; the cluster's own under Redis Cluster.
 *
 * @category constructors
 * @since 0.1.0
 */
export const scriptKeys = (redis: RedisConnection, keys: Keyspace, clusterId: string): ReadonlyArray<string> => {
  const cluster = keys.cluster(clusterId)
  return redis.cluster ? cluster.own : cluster.all
}

/**
 * The result of a change script (its replies are `[result, affiliates added,
 * endpoints added, next due time or -1, 1 when it left the cluster held or
 * -1 when it let go of it]`), once what it reported is applied under Redis
 * Cluster: the cluster enters or leaves the index, and the held set (for
 * `leaseMillis`); `indexed` is
 * told how many clusters that added to the index (or, below zero, removed).
 *
 * @category constructors
 * @since 0.1.0
 */
export const settled = async (
  redis: RedisConnection,
  keys: Keyspace,
  clusterId: string,
  reply: Reply,
  indexed: (change: number) => void = () => undefined,
  leaseMillis = 30_000
): Promise<Reply> => {
  const [result, affiliates, endpoints, due, held] = reply as ReadonlyArray<Reply>
  if (!redis.cluster) return result!
  const writes: Array<Promise<Reply>> = []
  if (held === -1) writes.push(redis.send(["ZREM", keys.held, clusterId], keys.held))
  else if (held === 1) {
    writes.push(redis.send(["ZADD", keys.held, "GT", String(Date.now() + leaseMillis), clusterId], keys.held))
  }
  for (const [field, added] of [
    ["affiliates", affiliates],
    ["endpoints", endpoints]
  ] as const) {
    if (added !== 0) writes.push(redis.send(["HINCRBY", keys.counts, field, String(added)], keys.counts))
  }
  const score = String(due)
  const removal = score === "-1"
  const index = removal ? ["ZREM", keys.index, clusterId] : ["ZADD", keys.index, score, clusterId]
  writes.push(
    redis.send(index, keys.index).then((changed) => {
      indexed((removal ? -1 : 1) * Number(changed))
      return changed
    })
  )
  await Promise.all(writes)
  return result!
}
