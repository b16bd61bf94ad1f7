/**
 * Each fault of the robustness runs injected once into a small shape of
 * real processes on loopback (one memory instance under faketime; one Redis
 * with AOF and two instances behind toxiproxy; a Redis Cluster of 3+3 with
 * two instances), checking what it visibly does and that healing undoes it:
 * a killed instance answers again, a cut link makes `/readyz` 503 and then
 * 200, a rewind loses what was written after the checkpoint, a failover
 * swaps roles, a migrated slot has a new owner with its keys.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Duration, Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { GrpcClient } from "../../src/adapters/grpc/index.ts"
import type { Instance } from "./cluster/instance.ts"
import { keySlot } from "./cluster/keySlot.ts"
import { infoFields, redisCommand, redisText } from "./cluster/resp.ts"
import type { MemoryRunCluster, RedisClusterRunCluster, RedisRunCluster, RunCluster } from "./cluster/runCluster.ts"
import { startMemory, startRedis, startRedisCluster } from "./cluster/shapes.ts"
import type { NetworkProxy } from "./cluster/toxiproxy.ts"
import { buildToxiproxy } from "./cluster/toxiproxyBuild.ts"
import { sleep, waitFor } from "./cluster/wait.ts"
import type { Fault, FaultContext } from "./faults/fault.ts"
import { parseDetail } from "./faults/fault.ts"
import {
  clusterFailover,
  clusterLaggingFailoverAt,
  clusterPrimaryKill,
  clusterSlotMigration,
  instanceKill,
  instanceStall,
  netCut,
  netLatency,
  netReset,
  netSlow,
  netStall,
  redisFlushall,
  redisKill,
  redisRewind
} from "./faults/index.ts"
import type { FaultRecord } from "./history.ts"

const runDir = mkdtempSync(join(tmpdir(), "robustness-faults-"))
let toxiproxyBinary = ""

beforeAll(async () => {
  toxiproxyBinary = await buildToxiproxy()
}, 300_000)

afterAll(() => {
  rmSync(runDir, { recursive: true, force: true })
})

/** A small seeded generator (mulberry32), so a failure names the choices it made. */
const seeded = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** A fault context on `cluster` that keeps what the fault recorded. */
const contextOf = (cluster: RunCluster, seed = 7) => {
  const records: Array<FaultRecord> = []
  const started = performance.now()
  const context: FaultContext = {
    cluster,
    random: seeded(seed),
    record: (record) => records.push(record),
    now: () => Math.round(performance.now() - started),
    log: (line) => process.stderr.write(`[faults.test] ${line}\n`)
  }
  return { context, records }
}

/** Injects `fault`, checks its inject record, and returns its detail, its target and the heal. */
const inject = async (fault: Fault, cluster: RunCluster, seed?: number) => {
  expect(fault.available(cluster)).toBe(true)
  const { context, records } = contextOf(cluster, seed)
  const heal = await fault.inject(context)
  const injected = records.find((record) => record.phase === "inject")
  expect(injected).toMatchObject({ type: "fault", name: fault.name, phase: "inject" })
  return {
    detail: parseDetail(injected?.detail),
    target: injected?.target ?? "",
    heal: async () => {
      await heal()
      expect(records.filter((record) => record.phase === "heal")).toHaveLength(1)
      expect(records.find((record) => record.phase === "heal")?.name).toBe(fault.name)
    }
  }
}

const instanceNamed = (cluster: RunCluster, name: string): Instance => {
  const instance = cluster.instances.find((candidate) => candidate.name === name)
  if (instance === undefined) throw new Error(`no instance ${name}`)
  return instance
}

const readyzBecomes = (instance: Instance, status: number | null, timeoutMillis = 20_000) =>
  waitFor(`${instance.name} /readyz ${status}`, async () => ((await instance.readyz()) === status ? true : undefined), {
    timeoutMillis,
    intervalMillis: 100
  })

const timed = async <A>(action: () => Promise<A>): Promise<{ readonly value: A; readonly millis: number }> => {
  const started = performance.now()
  const value = await action()
  return { value, millis: performance.now() - started }
}

describe("faults on a memory instance", () => {
  const clockOffsetMillis = 20_000
  let cluster: MemoryRunCluster

  beforeAll(async () => {
    cluster = await startMemory({
      dir: join(runDir, "memory"),
      instances: 1,
      clockOffset: { millis: clockOffsetMillis }
    })
  }, 60_000)

  afterAll(async () => {
    await cluster?.stopAll()
  })

  const clockOffsetSeen = (instance: Instance) => instance.lastStart().loggedAt - instance.lastStart().seenAt

  it("runs the instance with its clock offset (faketime)", () => {
    const [instance] = cluster.instances
    expect(instance?.clockOffsetMillis).toBe(clockOffsetMillis)
    expect(cluster.clockSkewMillis).toBe(clockOffsetMillis)
    expect(Math.abs(clockOffsetSeen(instance!) - clockOffsetMillis)).toBeLessThan(1500)
  })

  it("instance-kill: kill -9, then restarted on its ports with its snapshot and its clock offset", async () => {
    const [instance] = cluster.instances
    const clusterId = "kill-me"
    const call = <A, E>(use: (api: Effect.Success<ReturnType<typeof GrpcClient.make>>) => Effect.Effect<A, E>) =>
      Effect.runPromise(
        Effect.scoped(
          Effect.flatMap(GrpcClient.make({ endpoint: instance!.address, tls: false, callTimeout: "5 seconds" }), use)
        )
      )
    const logged = readFileSync(instance!.logFile).length
    await call((api) =>
      api.affiliateUpdate({
        clusterId,
        affiliateId: "a1",
        data: new TextEncoder().encode("kept"),
        endpoints: [],
        ttl: Duration.minutes(5)
      })
    )
    await waitFor("a snapshot with the affiliate", () =>
      readFileSync(instance!.logFile).subarray(logged).toString().includes('"affiliates":1') ? true : undefined
    )
    const pid = instance!.pid()
    const { detail, target, heal } = await inject(instanceKill, cluster)
    expect(target).toBe(instance!.name)
    expect(detail).toMatchObject({ signal: "SIGKILL", pid: String(pid) })
    expect(instance!.state()).toBe("exited")
    expect(await instance!.readyz()).toBeNull()
    await heal()
    expect(instance!.pid()).not.toBe(pid)
    expect(await instance!.readyz()).toBe(200)
    const listed = await call((api) => api.list({ clusterId }))
    expect(listed.map((affiliate) => new TextDecoder().decode(affiliate.data))).toEqual(["kept"])
    expect(Math.abs(clockOffsetSeen(instance!) - clockOffsetMillis)).toBeLessThan(1500)
  }, 30_000)

  it("instance-stall: SIGSTOP makes it silent for 6-8 s, SIGCONT brings it back", async () => {
    const [instance] = cluster.instances
    const { detail, heal } = await inject(instanceStall, cluster)
    expect(instance!.state()).toBe("stopped")
    expect(await instance!.readyz(500)).toBeNull()
    const { millis } = await timed(heal)
    expect(millis).toBeGreaterThan(Number(detail.stallMillis) - 1500)
    expect(instance!.state()).toBe("running")
    await readyzBecomes(instance!, 200, 5000)
  }, 30_000)
})

describe("faults on one Redis with AOF and proxies", () => {
  let cluster: RedisRunCluster

  beforeAll(async () => {
    cluster = await startRedis({
      dir: join(runDir, "redis"),
      instances: 2,
      persistence: "aof-everysec",
      toxiproxyBinary
    })
  }, 60_000)

  afterAll(async () => {
    await cluster?.stopAll()
  })

  const proxyOf = (target: string): NetworkProxy => {
    const proxy = cluster.proxies.get(target)
    if (proxy === undefined) throw new Error(`no proxy for ${target}`)
    return proxy
  }

  /** PING through `proxy` on a new connection: how long it took, or the error. */
  const pingThrough = (proxy: NetworkProxy, timeoutMillis = 3000) =>
    timed(() => redisCommand(proxy.listenPort, ["PING"], timeoutMillis))

  it("starts each instance behind its own proxy to Redis", async () => {
    expect(cluster.instances.map((instance) => instance.name)).toEqual(["i0", "i1"])
    for (const instance of cluster.instances) {
      expect(instance.args).toContain(`--state=redis://127.0.0.1:${proxyOf(instance.name).listenPort}`)
      expect(await instance.readyz()).toBe(200)
    }
  })

  it("net-latency: replies through the instance's proxy are delayed until healed", async () => {
    const { detail, target, heal } = await inject(netLatency, cluster)
    const latency = Number(detail["latency.latency"])
    expect(latency).toBeGreaterThanOrEqual(100)
    const slow = await pingThrough(proxyOf(target))
    expect(slow.millis).toBeGreaterThan(latency * 0.75)
    await heal()
    expect((await pingThrough(proxyOf(target))).millis).toBeLessThan(Math.max(50, latency / 2))
  })

  it("net-stall: nothing comes back through the proxy until healed; then held bytes arrive, dropped ones close", async () => {
    for (const [seed, mode] of [
      [1, "hold"],
      [5, "drop"]
    ] as const) {
      const { detail, target, heal } = await inject(netStall, cluster, seed)
      expect(detail.mode).toBe(mode)
      const stalled = redisCommand(proxyOf(target).listenPort, ["PING"], 8000).then(
        (reply) => String(reply),
        (error: Error) => error.message
      )
      const early = await Promise.race([stalled, sleep(700).then(() => "nothing yet")])
      expect(early).toBe("nothing yet")
      await heal()
      expect(await stalled).toMatch(mode === "hold" ? /^PONG$/ : /connection closed/)
      expect((await pingThrough(proxyOf(target))).value).toBe("PONG")
    }
  }, 30_000)

  it("net-reset: connections through the proxy are reset until healed", async () => {
    const { detail, target, heal } = await inject(netReset, cluster)
    const { value: error, millis } = await timed(() =>
      redisCommand(proxyOf(target).listenPort, ["BLPOP", "never-pushed", 5], 6000).then(
        () => new Error("answered"),
        (error: Error) => error
      )
    )
    expect(error.message).toMatch(/closed|ECONNRESET/)
    expect(millis).toBeLessThan(Number(detail["reset.timeout"]) + 2000)
    await heal()
    expect((await pingThrough(proxyOf(target))).value).toBe("PONG")
  })

  it("net-slow: a reply of rate KB takes about a second through the proxy until healed", async () => {
    const { detail, target, heal } = await inject(netSlow, cluster)
    const rate = Number(detail["slow-down.rate"])
    await cluster.redis.command(["SET", "net-slow", "x".repeat(rate * 1024)])
    const slow = await timed(() => redisCommand(proxyOf(target).listenPort, ["GET", "net-slow"], 10_000))
    expect(slow.millis).toBeGreaterThan(600)
    await heal()
    const fast = await timed(() => redisCommand(proxyOf(target).listenPort, ["GET", "net-slow"]))
    expect(fast.millis).toBeLessThan(300)
  })

  it("net-cut: the cut instance's /readyz answers 503, the other's 200; 200 again once healed", async () => {
    const { target, heal } = await inject(netCut, cluster)
    const cut = instanceNamed(cluster, target)
    const other = cluster.instances.find((instance) => instance !== cut)!
    await readyzBecomes(cut, 503)
    expect(await other.readyz()).toBe(200)
    await heal()
    await readyzBecomes(cut, 200)
  }, 60_000)

  it("redis-kill: Redis is down until healed, then back from its AOF with what was written", async () => {
    await cluster.redis.command(["SET", "durable", "yes"])
    const { detail, heal } = await inject(redisKill, cluster)
    expect(detail).toMatchObject({ signal: "SIGKILL", persistence: "aof-everysec" })
    expect(cluster.redis.running()).toBe(false)
    await expect(redisCommand(cluster.redis.port, ["PING"], 500)).rejects.toThrow()
    await heal()
    expect(await redisText(cluster.redis.port, ["GET", "durable"])).toBe("yes")
  })

  it("redis-flushall: every key is gone", async () => {
    await cluster.redis.command(["SET", "flushed", "yes"])
    const { heal } = await inject(redisFlushall, cluster)
    expect(await cluster.redis.command(["DBSIZE"])).toBe(0)
    await heal()
  })

  it("redis-rewind: what was written after the checkpoint is lost; AOF works again afterwards", async () => {
    await cluster.redis.command(["SET", "before-checkpoint", "yes"])
    let acknowledged = 0
    let writing = true
    const writer = (async () => {
      while (writing) {
        try {
          acknowledged = Number(await redisCommand(cluster.redis.port, ["INCR", "counter"], 1000))
        } catch {
          // Redis is down: the writes after the kill are not acknowledged.
        }
        await sleep(20)
      }
    })()
    await sleep(300)
    const { detail, heal } = await inject(redisRewind, cluster)
    writing = false
    await writer
    expect(Number(detail.checkpointEnd)).toBeGreaterThanOrEqual(Number(detail.checkpointStart))
    await heal()
    const counter = Number(await redisText(cluster.redis.port, ["GET", "counter"]))
    expect(counter).toBeGreaterThan(0)
    expect(counter).toBeLessThan(acknowledged - 50)
    expect(await redisText(cluster.redis.port, ["GET", "before-checkpoint"])).toBe("yes")
    await cluster.redis.command(["SET", "after-rewind", "yes"])
    await cluster.redis.kill()
    await cluster.redis.start()
    expect(await redisText(cluster.redis.port, ["GET", "after-rewind"])).toBe("yes")
    expect(Number(await redisText(cluster.redis.port, ["GET", "counter"]))).toBe(counter)
  }, 30_000)

  it("every instance is ready again once the faults have healed", async () => {
    for (const instance of cluster.instances) await readyzBecomes(instance, 200, 30_000)
  }, 60_000)
})

describe("faults on a Redis Cluster of 3 primaries and 3 replicas", () => {
  let cluster: RedisClusterRunCluster

  beforeAll(async () => {
    cluster = await startRedisCluster({ dir: join(runDir, "redis-cluster"), instances: 2, nodeTimeoutMillis: 1000 })
    const view = await cluster.redisCluster.waitHealthy()
    const primaries = view.nodes.filter((node) => node.primary)
    const seeded = new Set<string>()
    for (let tag = 0; seeded.size < primaries.length; tag++) {
      const owner = view.ownerOf(keySlot(`{tag${tag}}`))
      if (seeded.has(owner)) continue
      seeded.add(owner)
      const port = cluster.redisCluster.nodeById(owner).port
      for (let i = 0; i < 10; i++) await redisCommand(port, ["SET", `{tag${tag}}:k${i}`, String(i)])
    }
  }, 90_000)

  afterAll(async () => {
    await cluster?.stopAll()
  })

  const roleOf = async (port: number) => infoFields(await redisText(port, ["INFO", "replication"])).get("role")

  const expectAllOk = async () => {
    for (const node of cluster.redisCluster.nodes.filter((candidate) => candidate.running())) {
      expect(infoFields(await redisText(node.port, ["CLUSTER", "INFO"])).get("cluster_state")).toBe("ok")
    }
  }

  it("computes the same slots as CLUSTER KEYSLOT", async () => {
    const port = cluster.redisCluster.nodes[0]!.port
    for (const key of ["", "a", "robustness:{cluster-1}:m", "{}x", "{a}b{c}", "ünï"]) {
      expect(keySlot(key)).toBe(await redisCommand(port, ["CLUSTER", "KEYSLOT", key]))
    }
  })

  it("cluster-slot-migration: the slot belongs to the other primary, with its keys", async () => {
    const { detail, heal } = await inject(clusterSlotMigration, cluster)
    const slot = Number(detail.slot)
    const from = cluster.redisCluster.nodes.find((node) => node.name === detail.from)!
    const to = cluster.redisCluster.nodes.find((node) => node.name === detail.to)!
    expect(Number(detail.keys)).toBeGreaterThan(0)
    expect((await cluster.redisCluster.waitHealthy()).ownerOf(slot)).toBe(to.id())
    expect(await redisCommand(to.port, ["CLUSTER", "COUNTKEYSINSLOT", slot])).toBe(Number(detail.keys))
    expect(await redisCommand(from.port, ["CLUSTER", "COUNTKEYSINSLOT", slot])).toBe(0)
    await heal()
  }, 30_000)

  it("cluster-failover: the old primary is a replica of the new one, cluster_state ok", async () => {
    const { detail, heal } = await inject(clusterFailover, cluster)
    const from = cluster.redisCluster.nodes.find((node) => node.name === detail.from)!
    const to = cluster.redisCluster.nodes.find((node) => node.name === detail.to)!
    expect(await roleOf(from.port)).toBe("slave")
    expect(await roleOf(to.port)).toBe("master")
    expect((await cluster.redisCluster.waitHealthy()).ownerOf(Number(detail.slot))).toBe(to.id())
    await expectAllOk()
    await heal()
  }, 30_000)

  it("cluster-primary-kill: a replica takes over; healed, the killed node is back as a replica", async () => {
    const { detail, target, heal } = await inject(clusterPrimaryKill, cluster)
    const victim = cluster.redisCluster.nodes.find((node) => node.name === target)!
    expect(victim.running()).toBe(false)
    const owner = (await cluster.redisCluster.waitHealthy()).ownerOf(Number(detail.slot))
    expect(owner).not.toBe(victim.id())
    await expectAllOk()
    await heal()
    expect(victim.running()).toBe(true)
    expect(await roleOf(victim.port)).toBe("slave")
    expect(infoFields(await redisText(victim.port, ["INFO", "replication"])).get("master_link_status")).toBe("up")
    await expectAllOk()
  }, 60_000)

  it("cluster-lagging-failover: what the old primary acknowledged while its replica lagged is lost", async () => {
    const key = "{lagging}:written-while-lagging"
    const slot = keySlot(key)
    await redisCommand((await cluster.redisCluster.primaryOf(slot)).port, ["SET", "{lagging}:before", "1"])
    await new Promise((resolve) => setTimeout(resolve, 200))
    const fault = clusterLaggingFailoverAt(async () => slot)
    const injecting = inject(fault, cluster)
    // write only once the replica is stopped (its process in state T), so it cannot have received the write
    await waitFor("a replica to be stopped", async () =>
      cluster.redisCluster.nodes.some((node) => {
        const pid = node.pid()
        return pid !== undefined && readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("T")
      })
        ? true
        : undefined
    )
    const primary = await waitFor("the primary to have cut its replica", async () => {
      const owner = (await cluster.redisCluster.topology()).find(
        (node) => node.primary && node.slots.some(([from, to]) => from <= slot && slot <= to)
      )
      if (owner === undefined) return undefined
      const node = cluster.redisCluster.nodeById(owner.id)
      const replicas = infoFields(await redisText(node.port, ["INFO", "replication"])).get("connected_slaves")
      return replicas === "0" ? node : undefined
    })
    expect(await redisCommand(primary.port, ["SET", key, "acknowledged"])).toBe("OK")
    const { detail, heal } = await injecting
    const promoted = await cluster.redisCluster.primaryOf(slot)
    expect(promoted.name).not.toBe(primary.name)
    expect(Number(detail.lagMillis)).toBeGreaterThanOrEqual(500)
    expect(await redisCommand(promoted.port, ["GET", key])).toBe(null)
    expect(String(await redisCommand(promoted.port, ["GET", "{lagging}:before"]))).toBe("1")
    await heal()
    await expectAllOk()
  }, 60_000)

  it("redis-flushall: every primary is empty", async () => {
    const { heal } = await inject(redisFlushall, cluster)
    const view = await cluster.redisCluster.waitHealthy()
    for (const node of view.nodes.filter((candidate) => candidate.primary)) {
      expect(await redisCommand(node.port, ["DBSIZE"])).toBe(0)
    }
    await heal()
  })

  it("every instance is ready once the faults have healed", async () => {
    for (const instance of cluster.instances) await readyzBecomes(instance, 200, 30_000)
  }, 60_000)
})
