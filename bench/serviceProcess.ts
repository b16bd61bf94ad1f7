/**
 * Our service as the reliability scripts run it: `scripts/start.mjs` (the
 * bundle `npm start` runs) on a free loopback port, its log lines in a file
 * (so their bytes can be counted), stopped with SIGTERM or killed by PID.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process"
import { closeSync, openSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { freePort } from "../test/interop/support/processes.ts"
import { exited, root, sleep, track } from "./support.ts"

/** A running service. */
export interface Service {
  readonly child: ChildProcess
  readonly pid: number
  readonly port: number
  readonly metricsPort: number | undefined
  readonly logPath: string
  /** Bytes the service has logged so far. */
  readonly logBytes: () => number
  /** Resident memory now, in MiB (0 once the process is gone). */
  readonly rssMiB: () => number
  /** True while the process runs. */
  readonly alive: () => boolean
  /** SIGTERM, then SIGKILL after `ms`; gives the exit code (null when killed). */
  readonly stop: (ms?: number) => Promise<number | null>
}

/** Resident memory of `pid` in MiB, 0 when it is gone. */
export const rssMiB = (pid: number): number => {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))
    return match === null ? 0 : Number(match[1]) / 1024
  } catch {
    return 0
  }
}

let bundled = false

/** Builds the start-up bundle once per run, so no start pays for (or measures the memory of) building it. */
const ensureBundle = (): void => {
  if (bundled) return
  const built = spawnSync(process.execPath, ["scripts/bundle.ts"], { cwd: root, stdio: "inherit" })
  if (built.status !== 0) throw new Error("could not build the start-up bundle (node scripts/bundle.ts)")
  bundled = true
}

/**
 * Starts the service with `flags` (after the defaults: loopback port, no
 * landing page, no snapshots unless the flags say otherwise) and waits until
 * it logs that it listens.
 */
export const startService = async (
  dir: string,
  flags: ReadonlyArray<string> = [],
  options: { readonly metrics?: boolean; readonly name?: string } = {}
): Promise<Service> => {
  ensureBundle()
  const port = await freePort()
  const metricsPort = options.metrics ? await freePort() : undefined
  const logPath = join(dir, `${options.name ?? "service"}-${port}.log`)
  const log = openSync(logPath, "w")
  const args = [
    "scripts/start.mjs",
    `--addr=127.0.0.1:${port}`,
    "--landing-addr=",
    `--metrics-addr=${metricsPort === undefined ? "" : `127.0.0.1:${metricsPort}`}`,
    ...(flags.some((flag) => flag.startsWith("--snapshot-path")) ? [] : ["--snapshots-enabled=false"]),
    ...flags
  ]
  const child = track(spawn(process.execPath, args, { cwd: root, stdio: ["ignore", log, log] }))
  closeSync(log)
  const size = () => {
    try {
      return statSync(logPath).size
    } catch {
      return 0
    }
  }
  const deadline = Date.now() + 60_000
  while (!readFileSync(logPath, "utf8").includes("discovery service listening")) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the service exited while starting:\n${readFileSync(logPath, "utf8")}`)
    }
    if (Date.now() > deadline) throw new Error(`the service did not start:\n${readFileSync(logPath, "utf8")}`)
    await sleep(20)
  }
  const pid = child.pid!
  const alive = () => child.exitCode === null && child.signalCode === null
  return {
    child,
    pid,
    port,
    metricsPort,
    logPath,
    logBytes: size,
    rssMiB: () => rssMiB(pid),
    alive,
    stop: async (ms = 10_000) => {
      if (!alive()) return child.exitCode
      child.kill("SIGTERM")
      if (!(await exited(child, ms))) {
        child.kill("SIGKILL")
        await exited(child, 5000)
      }
      return child.exitCode
    }
  }
}

/** The value of an unlabelled counter on the service's /metrics, 0 when absent. */
export const counter = async (service: Service, name: string): Promise<number> => {
  if (service.metricsPort === undefined) throw new Error("the service was started without metrics")
  const text = await (await fetch(`http://127.0.0.1:${service.metricsPort}/metrics`)).text()
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`))
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(" ") + 1))
}
