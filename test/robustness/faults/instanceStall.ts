/**
 * `instance-stall`: SIGSTOP of a random running instance for 6 to 8 s, longer
 * than the clients' deadlines, so its calls time out, its watchers see
 * nothing, and Redis sees its connections idle; healed by SIGCONT (the heal
 * waits until the chosen stall time has passed since the stop).
 */
import { sleep } from "../cluster/wait.ts"
import { between, type Fault, pick, recordStep, runningInstances } from "./fault.ts"

const name = "instance-stall"

/** SIGSTOP of a random instance for 6-8 s; heal = SIGCONT. */
export const instanceStall: Fault = {
  name,
  available: (cluster) => cluster.instances.length > 0,
  inject: async (context) => {
    const instance = pick(context.random, runningInstances(context.cluster))
    const stallMillis = between(context.random, 6000, 8000)
    const at = context.now()
    const stoppedAt = performance.now()
    instance.stop()
    recordStep(context, name, "inject", instance.name, { signal: "SIGSTOP", pid: instance.pid(), stallMillis }, at)
    return async () => {
      await sleep(stallMillis - (performance.now() - stoppedAt))
      instance.cont()
      recordStep(context, name, "heal", instance.name, {
        signal: "SIGCONT",
        stoppedMillis: Math.round(performance.now() - stoppedAt)
      })
    }
  }
}
