/**
 * `cluster-primary-kill`: kill -9 of the primary owning a slot of the Redis
 * Cluster; the inject waits until its replica has taken over (a few seconds
 * with a short `cluster-node-timeout`, during which the cluster answers
 * CLUSTERDOWN), so writes the replica had not received are lost. Healed by
 * starting the killed node again: it rejoins as a replica of the new primary.
 */
import type { Fault } from "./fault.ts"
import { recordStep } from "./fault.ts"
import { randomSlot, redisClusterOf, type SlotChooser } from "./clusterSlot.ts"

const name = "cluster-primary-kill"

/** The fault, aimed at the slot `chooseSlot` picks (default: a random slot holding data). */
export const clusterPrimaryKillAt = (chooseSlot: SlotChooser = randomSlot): Fault => ({
  name,
  available: (cluster) => cluster.backend === "redis-cluster",
  inject: async (context) => {
    const redisCluster = redisClusterOf(context.cluster, name)
    const slot = await chooseSlot(context, redisCluster)
    const victim = await redisCluster.primaryOf(slot)
    const pid = victim.pid()
    const at = context.now()
    const started = performance.now()
    await redisCluster.killPrimary(slot)
    recordStep(context, name, "inject", victim.name, { signal: "SIGKILL", pid, slot }, at)
    const promoted = await redisCluster.waitPromoted(slot, victim)
    const millis = Math.round(performance.now() - started)
    context.log(`${name}: ${promoted.name} took over slot ${slot} from ${victim.name} after ${millis} ms`)
    return async () => {
      const restarting = performance.now()
      await redisCluster.restartNode(victim)
      const rejoinMillis = Math.round(performance.now() - restarting)
      context.log(`${name}: ${victim.name} rejoined as a replica after ${rejoinMillis} ms`)
      recordStep(context, name, "heal", victim.name, {
        slot,
        promoted: promoted.name,
        failoverMillis: millis,
        rejoinMillis
      })
    }
  }
})

/** kill -9 of the primary of a random slot; heal = restart it as a replica. */
export const clusterPrimaryKill: Fault = clusterPrimaryKillAt()
