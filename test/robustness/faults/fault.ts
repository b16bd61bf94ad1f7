/**
 * What a fault is: a named record that says whether it can hit a shape and
 * how to inject it, returning how to heal it (as etcd's failpoints). Every
 * fault records one `inject` record, timed when the fault hits (the kill,
 * the toxic added), and one `heal` record, timed when healing is complete;
 * their `detail` is `key=value` pairs, readable and parseable.
 */
import type { Instance } from "../cluster/instance.ts"
import type { RunCluster } from "../cluster/runCluster.ts"
import type { FaultRecord, Time } from "../history.ts"

export { between, pick } from "../cluster/random.ts"

/** Undoes a fault; resolves once it is healed. */
export type Heal = () => Promise<void>

/** What a fault acts on and reports to. */
export interface FaultContext {
  readonly cluster: RunCluster
  /** The run's seeded random numbers in [0, 1). */
  readonly random: () => number
  readonly record: (record: FaultRecord) => void
  /** The run's clock (milliseconds since it started). */
  readonly now: () => Time
  /** A line for the run's log (how long a failover took, …). */
  readonly log: (line: string) => void
}

/** A fault: a name, where it applies, and how to inject it. */
export interface Fault {
  readonly name: string
  /** Whether it can hit this shape (e.g. redis-rewind needs a single Redis). */
  readonly available: (cluster: RunCluster) => boolean
  /** Injects it and returns how to heal it; every step is recorded through `record`. */
  readonly inject: (context: FaultContext) => Promise<Heal>
}

/** Values a detail carries. */
export type DetailFields = Readonly<Record<string, string | number | boolean | undefined>>

/** `key=value` pairs separated by spaces (undefined values left out; spaces in values become `_`). */
export const formatDetail = (fields: DetailFields): string =>
  Object.entries(fields)
    .filter((entry): entry is [string, string | number | boolean] => entry[1] !== undefined)
    .map(([key, value]) => `${key}=${String(value).replace(/\s/g, "_")}`)
    .join(" ")

/** The fields of a detail written by `formatDetail`. */
export const parseDetail = (detail: string | undefined): Readonly<Record<string, string>> =>
  Object.fromEntries(
    (detail ?? "")
      .split(" ")
      .filter((pair) => pair.includes("="))
      .map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)])
  )

/** Records one step of fault `name`, at `at` (default: now). */
export const recordStep = (
  context: FaultContext,
  name: string,
  phase: FaultRecord["phase"],
  target: string,
  fields: DetailFields,
  at: Time = context.now()
): void => {
  context.record({ type: "fault", name, phase, at, target, detail: formatDetail(fields) })
}

/** The instances neither killed nor stopped. */
export const runningInstances = (cluster: RunCluster): ReadonlyArray<Instance> =>
  cluster.instances.filter((instance) => instance.state() === "running")
