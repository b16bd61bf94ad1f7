/**
 * How a Redis Cluster fault chooses its slot: at random (the slot of a random
 * key of a random primary, so it usually holds data), or the slot of a
 * given discovery cluster, so that a runner can aim at the cluster its
 * traffic is busiest on.
 */
import { keyspace } from "../../../src/adapters/redis/keys.ts"
import { keySlot } from "../cluster/keySlot.ts"
import type { RedisCluster } from "../cluster/redisCluster.ts"
import type { RedisClusterRunCluster, RunCluster } from "../cluster/runCluster.ts"
import type { FaultContext } from "./fault.ts"

/** Chooses the slot a fault hits. */
export type SlotChooser = (context: FaultContext, redisCluster: RedisCluster) => Promise<number>

/** The slot of a random key of a random primary (a random slot when that primary holds none). */
export const randomSlot: SlotChooser = (context, redisCluster) => redisCluster.randomSlot(context.random)

/** The slot holding every key of discovery cluster `clusterId` under the run's key prefix. */
export const slotOfDiscoveryCluster =
  (clusterId: string): SlotChooser =>
  async (context) =>
    keySlot(keyspace(context.cluster.keyPrefix).cluster(clusterId).meta)

/** The run's Redis Cluster, or an error naming the fault that needed it. */
export const redisClusterOf = (cluster: RunCluster, fault: string): RedisClusterRunCluster["redisCluster"] => {
  if (cluster.backend !== "redis-cluster") throw new Error(`${fault} needs a Redis Cluster`)
  return cluster.redisCluster
}
