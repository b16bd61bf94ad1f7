/**
 * `cluster-lagging-failover`: a failover to a replica that lagged, so the
 * writes its primary acknowledged last are lost. The replica of the primary
 * of a discovery cluster's slot is stopped (SIGSTOP) and its replication
 * link cut while traffic goes on, the primary is killed (kill -9), the
 * replica continues (SIGCONT) and takes over without those writes; the
 * inject waits until it has. Healed by
 * starting the killed node again: it rejoins as a replica of the new primary.
 */
import type { Fault } from "./fault.ts"
import { between, recordStep } from "./fault.ts"
import { redisCommand } from "../cluster/resp.ts"
import { randomSlot, redisClusterOf, type SlotChooser } from "./clusterSlot.ts"

const name = "cluster-lagging-failover"

/** The fault, aimed at the slot `chooseSlot` picks (default: a random slot holding data). */
export const clusterLaggingFailoverAt = (chooseSlot: SlotChooser = randomSlot): Fault => ({
  name,
  available: (cluster) => cluster.backend === "redis-cluster",
  inject: async (context) => {
    const redisCluster = redisClusterOf(context.cluster, name)
    const slot = await chooseSlot(context, redisCluster)
    const view = await redisCluster.waitHealthy()
    const primary = redisCluster.nodeById(view.ownerOf(slot))
    const replica = view.nodes
      .filter((node) => node.primaryId === primary.id())
      .map((node) => redisCluster.nodeById(node.id))
      .find((node) => node.running())
    const replicaPid = replica?.pid()
    if (replica === undefined || replicaPid === undefined) throw new Error(`${primary.name} has no running replica`)
    const lagMillis = between(context.random, 500, 1500)
    process.kill(replicaPid, "SIGSTOP")
    // what the primary already sent sits in the stopped replica's socket buffer: cut the link, so nothing more is
    await redisCommand(primary.port, ["CLIENT", "KILL", "TYPE", "replica"])
    const at = context.now()
    await new Promise((resolve) => setTimeout(resolve, lagMillis))
    const primaryPid = primary.pid()
    await primary.kill()
    process.kill(replicaPid, "SIGCONT")
    recordStep(
      context,
      name,
      "inject",
      primary.name,
      { slot, replica: replica.name, lagMillis, signal: "SIGKILL", pid: primaryPid },
      at
    )
    const started = performance.now()
    const promoted = await redisCluster.waitPromoted(slot, primary)
    const failoverMillis = Math.round(performance.now() - started)
    context.log(`${name}: ${promoted.name} took over slot ${slot}, ${lagMillis} ms behind, after ${failoverMillis} ms`)
    return async () => {
      await redisCluster.restartNode(primary)
      recordStep(context, name, "heal", primary.name, { slot, promoted: promoted.name, failoverMillis })
    }
  }
})

/** A failover of a random slot's primary to a replica stopped for 0.5-1.5 s before the primary died. */
export const clusterLaggingFailover: Fault = clusterLaggingFailoverAt()
