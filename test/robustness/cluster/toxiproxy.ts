/**
 * A toxiproxy server of the run and its HTTP API: one proxy per service
 * instance between that instance and Redis, so a network fault hits one
 * instance's link only. Toxics make a link slow (`latency`, `bandwidth`),
 * stall it (`timeout` with timeout 0 drops everything until removed), reset
 * it (`reset_peer`) or delay its close (`slow_close`); disabling a proxy
 * cuts the link (connections closed, new ones refused).
 */
import { closeSync, openSync } from "node:fs"
import { reservePort } from "./ports.ts"
import { type TrackedProcess, spawnTracked } from "./processes.ts"
import { waitFor } from "./wait.ts"

/** The kinds of toxic the faults use. */
export type ToxicType = "latency" | "timeout" | "reset_peer" | "bandwidth" | "slow_close"

/** A toxic on one direction of a proxy: `downstream` is Redis → instance, `upstream` instance → Redis. */
export interface Toxic {
  /** Unique on its proxy. */
  readonly name: string
  readonly type: ToxicType
  readonly stream: "upstream" | "downstream"
  /** Share of connections it applies to, 0 to 1 (default 1). */
  readonly toxicity?: number
  /**
   * The toxic's settings, in toxiproxy's names: `latency`/`jitter` (ms),
   * `timeout` (ms, 0 = forever), `rate` (KB/s), `delay` (ms).
   */
  readonly attributes: Readonly<Record<string, number>>
}

/** One proxy: listens on a fixed loopback port and forwards to an upstream port. */
export interface NetworkProxy {
  readonly name: string
  readonly listenPort: number
  readonly upstreamPort: number
  readonly addToxic: (toxic: Toxic) => Promise<void>
  readonly removeToxic: (name: string) => Promise<void>
  /** The toxics on it now. */
  readonly toxics: () => Promise<ReadonlyArray<Toxic>>
  /** Disabled: existing connections are closed and new ones refused. */
  readonly setEnabled: (enabled: boolean) => Promise<void>
}

/** A running toxiproxy server. */
export interface Toxiproxy {
  readonly apiPort: number
  readonly process: TrackedProcess
  /** Creates a proxy from `127.0.0.1:<listenPort>` to `127.0.0.1:<upstreamPort>`. */
  readonly createProxy: (name: string, listenPort: number, upstreamPort: number) => Promise<NetworkProxy>
  /** Enables every proxy and removes every toxic. */
  readonly reset: () => Promise<void>
  /** kill -9 by PID. */
  readonly stop: () => Promise<void>
}

/** Starts the server built by `buildToxiproxy` on a reserved port, logging to `logFile`. */
export const startToxiproxy = async (binary: string, logFile: string): Promise<Toxiproxy> => {
  const apiPort = await reservePort()
  const log = openSync(logFile, "a")
  const server = spawnTracked("toxiproxy", binary, ["-host", "127.0.0.1", "-port", String(apiPort)], {
    stdio: ["ignore", log, log]
  })
  closeSync(log)
  const api = async (method: string, path: string, body?: unknown): Promise<unknown> => {
    const response = await fetch(`http://127.0.0.1:${apiPort}${path}`, {
      method,
      headers: { "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(5000)
    })
    const text = await response.text()
    if (!response.ok) throw new Error(`toxiproxy ${method} ${path}: ${response.status} ${text}`)
    if (text === "") return undefined
    try {
      return JSON.parse(text) as unknown
    } catch {
      return text
    }
  }
  try {
    await waitFor("toxiproxy's API", async () => {
      if (!server.running()) throw new Error(`toxiproxy exited: ${await server.exited}`)
      return (await api("GET", "/version")) ?? true
    })
  } catch (error) {
    await server.kill()
    throw error
  }

  const createProxy = async (name: string, listenPort: number, upstreamPort: number): Promise<NetworkProxy> => {
    await api("POST", "/proxies", {
      name,
      listen: `127.0.0.1:${listenPort}`,
      upstream: `127.0.0.1:${upstreamPort}`,
      enabled: true
    })
    const path = `/proxies/${encodeURIComponent(name)}`
    return {
      name,
      listenPort,
      upstreamPort,
      addToxic: async (toxic) => {
        await api("POST", `${path}/toxics`, { toxicity: 1, ...toxic })
      },
      removeToxic: async (toxicName) => {
        await api("DELETE", `${path}/toxics/${encodeURIComponent(toxicName)}`)
      },
      toxics: async () => (await api("GET", `${path}/toxics`)) as ReadonlyArray<Toxic>,
      setEnabled: async (enabled) => {
        await api("POST", path, { enabled })
      }
    }
  }

  return {
    apiPort,
    process: server,
    createProxy,
    reset: async () => {
      await api("POST", "/reset")
    },
    stop: server.kill
  }
}
