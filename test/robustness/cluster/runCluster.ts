/**
 * The shape a robustness run started: which backend, the service instances,
 * what holds the state (nothing shared, one Redis, or a Redis Cluster), the
 * network proxies between instances and Redis, and how to stop it all. A
 * discriminated union on `backend`, so a fault that needs a single Redis or
 * a Redis Cluster reaches it only after checking which shape it hit.
 */
import type { Instance } from "./instance.ts"
import type { RedisCluster } from "./redisCluster.ts"
import type { RedisServer } from "./redisServer.ts"
import type { NetworkProxy, Toxiproxy } from "./toxiproxy.ts"

/** What every shape has. */
export interface RunClusterBase {
  /** The run folder: logs, Redis files, snapshots. */
  readonly dir: string
  /** The Redis key prefix the instances use ("" in memory). */
  readonly keyPrefix: string
  /** "i0", "i1", …, in order. */
  readonly instances: ReadonlyArray<Instance>
  /** The proxy between each instance and Redis, by instance name (empty without proxies). */
  readonly proxies: ReadonlyMap<string, NetworkProxy>
  readonly toxiproxy: Toxiproxy | undefined
  /** The largest clock offset of an instance, in milliseconds (for the run record). */
  readonly clockSkewMillis: number
  /** kill -9 of every process of the shape (instances, proxies, Redis); the run folder stays. */
  readonly stopAll: () => Promise<void>
}

/** Instances each holding their own state in memory (with snapshot files); nothing is shared between them. */
export interface MemoryRunCluster extends RunClusterBase {
  readonly backend: "memory"
}

/** Instances sharing one Redis, each through its own proxy unless the shape was started without them. */
export interface RedisRunCluster extends RunClusterBase {
  readonly backend: "redis"
  readonly redis: RedisServer
}

/** Instances sharing a Redis Cluster of 3 primaries and 3 replicas (never through proxies). */
export interface RedisClusterRunCluster extends RunClusterBase {
  readonly backend: "redis-cluster"
  readonly redisCluster: RedisCluster
}

/** A started shape. */
export type RunCluster = MemoryRunCluster | RedisRunCluster | RedisClusterRunCluster

/** The backends a shape can have. */
export type Backend = RunCluster["backend"]
