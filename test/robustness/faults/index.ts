/**
 * Every fault a robustness run can inject, by name. A run picks among those
 * `available` for its shape. An instance's clock offset is not a fault but a
 * shape option (`clockOffset` of `startMemory`/`startRedis`/
 * `startRedisCluster`): a process's clock is set by libfaketime when it
 * starts, and an instance restarted by a fault keeps its offset.
 */
import { clusterFailover } from "./clusterFailover.ts"
import { clusterLaggingFailoverAt } from "./clusterLaggingFailover.ts"
import { pick } from "./fault.ts"
import { clusterPrimaryKill } from "./clusterPrimaryKill.ts"
import { clusterSlotMigration } from "./clusterSlotMigration.ts"
import { slotOfDiscoveryCluster } from "./clusterSlot.ts"
import type { Fault } from "./fault.ts"
import { instanceKill } from "./instanceKill.ts"
import { instanceStall } from "./instanceStall.ts"
import { netCut } from "./netCut.ts"
import { netLatency } from "./netLatency.ts"
import { netReset } from "./netReset.ts"
import { netSlow } from "./netSlow.ts"
import { netStall } from "./netStall.ts"
import { redisFlushall } from "./redisFlushall.ts"
import { redisKill } from "./redisKill.ts"
import { redisRewind } from "./redisRewind.ts"
import type { RunCluster } from "../cluster/runCluster.ts"

export type { DetailFields, Fault, FaultContext, Heal } from "./fault.ts"
export { between, formatDetail, parseDetail, pick, recordStep, runningInstances } from "./fault.ts"
export type { SlotChooser } from "./clusterSlot.ts"
export { randomSlot, slotOfDiscoveryCluster } from "./clusterSlot.ts"
export { clusterFailoverAt } from "./clusterFailover.ts"
export { clusterLaggingFailoverAt } from "./clusterLaggingFailover.ts"
export { clusterPrimaryKillAt } from "./clusterPrimaryKill.ts"
export { clusterSlotMigrationAt } from "./clusterSlotMigration.ts"
export {
  clusterFailover,
  clusterPrimaryKill,
  clusterSlotMigration,
  instanceKill,
  instanceStall,
  netCut,
  netLatency,
  netReset,
  netSlow,
  netStall,
  redisFlushall,
  redisKill,
  redisRewind
}

/** The clusters every run's writers and watchers use (see `run.ts`). */
export const busyClusters: ReadonlyArray<string> = ["c0", "c1", "c2"]

/** A failover to a lagging replica of the primary of a busy cluster's slot, so that watchers saw the writes it loses. */
export const clusterLaggingFailover: Fault = clusterLaggingFailoverAt((context, redisCluster) =>
  slotOfDiscoveryCluster(pick(context.random, busyClusters))(context, redisCluster)
)

/** Every fault, in a fixed order (so a seed picks the same one each time). */
export const faults: ReadonlyArray<Fault> = [
  instanceKill,
  instanceStall,
  redisKill,
  redisRewind,
  redisFlushall,
  clusterPrimaryKill,
  clusterFailover,
  clusterSlotMigration,
  clusterLaggingFailover,
  netLatency,
  netStall,
  netReset,
  netSlow,
  netCut
]

/** The fault named `name`, or undefined. */
export const faultByName = (name: string): Fault | undefined => faults.find((fault) => fault.name === name)

/** The faults that can hit `cluster`. */
export const availableFaults = (cluster: RunCluster): ReadonlyArray<Fault> =>
  faults.filter((fault) => fault.available(cluster))
