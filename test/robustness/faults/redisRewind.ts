/**
 * `redis-rewind`: Redis goes back in time, as when restored from a backup.
 * The fault takes a checkpoint (BGSAVE, the RDB file copied aside), lets the
 * traffic run for 2 to 4 s more, then kills Redis with -9; the heal starts
 * it from the checkpoint's file, so everything written after the checkpoint
 * is lost and revisions may be handed out again. The inject record's
 * `checkpointStart`/`checkpointEnd` (run clock) bound the checkpoint: what
 * was acknowledged before the start is kept, what was written after the end
 * is lost.
 */
import { sleep } from "../cluster/wait.ts"
import { between, type Fault, recordStep } from "./fault.ts"

const name = "redis-rewind"

/** Checkpoint, 2-4 s of traffic, kill -9; heal = start from the checkpoint (lost writes). */
export const redisRewind: Fault = {
  name,
  available: (cluster) => cluster.backend === "redis",
  inject: async (context) => {
    const { cluster } = context
    if (cluster.backend !== "redis") throw new Error(`${name} needs a single Redis`)
    const redis = cluster.redis
    const checkpointStart = context.now()
    const checkpoint = await redis.checkpoint()
    const checkpointEnd = context.now()
    const laterMillis = between(context.random, 2000, 4000)
    context.log(`${name}: checkpoint of ${checkpoint.keys} keys taken; killing Redis in ${laterMillis} ms`)
    await sleep(laterMillis)
    const pid = redis.pid()
    const keysAtKill = Number(await redis.command(["DBSIZE"]))
    const at = context.now()
    await redis.kill()
    recordStep(
      context,
      name,
      "inject",
      redis.name,
      { signal: "SIGKILL", pid, checkpointStart, checkpointEnd, checkpointKeys: checkpoint.keys, keysAtKill },
      at
    )
    return async () => {
      const started = performance.now()
      const loaded = await redis.restore()
      const millis = Math.round(performance.now() - started)
      context.log(`${name}: Redis back from the checkpoint after ${millis} ms with ${loaded} keys`)
      recordStep(context, name, "heal", redis.name, {
        restoredFrom: checkpointEnd,
        keysLoaded: loaded,
        startMillis: millis
      })
    }
  }
}
