/**
 * Starts the shapes of a robustness run on loopback: instances in memory,
 * instances on one Redis (each behind its own toxiproxy proxy), or instances
 * on a Redis Cluster of 3 primaries and 3 replicas. Everything lives in the
 * run folder; ports are fixed at start so that killed processes come back
 * where they were. A shape that fails to start stops what it had started.
 */
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { type Instance, startInstance } from "./instance.ts"
import { reservePort } from "./ports.ts"
import { createRedisCluster } from "./redisCluster.ts"
import { type RedisPersistence, startRedisServer } from "./redisServer.ts"
import type { MemoryRunCluster, RedisClusterRunCluster, RedisRunCluster } from "./runCluster.ts"
import { type NetworkProxy, type Toxiproxy, startToxiproxy } from "./toxiproxy.ts"
import { buildToxiproxy } from "./toxiproxyBuild.ts"

/** What every shape takes. */
export interface ShapeOptions {
  /** The run folder (created). */
  readonly dir: string
  /** How many instances (default 3; 1 in memory). */
  readonly instances?: number
  /** Redis key prefix of the instances (default "robustness:"). */
  readonly keyPrefix?: string
  /**
   * Extra service flags in `--name=value` form, e.g. the caps
   * `--max-clusters=50`, `--max-watches=200`, `--gc-interval=500ms`; one
   * naming a default flag replaces it.
   */
  readonly flags?: ReadonlyArray<string>
  /** Run one instance (default the last) with its wall clock offset by `millis` (libfaketime). */
  readonly clockOffset?: { readonly millis: number; readonly instance?: number }
}

/** The `redis` shape's options. */
export interface RedisShapeOptions extends ShapeOptions {
  /** Default "aof-everysec". */
  readonly persistence?: RedisPersistence
  /** Put a toxiproxy proxy between each instance and Redis (default true). */
  readonly proxies?: boolean
  /** The toxiproxy server binary (default: built by `buildToxiproxy`). */
  readonly toxiproxyBinary?: string
}

/** The `redis-cluster` shape's options. */
export interface RedisClusterShapeOptions extends ShapeOptions {
  /** `cluster-node-timeout` in milliseconds (default 1000). */
  readonly nodeTimeoutMillis?: number
}

const offsetOf = (options: ShapeOptions, count: number, index: number): number =>
  options.clockOffset !== undefined && (options.clockOffset.instance ?? count - 1) === index
    ? options.clockOffset.millis
    : 0

const startInstances = async (
  options: ShapeOptions,
  count: number,
  flagsOf: (name: string) => ReadonlyArray<string>,
  started: Array<Instance>
): Promise<ReadonlyArray<Instance>> => {
  const names = Array.from({ length: count }, (_, i) => `i${i}`)
  const results = await Promise.allSettled(
    names.map(async (name, i) => {
      const clockOffsetMillis = offsetOf(options, count, i)
      const instance = await startInstance({
        name,
        dir: options.dir,
        flags: [...flagsOf(name), ...(options.flags ?? [])],
        ...(clockOffsetMillis === 0 ? {} : { clockOffsetMillis })
      })
      started.push(instance)
    })
  )
  for (const result of results) if (result.status === "rejected") throw result.reason
  return names.map((name) => started.find((instance) => instance.name === name)!)
}

const stopper =
  (parts: { instances: ReadonlyArray<Instance>; others: ReadonlyArray<{ stop: () => Promise<void> } | undefined> }) =>
  async (): Promise<void> => {
    await Promise.all(parts.instances.map((instance) => instance.kill()))
    await Promise.all(parts.others.map((other) => other?.stop()))
  }

const skewOf = (options: ShapeOptions): number => Math.abs(options.clockOffset?.millis ?? 0)

/** Instances in memory, each with its own snapshot file (`<dir>/<name>/state.binpb`, saved every 2 s). */
export const startMemory = async (options: ShapeOptions): Promise<MemoryRunCluster> => {
  mkdirSync(options.dir, { recursive: true })
  const started: Array<Instance> = []
  const stopAll = stopper({ instances: started, others: [] })
  try {
    const instances = await startInstances(
      options,
      options.instances ?? 1,
      (name) => {
        mkdirSync(join(options.dir, name), { recursive: true })
        return ["--state=memory", `--snapshot-path=${join(options.dir, name, "state.binpb")}`, "--snapshot-interval=2s"]
      },
      started
    )
    return {
      backend: "memory",
      dir: options.dir,
      keyPrefix: "",
      instances,
      proxies: new Map(),
      toxiproxy: undefined,
      clockSkewMillis: skewOf(options),
      stopAll
    }
  } catch (error) {
    await stopAll()
    throw error
  }
}

/** One Redis with the chosen persistence (`<dir>/redis/`), and instances on it, each through its own proxy. */
export const startRedis = async (options: RedisShapeOptions): Promise<RedisRunCluster> => {
  mkdirSync(options.dir, { recursive: true })
  const keyPrefix = options.keyPrefix ?? "robustness:"
  const started: Array<Instance> = []
  const others: Array<{ stop: () => Promise<void> }> = []
  const stopAll = stopper({ instances: started, others })
  try {
    const redis = await startRedisServer({
      dir: join(options.dir, "redis"),
      persistence: options.persistence ?? "aof-everysec"
    })
    others.push(redis)
    const count = options.instances ?? 3
    const proxies = new Map<string, NetworkProxy>()
    let toxiproxy: Toxiproxy | undefined
    if (options.proxies ?? true) {
      toxiproxy = await startToxiproxy(
        options.toxiproxyBinary ?? (await buildToxiproxy()),
        join(options.dir, "toxiproxy.log")
      )
      others.push(toxiproxy)
      for (let i = 0; i < count; i++) {
        proxies.set(`i${i}`, await toxiproxy.createProxy(`redis-i${i}`, await reservePort(), redis.port))
      }
    }
    const instances = await startInstances(
      options,
      count,
      (name) => [
        `--state=redis://127.0.0.1:${proxies.get(name)?.listenPort ?? redis.port}`,
        `--state-key-prefix=${keyPrefix}`
      ],
      started
    )
    return {
      backend: "redis",
      dir: options.dir,
      keyPrefix,
      instances,
      proxies,
      toxiproxy,
      clockSkewMillis: skewOf(options),
      redis,
      stopAll
    }
  } catch (error) {
    await stopAll()
    throw error
  }
}

/**
 * A Redis Cluster (`<dir>/redis-cluster/r0` … `r5`) and instances on it,
 * given all six nodes as seeds. No proxies: node-redis learns the nodes'
 * addresses from CLUSTER SLOTS and connects to them directly, so a proxy in
 * front of the seeds would not carry the traffic.
 */
export const startRedisCluster = async (options: RedisClusterShapeOptions): Promise<RedisClusterRunCluster> => {
  mkdirSync(options.dir, { recursive: true })
  const keyPrefix = options.keyPrefix ?? "robustness:"
  const started: Array<Instance> = []
  const others: Array<{ stop: () => Promise<void> }> = []
  const stopAll = stopper({ instances: started, others })
  try {
    const redisCluster = await createRedisCluster({
      dir: join(options.dir, "redis-cluster"),
      ...(options.nodeTimeoutMillis === undefined ? {} : { nodeTimeoutMillis: options.nodeTimeoutMillis })
    })
    others.push(redisCluster)
    const instances = await startInstances(
      options,
      options.instances ?? 3,
      () => [`--state=${redisCluster.url}`, "--state-cluster", `--state-key-prefix=${keyPrefix}`],
      started
    )
    return {
      backend: "redis-cluster",
      dir: options.dir,
      keyPrefix,
      instances,
      proxies: new Map(),
      toxiproxy: undefined,
      clockSkewMillis: skewOf(options),
      redisCluster,
      stopAll
    }
  } catch (error) {
    await stopAll()
    throw error
  }
}
