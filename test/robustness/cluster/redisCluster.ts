/**
 * The Redis Cluster of the `redis-cluster` shape: six `redis-server` nodes
 * (3 primaries, 3 replicas) created with `redis-cli --cluster create`, with a
 * short `cluster-node-timeout` so that a failover takes seconds. Nodes keep
 * no data files (a restarted node rejoins from its `nodes.conf` and syncs
 * from its primary). The operations wait until every running node reports
 * `cluster_state:ok`, agrees on who owns every slot, and every running
 * replica is linked to its primary.
 */
import { execFile } from "node:child_process"
import { join } from "node:path"
import { promisify } from "node:util"
import { keySlot, slotCount } from "./keySlot.ts"
import { pick } from "./random.ts"
import { launchRedis } from "./redisProcess.ts"
import type { TrackedProcess } from "./processes.ts"
import { reservePort } from "./ports.ts"
import { infoFields, redisCommand, redisText } from "./resp.ts"
import { waitFor } from "./wait.ts"

const execFileAsync = promisify(execFile)

/** A cluster node's bus port is its port plus this. */
const busOffset = 10_000

/** One node of the cluster, known by the name the harness gave it ("r0" … "r5"). */
export interface ClusterNode {
  readonly name: string
  readonly port: number
  /** `127.0.0.1:<port>`. */
  readonly address: string
  readonly dir: string
  /** Its cluster node ID (fixed at creation, kept across restarts in `nodes.conf`). */
  readonly id: () => string
  readonly running: () => boolean
  readonly pid: () => number | undefined
  /** Starts it again from its folder; resolves once it answers PING. */
  readonly start: () => Promise<void>
  /** kill -9 by PID; resolves once it has exited. */
  readonly kill: () => Promise<void>
}

/** A node as CLUSTER NODES describes it. */
export interface NodeView {
  readonly id: string
  readonly port: number
  readonly flags: ReadonlyArray<string>
  readonly primary: boolean
  /** For a replica: the ID of its primary. */
  readonly primaryId: string | undefined
  /** Flagged `fail` or `fail?` by the node that was asked. */
  readonly failing: boolean
  /** Slot ranges it owns (migration markers left out). */
  readonly slots: ReadonlyArray<readonly [number, number]>
}

/** What every running node agreed on at one moment. */
export interface ClusterView {
  readonly nodes: ReadonlyArray<NodeView>
  /** The ID of the primary owning `slot`. */
  readonly ownerOf: (slot: number) => string
}

/** The cluster's shape and timing. */
export interface RedisClusterOptions {
  /** Its folder; each node gets `r<n>/` in it. */
  readonly dir: string
  /** `cluster-node-timeout` in milliseconds (default 1000). */
  readonly nodeTimeoutMillis?: number
}

/** What a slot migration did. */
export interface SlotMigration {
  readonly slot: number
  readonly from: ClusterNode
  readonly to: ClusterNode
  /** Keys moved with MIGRATE. */
  readonly keys: number
  readonly millis: number
}

/** A running Redis Cluster of 3 primaries and 3 replicas. */
export interface RedisCluster {
  readonly nodes: ReadonlyArray<ClusterNode>
  /** The seed list for `--state` with `--state-cluster`: `redis://127.0.0.1:<p0>,127.0.0.1:<p1>,…` (all six). */
  readonly url: string
  /** The node with this cluster ID. */
  readonly nodeById: (id: string) => ClusterNode
  /** CLUSTER NODES of the first running node. */
  readonly topology: () => Promise<ReadonlyArray<NodeView>>
  /** Waits until the running nodes agree and are healthy (see the module comment); resolves with what they agree on. */
  readonly waitHealthy: (timeoutMillis?: number) => Promise<ClusterView>
  /** The slot of a random key held by a random primary, or a random slot when that primary holds none. */
  readonly randomSlot: (random: () => number) => Promise<number>
  /** The running primary owning `slot`. */
  readonly primaryOf: (slot: number) => Promise<ClusterNode>
  /** kill -9 of the primary of `slot` (which must have a running replica); does not wait for the failover. */
  readonly killPrimary: (slot: number) => Promise<ClusterNode>
  /** Waits until a replica of the killed `primary` owns `slot` and the cluster is healthy again. */
  readonly waitPromoted: (slot: number, primary: ClusterNode) => Promise<ClusterNode>
  /** Starts a killed node again and waits until it has rejoined as a replica, linked to its primary. */
  readonly restartNode: (node: ClusterNode) => Promise<void>
  /** CLUSTER FAILOVER on a running replica of the primary of `slot`; waits until the roles have swapped. */
  readonly failover: (
    slot: number,
    random: () => number
  ) => Promise<{ readonly promoted: ClusterNode; readonly demoted: ClusterNode }>
  /**
   * Moves `slot` from its primary to `to` (default: another primary chosen
   * with `random`) while clients keep using it: IMPORTING/MIGRATING, MIGRATE
   * of its keys in batches of 100, then SETSLOT NODE on every primary.
   */
  readonly migrateSlot: (slot: number, random: () => number, to?: ClusterNode) => Promise<SlotMigration>
  /** kill -9 of every node; the folders stay. */
  readonly stop: () => Promise<void>
}

const parseNodes = (text: string): ReadonlyArray<NodeView> =>
  text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => {
      const [id = "", address = "", flagText = "", primaryId = "-", , , , , ...slotFields] = line.trim().split(" ")
      const flags = flagText.split(",")
      const slots = slotFields
        .filter((field) => !field.startsWith("["))
        .map((field) => {
          const [low = "", high = low] = field.split("-")
          return [Number(low), Number(high)] as const
        })
      return {
        id,
        port: Number(address.split("@")[0]?.split(":")[1]),
        flags,
        primary: flags.includes("master"),
        primaryId: primaryId === "-" ? undefined : primaryId,
        failing: flags.includes("fail") || flags.includes("fail?"),
        slots
      }
    })

const ownerMap = (nodes: ReadonlyArray<NodeView>): string =>
  nodes
    .filter((node) => node.primary && node.slots.length > 0)
    .map((node) => `${node.id}:${node.slots.map(([low, high]) => `${low}-${high}`).join(",")}`)
    .sort()
    .join(" ")

const nodeFlags = (nodeTimeoutMillis: number): ReadonlyArray<string> => [
  "--cluster-enabled",
  "yes",
  "--cluster-config-file",
  "nodes.conf",
  "--cluster-node-timeout",
  String(nodeTimeoutMillis),
  "--cluster-replica-validity-factor",
  "0",
  "--save",
  "",
  "--appendonly",
  "no"
]

const makeNode = async (name: string, dir: string, flags: ReadonlyArray<string>): Promise<ClusterNode> => {
  const port = await reservePort(busOffset)
  let server: TrackedProcess | undefined
  let id = ""
  const node: ClusterNode = {
    name,
    port,
    address: `127.0.0.1:${port}`,
    dir,
    id: () => id,
    running: () => server?.running() ?? false,
    pid: () => (server?.running() ? server.pid : undefined),
    start: async () => {
      if (server?.running()) throw new Error(`${name} is already running`)
      server = await launchRedis(name, port, dir, flags)
      id = await redisText(port, ["CLUSTER", "MYID"])
    },
    kill: async () => {
      await server?.kill()
    }
  }
  return node
}

/** Creates the cluster in `options.dir` and waits until it is healthy. */
export const createRedisCluster = async (options: RedisClusterOptions): Promise<RedisCluster> => {
  const flags = nodeFlags(options.nodeTimeoutMillis ?? 1000)
  const nodes: Array<ClusterNode> = []
  for (let i = 0; i < 6; i++) nodes.push(await makeNode(`r${i}`, join(options.dir, `r${i}`), flags))
  const stop = async () => {
    await Promise.all(nodes.map((node) => node.kill()))
  }
  const running = () => nodes.filter((node) => node.running())
  const nodeById = (id: string): ClusterNode => {
    const node = nodes.find((candidate) => candidate.id() === id)
    if (node === undefined) throw new Error(`no node with ID ${id}`)
    return node
  }
  const topologyOf = async (node: ClusterNode) => parseNodes(await redisText(node.port, ["CLUSTER", "NODES"]))
  const topology = () => {
    const [first] = running()
    if (first === undefined) throw new Error("no node is running")
    return topologyOf(first)
  }

  /** What the running nodes agree on now; throws, saying why, when they do not agree or are not healthy. */
  const agreedView = async (): Promise<ClusterView> => {
    let agreed: ReadonlyArray<NodeView> | undefined
    for (const node of running()) {
      const info = infoFields(await redisText(node.port, ["CLUSTER", "INFO"]))
      if (info.get("cluster_state") !== "ok")
        throw new Error(`${node.name}: cluster_state ${info.get("cluster_state")}`)
      const view = await topologyOf(node)
      for (const other of view) {
        if (other.failing && nodeById(other.id).running()) {
          throw new Error(`${node.name} still flags running ${nodeById(other.id).name} as ${other.flags.join(",")}`)
        }
      }
      if (agreed !== undefined && ownerMap(view) !== ownerMap(agreed)) {
        throw new Error(`${node.name} disagrees about slot owners`)
      }
      const me = view.find((entry) => entry.flags.includes("myself"))
      if (me !== undefined && !me.primary) {
        const replication = infoFields(await redisText(node.port, ["INFO", "replication"]))
        if (replication.get("master_link_status") !== "up") throw new Error(`${node.name}: replica link down`)
      }
      agreed = view
    }
    if (agreed === undefined) throw new Error("no node is running")
    const owners = new Array<string>(slotCount).fill("")
    for (const node of agreed) for (const [low, high] of node.slots) owners.fill(node.id, low, high + 1)
    return { nodes: agreed, ownerOf: (slot) => owners[slot] ?? "" }
  }

  const waitHealthy = (timeoutMillis = 30_000) =>
    waitFor("the Redis Cluster to be healthy", agreedView, { timeoutMillis, intervalMillis: 100 })

  const primaryOf = async (slot: number) => nodeById((await waitHealthy()).ownerOf(slot))

  const runningReplicasOf = (view: ClusterView, primary: ClusterNode) =>
    view.nodes
      .filter((node) => node.primaryId === primary.id() && nodeById(node.id).running())
      .map((node) => nodeById(node.id))

  try {
    for (const result of await Promise.allSettled(nodes.map((node) => node.start()))) {
      if (result.status === "rejected") throw result.reason
    }
    await execFileAsync(
      "redis-cli",
      ["--cluster", "create", ...nodes.map((node) => node.address), "--cluster-replicas", "1", "--cluster-yes"],
      { timeout: 60_000 }
    )
    await waitFor(
      "every node to know all six",
      async () => ((await Promise.all(nodes.map(topologyOf))).every((view) => view.length === 6) ? true : undefined),
      { intervalMillis: 100 }
    )
    await waitHealthy(60_000)
  } catch (error) {
    await stop()
    throw error
  }

  return {
    nodes,
    url: `redis://${nodes.map((node) => node.address).join(",")}`,
    nodeById,
    topology,
    waitHealthy,
    randomSlot: async (random) => {
      const view = await waitHealthy()
      const primaries = view.nodes.filter((node) => node.primary && node.slots.length > 0)
      const key = await redisCommand(pick(random, primaries).port, ["RANDOMKEY"])
      return Buffer.isBuffer(key) ? keySlot(key) : Math.floor(random() * slotCount)
    },
    primaryOf,
    killPrimary: async (slot) => {
      const view = await waitHealthy()
      const primary = nodeById(view.ownerOf(slot))
      if (runningReplicasOf(view, primary).length === 0) throw new Error(`${primary.name} has no running replica`)
      await primary.kill()
      return primary
    },
    waitPromoted: async (slot, primary) => {
      const view = await waitFor(
        `a replica of ${primary.name} to take over slot ${slot}`,
        async () => {
          const agreed = await agreedView()
          return agreed.ownerOf(slot) !== primary.id() ? agreed : undefined
        },
        { timeoutMillis: 60_000, intervalMillis: 100 }
      )
      return nodeById(view.ownerOf(slot))
    },
    restartNode: async (node) => {
      await node.start()
      await waitFor(
        `${node.name} to rejoin as a replica`,
        async () => {
          const view = await agreedView()
          const me = view.nodes.find((entry) => entry.id === node.id())
          return me !== undefined && !me.primary && me.primaryId !== undefined ? true : undefined
        },
        { timeoutMillis: 60_000, intervalMillis: 100 }
      )
    },
    failover: async (slot, random) => {
      const view = await waitHealthy()
      const demoted = nodeById(view.ownerOf(slot))
      const promoted = pick(random, runningReplicasOf(view, demoted))
      await redisCommand(promoted.port, ["CLUSTER", "FAILOVER"])
      await waitFor(
        `${promoted.name} to take over from ${demoted.name}`,
        async () => {
          const agreed = await agreedView()
          const old = agreed.nodes.find((entry) => entry.id === demoted.id())
          return agreed.ownerOf(slot) === promoted.id() && old?.primaryId === promoted.id() ? true : undefined
        },
        { timeoutMillis: 30_000, intervalMillis: 100 }
      )
      return { promoted, demoted }
    },
    migrateSlot: async (slot, random, to) => {
      const started = performance.now()
      const view = await waitHealthy()
      const from = nodeById(view.ownerOf(slot))
      const target =
        to ??
        nodeById(
          pick(
            random,
            view.nodes.filter((node) => node.primary && node.id !== from.id() && nodeById(node.id).running())
          ).id
        )
      await redisCommand(target.port, ["CLUSTER", "SETSLOT", slot, "IMPORTING", from.id()])
      await redisCommand(from.port, ["CLUSTER", "SETSLOT", slot, "MIGRATING", target.id()])
      let moved = 0
      for (;;) {
        const keys = await redisCommand(from.port, ["CLUSTER", "GETKEYSINSLOT", slot, 100])
        if (!Array.isArray(keys) || keys.length === 0) break
        await redisCommand(from.port, ["MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", ...keys], 10_000)
        moved += keys.length
      }
      const primaries = view.nodes
        .filter((node) => node.primary && nodeById(node.id).running())
        .map((node) => nodeById(node.id))
      const order = [target, from, ...primaries.filter((node) => node !== target && node !== from)]
      for (const node of order) await redisCommand(node.port, ["CLUSTER", "SETSLOT", slot, "NODE", target.id()])
      await waitFor(
        `slot ${slot} to be owned by ${target.name} everywhere`,
        async () => ((await agreedView()).ownerOf(slot) === target.id() ? true : undefined),
        { intervalMillis: 100 }
      )
      return { slot, from, to: target, keys: moved, millis: Math.round(performance.now() - started) }
    },
    stop
  }
}
