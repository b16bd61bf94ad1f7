/**
 * What `--io-threads auto` measures each second: the main thread's event
 * loop utilization, the process's CPU, and the cores left idle (on the host,
 * and within the container's CPU quota when there is one), each over the
 * time since the last sample.
 *
 * @since 0.1.0
 */
import { cpus } from "node:os"
import { cpuQuotaCores } from "./cpuQuota.ts"
import type { ScalerSample } from "./ThreadScaler.ts"

/** The host's CPU times so far, summed over its cores (milliseconds): idle, and all. */
const hostTimes = (): { readonly idle: number; readonly total: number } => {
  let idle = 0
  let total = 0
  for (const cpu of cpus()) {
    idle += cpu.times.idle
    total += cpu.times.user + cpu.times.nice + cpu.times.sys + cpu.times.idle + cpu.times.irq
  }
  return { idle, total }
}

/**
 * Samples of the process's load, each over the time since the one before.
 *
 * @category models
 * @since 0.1.0
 */
export class LoadSampler {
  readonly #cores = cpus().length
  readonly #quota: number | undefined
  #loop = performance.eventLoopUtilization()
  #cpu = process.cpuUsage()
  #host = hostTimes()
  #at = performance.now()

  /** `quota`: the cores the container may use (default: read from its cgroup). */
  constructor(quota: number | undefined = cpuQuotaCores()) {
    this.#quota = quota
  }

  /** The load since the last sample (or since the sampler was made). */
  sample(): ScalerSample {
    const now = performance.now()
    const loop = performance.eventLoopUtilization()
    const cpu = process.cpuUsage()
    const host = hostTimes()
    const hostTotal = host.total - this.#host.total
    const hostIdle = hostTotal > 0 ? ((host.idle - this.#host.idle) / hostTotal) * this.#cores : 0
    const processCores = (cpu.user - this.#cpu.user + cpu.system - this.#cpu.system) / 1e6 / ((now - this.#at) / 1000)
    const sample: ScalerSample = {
      mainUtilization: performance.eventLoopUtilization(loop, this.#loop).utilization,
      processCores,
      // in a container, the quota left is what this process may still use, however idle the host is
      idleCores: this.#quota === undefined ? hostIdle : Math.max(0, Math.min(hostIdle, this.#quota - processCores))
    }
    this.#loop = loop
    this.#cpu = cpu
    this.#host = host
    this.#at = now
    return sample
  }
}
