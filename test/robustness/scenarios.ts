/**
 * The robustness run's scenarios: a cluster shape, the faults injected at
 * random while the traffic runs, and what the validators may allow (loss of
 * writes, clock skew, the bounds). A scenario is run by name; the short run
 * inside `npm test` takes the first few, the long run all of them in turn.
 * Each defect issue 22 named has a scenario that shows it: one fault only,
 * again and again, so a run finds it within seconds if it comes back.
 */

/** How the state is held. */
export type ScenarioShape =
  | { readonly backend: "memory" }
  | {
      readonly backend: "redis"
      readonly persistence: "aof-everysec" | "aof-always" | "rdb"
      /** Offset of the last instance's clock, in milliseconds (libfaketime). */
      readonly clockOffsetMillis?: number
    }
  | { readonly backend: "redis-cluster" }

/** A scenario. */
export interface Scenario {
  readonly name: string
  readonly description: string
  readonly shape: ScenarioShape
  readonly instances: number
  /** Faults to pick from (names of `faults/index.ts`). */
  readonly faults: ReadonlyArray<string>
  /** Whether acknowledged writes may be lost (announced by a new epoch). */
  readonly lossAllowed: boolean
  /** Real Go discovery-client nodes, one per instance. */
  readonly goNodes: boolean
  /** Pause between two faults, in milliseconds: [low, high]. */
  readonly faultGapMillis: readonly [number, number]
  /** A checkpoint (traffic held, views and lists compared) after every how many faults. */
  readonly checkpointEvery: number
  /** Service flags beyond the run's (`--name=value`; one naming a run flag replaces it). */
  readonly flags?: ReadonlyArray<string>
}

const netFaults = ["net-latency", "net-stall", "net-reset", "net-slow", "net-cut"]

/** Every scenario, by name; the order is the long run's. */
export const scenarios: ReadonlyArray<Scenario> = [
  {
    name: "redis",
    description:
      "3 instances on one Redis (AOF everysec) behind fault proxies, the last one's clock 3 s ahead; every fault a single Redis can have",
    shape: { backend: "redis", persistence: "aof-everysec", clockOffsetMillis: 3000 },
    instances: 3,
    faults: ["instance-kill", "instance-stall", "redis-kill", "redis-rewind", "redis-flushall", ...netFaults],
    lossAllowed: true,
    goNodes: true,
    faultGapMillis: [1000, 4000],
    checkpointEvery: 2
  },
  {
    name: "memory",
    description: "one instance in memory with snapshots every 2 s: kill -9 and restart from the snapshot, SIGSTOP",
    shape: { backend: "memory" },
    instances: 1,
    faults: ["instance-kill", "instance-stall"],
    lossAllowed: true,
    goNodes: true,
    faultGapMillis: [2000, 5000],
    checkpointEvery: 1
  },
  {
    name: "redis-always",
    description:
      "3 instances on one Redis with AOF always: kill -9 of Redis and of instances, network faults; nothing acknowledged may be lost",
    shape: { backend: "redis", persistence: "aof-always" },
    instances: 3,
    faults: ["instance-kill", "instance-stall", "redis-kill", ...netFaults],
    lossAllowed: false,
    goNodes: false,
    faultGapMillis: [1000, 4000],
    checkpointEvery: 2
  },
  {
    name: "redis-cluster",
    description:
      "3 instances on a Redis Cluster of 3 primaries and 3 replicas: primaries killed, failovers by hand, slots migrated under load",
    shape: { backend: "redis-cluster" },
    instances: 3,
    faults: [
      "cluster-primary-kill",
      "cluster-lagging-failover",
      "cluster-failover",
      "cluster-slot-migration",
      "instance-kill"
    ],
    lossAllowed: true,
    goNodes: false,
    faultGapMillis: [2000, 5000],
    checkpointEvery: 1
  },
  {
    name: "redis-rewind",
    description: "Redis restarted from an older RDB file, again and again (issue 22's first scenario)",
    shape: { backend: "redis", persistence: "aof-everysec" },
    instances: 3,
    faults: ["redis-rewind"],
    lossAllowed: true,
    goNodes: false,
    faultGapMillis: [500, 2000],
    checkpointEvery: 1
  },
  {
    name: "redis-flushall",
    description: "FLUSHALL under open watchers, again and again, with the GC at its default minute",
    shape: { backend: "redis", persistence: "aof-everysec" },
    instances: 3,
    faults: ["redis-flushall"],
    lossAllowed: true,
    goNodes: false,
    faultGapMillis: [1000, 3000],
    checkpointEvery: 1,
    // the GC's own pass (a minute by default) must not be what notices the flush
    flags: ["--gc-interval=1m"]
  },
  {
    name: "redis-restart",
    description: "kill -9 of Redis (RDB only: the writes since the last save are lost) and of instances",
    shape: { backend: "redis", persistence: "rdb" },
    instances: 3,
    faults: ["redis-kill", "instance-kill"],
    lossAllowed: true,
    goNodes: false,
    faultGapMillis: [1000, 3000],
    checkpointEvery: 1
  },
  {
    name: "instance-stall",
    description: "instances on Redis stopped (SIGSTOP) for 6-8 s and continued, while their watchers come and go",
    shape: { backend: "redis", persistence: "aof-everysec" },
    instances: 3,
    faults: ["instance-stall"],
    lossAllowed: false,
    goNodes: false,
    faultGapMillis: [500, 2000],
    checkpointEvery: 1
  },
  {
    name: "redis-network",
    description: "latency, stalls, resets, slow links and cuts between one instance and Redis",
    shape: { backend: "redis", persistence: "aof-everysec" },
    instances: 3,
    faults: netFaults,
    lossAllowed: false,
    goNodes: false,
    faultGapMillis: [500, 2000],
    checkpointEvery: 2
  },
  {
    name: "cluster-failover",
    description:
      "failovers of a Redis Cluster primary to a replica that lagged: the writes it had not received are lost",
    shape: { backend: "redis-cluster" },
    instances: 3,
    faults: ["cluster-lagging-failover"],
    lossAllowed: true,
    goNodes: false,
    faultGapMillis: [1000, 3000],
    checkpointEvery: 1
  },
  {
    name: "cluster-migration",
    description: "slots of watched clusters migrated between primaries under load",
    shape: { backend: "redis-cluster" },
    instances: 3,
    faults: ["cluster-slot-migration"],
    lossAllowed: false,
    goNodes: false,
    faultGapMillis: [500, 2000],
    checkpointEvery: 1
  }
]

/** The scenario named `name`, or undefined. */
export const scenarioByName = (name: string): Scenario | undefined =>
  scenarios.find((scenario) => scenario.name === name)
