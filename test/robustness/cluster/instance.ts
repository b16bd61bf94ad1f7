/**
 * One service instance: the `discovery-service` command (`node
 * src/cli/main.ts`) on gRPC and metrics ports fixed for the run (landing page
 * off), its stdout and stderr appended to `<name>.log` in the run folder.
 * It can be killed with -9, stopped and continued (SIGSTOP/SIGCONT),
 * terminated, and restarted with the same ports, flags and environment
 * (a clock offset included); a start is complete once the instance logs
 * "discovery service listening".
 */
import { closeSync, existsSync, openSync, readFileSync, statSync } from "node:fs"
import { join, resolve } from "node:path"
import { faketimeEnv } from "./faketime.ts"
import { reservePort } from "./ports.ts"
import { type TrackedProcess, spawnTracked } from "./processes.ts"
import { waitFor } from "./wait.ts"

const root = resolve(import.meta.dirname, "../../..")

/** How to start an instance. */
export interface InstanceOptions {
  /** "i0", "i1", … */
  readonly name: string
  /** The run folder: the log goes to `<dir>/<name>.log`. */
  readonly dir: string
  /** Backend and extra flags in `--name=value` form; one naming a default flag replaces it. */
  readonly flags: ReadonlyArray<string>
  /** Offset of its wall clock from the real one (libfaketime), in milliseconds. */
  readonly clockOffsetMillis?: number
}

/** What the last start's "discovery service listening" line showed. */
export interface StartRecord {
  /** The line's timestamp (the instance's clock), epoch milliseconds. */
  readonly loggedAt: number
  /** When the harness read it (the real clock), epoch milliseconds. */
  readonly seenAt: number
}

/** A service instance of the run. */
export interface Instance {
  readonly name: string
  readonly port: number
  readonly metricsPort: number
  /** The gRPC address, `127.0.0.1:<port>`. */
  readonly address: string
  readonly logFile: string
  readonly clockOffsetMillis: number
  /** The command line after `node`. */
  readonly args: ReadonlyArray<string>
  readonly pid: () => number | undefined
  /** `stopped` after SIGSTOP until SIGCONT; `exited` after kill or terminate. */
  readonly state: () => "running" | "stopped" | "exited"
  readonly lastStart: () => StartRecord
  /** kill -9 by PID; resolves once it has exited. */
  readonly kill: () => Promise<void>
  /** SIGSTOP. */
  readonly stop: () => void
  /** SIGCONT. */
  readonly cont: () => void
  /** kill -9 if it still runs, then starts it again and waits until it listens. */
  readonly restart: () => Promise<void>
  /** SIGTERM (kill -9 after `graceMillis`, default 10 s); resolves once it has exited. */
  readonly terminate: (graceMillis?: number) => Promise<void>
  /** The status of `GET /readyz` on its metrics port, or null when it does not answer within `timeoutMillis` (default 1 s). */
  readonly readyz: (timeoutMillis?: number) => Promise<number | null>
}

const flagName = (flag: string): string => flag.split("=")[0] ?? flag

const mergeFlags = (defaults: ReadonlyArray<string>, extra: ReadonlyArray<string>): ReadonlyArray<string> => {
  const overridden = new Set(extra.map(flagName))
  return [...defaults.filter((flag) => !overridden.has(flagName(flag))), ...extra]
}

const listeningLine = (logFile: string, from: number): StartRecord | undefined => {
  const text = readFileSync(logFile).subarray(from).toString("utf8")
  for (const line of text.split("\n")) {
    if (!line.includes('"discovery service listening"')) continue
    const entry = JSON.parse(line) as { readonly timestamp: string }
    return { loggedAt: Date.parse(entry.timestamp), seenAt: Date.now() }
  }
  return undefined
}

const tail = (logFile: string, from: number): string =>
  readFileSync(logFile).subarray(from).toString("utf8").split("\n").slice(-20).join("\n")

/** Starts an instance on newly reserved ports and waits until it listens. */
export const startInstance = async (options: InstanceOptions): Promise<Instance> => {
  const [port, metricsPort] = [await reservePort(), await reservePort()]
  const logFile = join(options.dir, `${options.name}.log`)
  const clockOffsetMillis = options.clockOffsetMillis ?? 0
  const args = [
    "src/cli/main.ts",
    ...mergeFlags(
      [
        `--addr=127.0.0.1:${port}`,
        "--landing-addr=",
        `--metrics-addr=127.0.0.1:${metricsPort}`,
        "--rate-limit-rps=0",
        "--gc-interval=1s"
      ],
      options.flags
    )
  ]
  const env = { ...process.env, ...(clockOffsetMillis === 0 ? {} : faketimeEnv(clockOffsetMillis)) }
  let server: TrackedProcess | undefined
  let stopped = false
  let started: StartRecord | undefined

  const launch = async () => {
    const from = existsSync(logFile) ? statSync(logFile).size : 0
    const log = openSync(logFile, "a")
    const child = spawnTracked(options.name, process.execPath, args, { cwd: root, env, stdio: ["ignore", log, log] })
    closeSync(log)
    server = child
    stopped = false
    started = await waitFor(
      `${options.name} to listen`,
      async () => {
        if (!child.running()) {
          throw new Error(`${options.name} exited (${await child.exited}):\n${tail(logFile, from)}`)
        }
        return listeningLine(logFile, from)
      },
      { timeoutMillis: 60_000, intervalMillis: 25 }
    ).catch(async (error: unknown) => {
      await child.kill()
      throw error
    })
  }

  const kill = async () => {
    await server?.kill()
  }

  await launch()
  return {
    name: options.name,
    port,
    metricsPort,
    address: `127.0.0.1:${port}`,
    logFile,
    clockOffsetMillis,
    args,
    pid: () => (server?.running() ? server.pid : undefined),
    state: () => (!server?.running() ? "exited" : stopped ? "stopped" : "running"),
    lastStart: () => {
      if (started === undefined) throw new Error(`${options.name} has not started`)
      return started
    },
    kill,
    stop: () => {
      server?.signal("SIGSTOP")
      stopped = true
    },
    cont: () => {
      server?.signal("SIGCONT")
      stopped = false
    },
    restart: async () => {
      await kill()
      await launch()
    },
    terminate: async (graceMillis = 10_000) => {
      await server?.terminate(graceMillis)
    },
    readyz: async (timeoutMillis = 1000) => {
      try {
        const response = await fetch(`http://127.0.0.1:${metricsPort}/readyz`, {
          signal: AbortSignal.timeout(timeoutMillis)
        })
        await response.body?.cancel()
        return response.status
      } catch {
        return null
      }
    }
  }
}
