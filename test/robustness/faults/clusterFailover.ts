/**
 * `cluster-failover`: a manual failover (CLUSTER FAILOVER on a replica of
 * the primary owning a slot): the replica catches up, the primary pauses
 * its clients, and the roles swap, so clients are redirected (MOVED) to the
 * new primary without losing writes. The inject waits until every node
 * agrees; there is nothing to heal.
 */
import { type Fault, recordStep } from "./fault.ts"
import { randomSlot, redisClusterOf, type SlotChooser } from "./clusterSlot.ts"

const name = "cluster-failover"

/** The fault, aimed at the slot `chooseSlot` picks (default: a random slot holding data). */
export const clusterFailoverAt = (chooseSlot: SlotChooser = randomSlot): Fault => ({
  name,
  available: (cluster) => cluster.backend === "redis-cluster",
  inject: async (context) => {
    const redisCluster = redisClusterOf(context.cluster, name)
    const slot = await chooseSlot(context, redisCluster)
    const at = context.now()
    const started = performance.now()
    const { promoted, demoted } = await redisCluster.failover(slot, context.random)
    const millis = Math.round(performance.now() - started)
    context.log(`${name}: ${promoted.name} replaced ${demoted.name} as primary of slot ${slot} in ${millis} ms`)
    recordStep(
      context,
      name,
      "inject",
      demoted.name,
      { slot, from: demoted.name, to: promoted.name, failoverMillis: millis },
      at
    )
    return async () => {
      recordStep(context, name, "heal", demoted.name, { nothingToHeal: true })
    }
  }
})

/** Manual failover of the primary of a random slot; nothing to heal. */
export const clusterFailover: Fault = clusterFailoverAt()
