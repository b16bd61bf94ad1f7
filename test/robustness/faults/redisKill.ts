/**
 * `redis-kill`: kill -9 of the single Redis, so every instance loses its
 * connections at once; healed by starting it again from its own files (the
 * append-only file, fsynced every second or on every write, or only the last
 * RDB snapshot, as the run chose). With AOF a kill -9 of the process loses
 * nothing the kernel had received; with RDB only, everything since the last
 * snapshot is lost.
 */
import { type Fault, recordStep } from "./fault.ts"

const name = "redis-kill"

/** kill -9 of Redis; heal = start it from its files. */
export const redisKill: Fault = {
  name,
  available: (cluster) => cluster.backend === "redis",
  inject: async (context) => {
    const { cluster } = context
    if (cluster.backend !== "redis") throw new Error(`${name} needs a single Redis`)
    const redis = cluster.redis
    const pid = redis.pid()
    const at = context.now()
    await redis.kill()
    recordStep(context, name, "inject", redis.name, { signal: "SIGKILL", pid, persistence: redis.persistence }, at)
    return async () => {
      const started = performance.now()
      await redis.start()
      const keys = Number(await redis.command(["DBSIZE"]))
      const millis = Math.round(performance.now() - started)
      context.log(`${name}: Redis back after ${millis} ms with ${keys} keys`)
      recordStep(context, name, "heal", redis.name, { persistence: redis.persistence, keys, startMillis: millis })
    }
  }
}
