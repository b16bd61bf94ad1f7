/**
 * A real `redis-server` for tests: started on a free loopback port in a
 * temporary folder, without persistence, and stopped (by PID) when done.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { afterAll, beforeAll } from "@effect/vitest"
import { mkdtempSync, rmSync } from "node:fs"
import * as net from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** A running Redis started by a test. */
export interface RedisServer {
  readonly port: number
  readonly url: string
  readonly process: ChildProcess
  /** Stops the server (SIGKILL with `kill`, else SIGTERM) and waits for it to exit. */
  readonly stop: (kill?: boolean) => Promise<void>
  /** Starts it again on the same port and folder (after `stop`). */
  readonly restart: () => Promise<RedisServer>
}

/** A port that was free a moment ago. */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })

const answers = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect(port, "127.0.0.1")
    socket.once("connect", () => socket.write("PING\r\n"))
    socket.once("data", (data) => {
      socket.destroy()
      resolve(data.toString().startsWith("+PONG"))
    })
    socket.once("error", () => resolve(false))
  })

const launch = async (port: number, dir: string, extra: ReadonlyArray<string>): Promise<RedisServer> => {
  const child = spawn(
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no", ...extra],
    { stdio: "ignore" }
  )
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()))
  for (let i = 0; i < 200 && !(await answers(port)); i++) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  const stop = async (kill = false) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(kill ? "SIGKILL" : "SIGTERM")
    await exited
  }
  return { port, url: `redis://127.0.0.1:${port}`, process: child, stop, restart: () => launch(port, dir, extra) }
}

/** Starts a Redis server; `extra` flags go to `redis-server`. */
export const startRedis = async (
  extra: ReadonlyArray<string> = []
): Promise<RedisServer & { cleanup(): Promise<void> }> => {
  const dir = mkdtempSync(join(tmpdir(), "discovery-redis-"))
  const server = await launch(await freePort(), dir, extra)
  return {
    ...server,
    cleanup: async () => {
      await server.stop()
      rmSync(dir, { recursive: true, force: true })
    }
  }
}

/** A port below 55536 that is free, with its cluster-bus port (10000 above) free too. */
const freeClusterPort = async (): Promise<number> => {
  const taken = (port: number) =>
    new Promise<boolean>((resolve) => {
      const server = net.createServer()
      server.once("error", () => resolve(true))
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(false)))
    })
  for (;;) {
    const port = 20000 + Math.floor(Math.random() * 30000)
    if (!(await taken(port)) && !(await taken(port + 10000))) return port
  }
}

/** A Redis Cluster of `primaries` primaries (no replicas), created with `redis-cli --cluster create`. */
export const startRedisCluster = async (
  primaries = 3
): Promise<{ readonly url: string; readonly nodes: ReadonlyArray<RedisServer>; cleanup(): Promise<void> }> => {
  const dirs: Array<string> = []
  const nodes: Array<RedisServer> = []
  for (let i = 0; i < primaries; i++) {
    const dir = mkdtempSync(join(tmpdir(), "discovery-redis-cluster-"))
    dirs.push(dir)
    nodes.push(
      await launch(await freeClusterPort(), dir, ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"])
    )
  }
  const addresses = nodes.map((node) => `127.0.0.1:${node.port}`)
  execFileSync("redis-cli", ["--cluster", "create", ...addresses, "--cluster-replicas", "0", "--cluster-yes"], {
    stdio: "ignore"
  })
  for (const node of nodes) {
    for (let i = 0; i < 200; i++) {
      const info = execFileSync("redis-cli", ["-p", String(node.port), "CLUSTER", "INFO"]).toString()
      if (info.includes("cluster_state:ok")) break
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  return {
    url: addresses.map((address, i) => (i === 0 ? `redis://${address}` : address)).join(","),
    nodes,
    cleanup: async () => {
      for (const node of nodes) await node.stop()
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
    }
  }
}

/**
 * Starts the stopped Redis of `holder` again on its port and folder, and puts
 * the new one in `holder.server`, so that it is stopped after the tests as
 * the first one would have been.
 */
export const restartHeld = async (holder: {
  server: RedisServer & { cleanup(): Promise<void> }
}): Promise<RedisServer> => {
  const original = holder.server
  const restarted = await original.restart()
  holder.server = Object.assign(restarted, {
    cleanup: async () => {
      await restarted.stop()
      await original.cleanup()
    }
  })
  return restarted
}

/**
 * A Redis server for the tests of the file (or describe block) this is called
 * in: started before them and stopped after. `server` is the one running now;
 * a test that restarts Redis (`restartHeld`) puts the new one there, so it is
 * stopped too.
 */
export const redisForTests = (extra: ReadonlyArray<string> = []) => {
  const holder: { server: RedisServer & { cleanup(): Promise<void> } } = { server: undefined as never }
  beforeAll(async () => {
    holder.server = await startRedis(extra)
  }, 30_000)
  afterAll(async () => {
    await holder.server?.cleanup()
  })
  return holder
}

/** A Redis Cluster of `primaries` primaries for the tests of the file (or describe block) this is called in. */
export const redisClusterForTests = (primaries = 3) => {
  const holder: { cluster: Awaited<ReturnType<typeof startRedisCluster>> } = { cluster: undefined as never }
  beforeAll(async () => {
    holder.cluster = await startRedisCluster(primaries)
  }, 60_000)
  afterAll(async () => {
    await holder.cluster?.cleanup()
  })
  return holder
}
