/**
 * `redis-flushall`: every key is deleted at once (FLUSHALL on the single
 * Redis, or on every primary of a Redis Cluster): the state is lost while
 * Redis stays up. Nothing is healed: the nodes' republishing restores the
 * clusters, under new epochs.
 */
import { redisCommand } from "../cluster/resp.ts"
import { type Fault, recordStep } from "./fault.ts"

const name = "redis-flushall"

/** FLUSHALL; heal = nothing (recorded at once). */
export const redisFlushall: Fault = {
  name,
  available: (cluster) => cluster.backend === "redis" || cluster.backend === "redis-cluster",
  inject: async (context) => {
    const { cluster } = context
    const at = context.now()
    let target: string
    if (cluster.backend === "redis") {
      target = cluster.redis.name
      await cluster.redis.flushAll()
      recordStep(context, name, "inject", target, {}, at)
    } else if (cluster.backend === "redis-cluster") {
      const view = await cluster.redisCluster.waitHealthy()
      const primaries = view.nodes.filter((node) => node.primary && node.slots.length > 0)
      await Promise.all(primaries.map((node) => redisCommand(node.port, ["FLUSHALL", "SYNC"])))
      const names = primaries.map((node) => cluster.redisCluster.nodeById(node.id).name)
      target = "redis-cluster"
      recordStep(context, name, "inject", target, { primaries: names.join(",") }, at)
    } else {
      throw new Error(`${name} needs Redis`)
    }
    return async () => {
      recordStep(context, name, "heal", target, { nothingToHeal: true })
    }
  }
}
