/**
 * `instance-kill`: kill -9 of a random running instance, so its open watches
 * and calls in flight die with its connections; healed by starting it again
 * on the same ports (a memory instance loads its last snapshot).
 */
import { type Fault, pick, recordStep, runningInstances } from "./fault.ts"

const name = "instance-kill"

/** kill -9 of a random instance; heal = restart. */
export const instanceKill: Fault = {
  name,
  available: (cluster) => cluster.instances.length > 0,
  inject: async (context) => {
    const instance = pick(context.random, runningInstances(context.cluster))
    const pid = instance.pid()
    const at = context.now()
    await instance.kill()
    recordStep(context, name, "inject", instance.name, { signal: "SIGKILL", pid }, at)
    return async () => {
      const started = performance.now()
      await instance.restart()
      const millis = Math.round(performance.now() - started)
      context.log(`${name}: ${instance.name} listening again after ${millis} ms`)
      recordStep(context, name, "heal", instance.name, { restarted: true, pid: instance.pid(), startMillis: millis })
    }
  }
}
