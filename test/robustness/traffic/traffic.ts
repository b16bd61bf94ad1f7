/**
 * What the robustness run's clients share: the instances they call, the
 * seeded random numbers, the history files, and how a call's result becomes
 * a record. A client runs until `stopped()` says so.
 */
import * as grpc from "@grpc/grpc-js"
import type { Affiliate } from "../../../src/gen/discovery/server/cluster_pb.ts"
import { type AffiliateRecord, digest, type Outcome } from "../history.ts"
import type { HistoryFiles } from "./historyFiles.ts"
import type { CallResult } from "./wireClient.ts"

/** An instance as the clients reach it. */
export interface Target {
  readonly name: string
  readonly address: string
  readonly metricsPort: number
  /** The status of its `/readyz`, null when it does not answer. */
  readonly readyz: () => Promise<number | null>
}

/**
 * When the clients may call: running, paused for a checkpoint (writers wait,
 * watchers settle with one reading watch each), or stopped. A client enters
 * before each operation and leaves after it, so a pause waits for the
 * operations in flight.
 */
export class TrafficControl {
  #paused = false
  #stopped = false
  #inFlight = 0

  /** True once the traffic must stop. */
  readonly stopped = (): boolean => this.#stopped

  /** True while a checkpoint holds the traffic (or once it stopped): watchers settle. */
  readonly settling = (): boolean => this.#paused || this.#stopped

  /** Waits while the traffic is paused; false once it stopped. A true answer counts the caller in flight until `leave`. */
  async enter(): Promise<boolean> {
    while (this.#paused && !this.#stopped) await new Promise((resolve) => setTimeout(resolve, 25))
    if (this.#stopped) return false
    this.#inFlight++
    return true
  }

  /** Ends an operation `enter` let in. */
  leave(): void {
    this.#inFlight--
  }

  /** Holds the traffic and waits for the operations in flight. */
  async pause(): Promise<void> {
    this.#paused = true
    while (this.#inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 10))
  }

  /** Lets the traffic run again. */
  resume(): void {
    this.#paused = false
  }

  /** Stops the traffic for good. */
  stop(): void {
    this.#stopped = true
  }
}

/** What every client of a run gets. */
export interface TrafficContext {
  readonly targets: ReadonlyArray<Target>
  readonly files: HistoryFiles
  /** The run's seeded random numbers in [0, 1); each client takes its own stream (see `fork`). */
  readonly random: () => number
  /** Deadline of a unary call, in milliseconds. */
  readonly deadlineMillis: number
  readonly control: TrafficControl
  /** True once the traffic must stop. */
  readonly stopped: () => boolean
}

/** A seeded generator of numbers in [0, 1) (mulberry32). */
export const seeded = (seed: number): (() => number) => {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

/** A new generator seeded from `random`, so each client's choices do not depend on the others' timing. */
export const fork = (random: () => number): (() => number) => seeded(Math.floor(random() * 2 ** 32))

/** One of `items`. */
export const pickOf = <A>(random: () => number, items: ReadonlyArray<A>): A =>
  items[Math.floor(random() * items.length)] as A

/** A whole number in [low, high]. */
export const intBetween = (random: () => number, low: number, high: number): number =>
  low + Math.floor(random() * (high - low + 1))

/** `length` random bytes. */
export const bytesOf = (random: () => number, length: number): Uint8Array => {
  const bytes = new Uint8Array(length)
  for (let i = 0; i < length; i++) bytes[i] = Math.floor(random() * 256)
  return bytes
}

/** Sleeps `millis`, waking early (at most 100 ms late) once the traffic stops. */
export const sleep = async (context: TrafficContext, millis: number): Promise<void> => {
  const until = Date.now() + millis
  while (!context.stopped() && Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(100, until - Date.now())))
  }
}

/**
 * The outcome of a call: changed nothing (`failed`: the server refused it
 * before any change, a bad argument or a limit), or may have (`unknown`:
 * deadline, connection, backend unavailable, cancelled).
 */
export const outcomeOf = (result: CallResult<unknown>): Outcome => {
  if (result.ok) return "ok"
  return result.code === grpc.status.INVALID_ARGUMENT || result.code === grpc.status.RESOURCE_EXHAUSTED
    ? "failed"
    : "unknown"
}

/** An affiliate of a List or a watch message, as the history records it. */
export const affiliateRecord = (affiliate: Affiliate): AffiliateRecord => ({
  id: affiliate.id,
  data: digest(affiliate.data),
  endpoints: affiliate.endpoints.map(digest)
})
