/**
 * When `--io-threads auto` adds a worker thread and when it takes one away.
 * A call served by a worker thread crosses to the main thread and back,
 * which costs more CPU than the call's own work when the threads sleep
 * between calls; so the port is served by the main thread alone until that
 * thread is the bottleneck (its event loop busy nearly all the time) while
 * the host has a core to spare, and goes back to it once the whole process
 * would fit in a fraction of one core again. Decisions are taken on one
 * sample a second, each needing several in a row, with a pause after each
 * change so that the load can settle on the new threads; a thread added
 * that did not let the process do more (its CPU did not grow) is taken
 * away again, and no other is tried for a while.
 *
 * @since 0.1.0
 */

/**
 * One second of the process, as the scaler sees it.
 *
 * @category models
 * @since 0.1.0
 */
export interface ScalerSample {
  /** The main thread's event loop utilization over the second (0 to 1). */
  readonly mainUtilization: number
  /** The CPU the whole process used over the second, in cores. */
  readonly processCores: number
  /** The host's CPU left idle over the second, in cores. */
  readonly idleCores: number
}

/**
 * The thresholds of the scaler; every field has a default.
 *
 * @category models
 * @since 0.1.0
 */
export interface ScalerPolicy {
  /** The most worker threads (the cores available, at most 8, less the main thread). */
  readonly maxWorkers: number
  /** The main thread counts as the bottleneck from this utilization (default 0.85)… */
  readonly busyUtilization?: number | undefined
  /** …held this many seconds in a row (default 3)… */
  readonly busySeconds?: number | undefined
  /** …while at least this many cores stay idle on the host (default 0.75). */
  readonly spareCores?: number | undefined
  /** A worker goes once the whole process uses at most this much of one core (default 0.3)… */
  readonly quietCores?: number | undefined
  /** …for this many seconds in a row (default 60). */
  readonly quietSeconds?: number | undefined
  /** Seconds after a change before the next one (default 10). */
  readonly settleSeconds?: number | undefined
  /** A thread added must bring the process at least this much more CPU, in cores, once settled (default 0.3)… */
  readonly gainCores?: number | undefined
  /** …else it is taken away again, and none is added for this many seconds (default 600). */
  readonly noGainSeconds?: number | undefined
}

/**
 * What to do after a sample.
 *
 * @category models
 * @since 0.1.0
 */
export type ScalerDecision = "add" | "remove" | "hold"

/**
 * The scaler's state: the runs of busy and quiet seconds, and the pause
 * after a change.
 *
 * @category models
 * @since 0.1.0
 */
export class ThreadScaler {
  readonly #maxWorkers: number
  readonly #busyUtilization: number
  readonly #busySeconds: number
  readonly #spareCores: number
  readonly #quietCores: number
  readonly #quietSeconds: number
  readonly #settleSeconds: number
  readonly #gainCores: number
  readonly #noGainSeconds: number
  #busy = 0
  #quiet = 0
  #settling = 0
  /** The process's CPU when the last thread was added, until the thread is judged. */
  #before: number | undefined
  #noAddFor = 0

  constructor(policy: ScalerPolicy) {
    this.#maxWorkers = policy.maxWorkers
    this.#busyUtilization = policy.busyUtilization ?? 0.85
    this.#busySeconds = policy.busySeconds ?? 3
    this.#spareCores = policy.spareCores ?? 0.75
    this.#quietCores = policy.quietCores ?? 0.3
    this.#quietSeconds = policy.quietSeconds ?? 60
    this.#settleSeconds = policy.settleSeconds ?? 10
    this.#gainCores = policy.gainCores ?? 0.3
    this.#noGainSeconds = policy.noGainSeconds ?? 600
  }

  /** The decision after one more second, with `workers` worker threads serving now. */
  decide(sample: ScalerSample, workers: number): ScalerDecision {
    if (this.#noAddFor > 0) this.#noAddFor--
    if (this.#settling > 0) {
      // the load has yet to move to the new threads: these seconds say nothing of them
      this.#settling--
      return "hold"
    }
    const busy = sample.mainUtilization >= this.#busyUtilization && sample.idleCores >= this.#spareCores
    this.#busy = busy ? this.#busy + 1 : 0
    this.#quiet = sample.processCores <= this.#quietCores ? this.#quiet + 1 : 0
    const before = this.#before
    this.#before = undefined
    // a thread that brought no more work done (the main thread busy with the state itself, or no core free after all) goes again
    if (before !== undefined && sample.processCores < before + this.#gainCores && workers > 0) {
      this.#noAddFor = this.#noGainSeconds
      return this.#changed("remove")
    }
    if (this.#busy >= this.#busySeconds && workers < this.#maxWorkers && this.#noAddFor === 0) {
      this.#before = sample.processCores
      return this.#changed("add")
    }
    if (this.#quiet >= this.#quietSeconds && workers > 0) return this.#changed("remove")
    return "hold"
  }

  #changed(decision: ScalerDecision): ScalerDecision {
    this.#busy = 0
    this.#quiet = 0
    this.#settling = this.#settleSeconds
    return decision
  }
}
