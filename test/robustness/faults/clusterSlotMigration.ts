/**
 * `cluster-slot-migration`: a slot of the Redis Cluster moves from its
 * primary to another one while the traffic runs: during the move clients
 * get ASK redirections and TRYAGAIN for scripts whose keys are split, and
 * MOVED once it is done. The inject returns once every node agrees on the
 * new owner; there is nothing to heal.
 */
import { type Fault, recordStep } from "./fault.ts"
import { randomSlot, redisClusterOf, type SlotChooser } from "./clusterSlot.ts"

const name = "cluster-slot-migration"

/** The fault, aimed at the slot `chooseSlot` picks (default: a random slot holding data). */
export const clusterSlotMigrationAt = (chooseSlot: SlotChooser = randomSlot): Fault => ({
  name,
  available: (cluster) => cluster.backend === "redis-cluster",
  inject: async (context) => {
    const redisCluster = redisClusterOf(context.cluster, name)
    const slot = await chooseSlot(context, redisCluster)
    const at = context.now()
    const migration = await redisCluster.migrateSlot(slot, context.random)
    context.log(
      `${name}: slot ${slot} (${migration.keys} keys) moved from ${migration.from.name} to ${migration.to.name} in ${migration.millis} ms`
    )
    recordStep(
      context,
      name,
      "inject",
      migration.from.name,
      { slot, from: migration.from.name, to: migration.to.name, keys: migration.keys, millis: migration.millis },
      at
    )
    return async () => {
      recordStep(context, name, "heal", migration.from.name, { nothingToHeal: true })
    }
  }
})

/** Moves a random slot holding data to another primary; nothing to heal. */
export const clusterSlotMigration: Fault = clusterSlotMigrationAt()
