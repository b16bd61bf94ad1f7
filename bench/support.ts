/**
 * Processes, files and formatting for `npm run bench`: every child is tracked
 * and killed when the run ends, whatever the reason; every wait is bounded.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { once } from "node:events"
import { closeSync, openSync, readFileSync, readSync, statSync } from "node:fs"
import { cpus, release, totalmem } from "node:os"
import { resolve } from "node:path"

/** A free TCP port on 127.0.0.1 (the interop tests' helper). */
export { freePort } from "../test/interop/support/processes.ts"

export const root = resolve(import.meta.dirname, "..")
export const binDir = resolve(root, ".go-cache/bench")
export const goModule = resolve(root, "test/interop/go")

const children = new Set<ChildProcess>()

/** Kills every child still running (SIGKILL), by its own pid. */
export const killAll = (): void => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
  }
  children.clear()
}

process.on("exit", killAll)
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(signal, () => {
    killAll()
    process.exit(130)
  })
}

/** Starts a tracked child. */
export const track = (child: ChildProcess): ChildProcess => {
  children.add(child)
  child.on("exit", () => children.delete(child))
  return child
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** Now, in ms since the epoch with sub-millisecond precision. */
export const epochMs = (): number => performance.timeOrigin + performance.now()

/** Waits for a child to exit, at most `ms`; true when it did. */
export const exited = async (child: ChildProcess, ms: number): Promise<boolean> => {
  if (child.exitCode !== null || child.signalCode !== null) return true
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<false>((r) => {
    timer = setTimeout(() => r(false), ms)
  })
  const done = once(child, "exit").then(() => true as const)
  const result = await Promise.race([done, timeout])
  clearTimeout(timer)
  return result
}

/** Sends `signal`, then SIGKILL if the child is still there after `ms`. */
export const stop = async (child: ChildProcess, signal: NodeJS.Signals, ms: number): Promise<boolean> => {
  if (child.exitCode !== null || child.signalCode !== null) return true
  child.kill(signal)
  if (await exited(child, ms)) return true
  child.kill("SIGKILL")
  await exited(child, 5000)
  return false
}

/** Runs a command to completion (bounded), returning stdout; throws with stderr on failure. */
export const run = async (
  command: string,
  args: ReadonlyArray<string>,
  timeoutMs: number,
  cwd: string = root
): Promise<string> => {
  const child = track(spawn(command, args, { cwd, stdio: ["ignore", "pipe", "pipe"] }))
  let stdout = ""
  let stderr = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const finished = await exited(child, timeoutMs)
  if (!finished) {
    child.kill("SIGKILL")
    await exited(child, 5000)
    throw new Error(`${command} ${args.join(" ")} did not finish in ${timeoutMs} ms\n${stderr}`)
  }
  if (child.exitCode !== 0) throw new Error(`${command} ${args.join(" ")} failed (${child.exitCode})\n${stderr}`)
  return stdout
}

/** VmRSS and VmHWM of a process in bytes, from /proc/PID/status. */
export const memory = (pid: number): { readonly rss: number; readonly hwm: number } => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8")
  const field = (name: string) =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN) * 1024
  return { rss: field("VmRSS"), hwm: field("VmHWM") }
}

/** The bytes of a file from `offset` on, as text (at most `limit` bytes). */
export const readFrom = (path: string, offset: number, limit = 64 * 1024 * 1024): string => {
  const size = statSync(path).size
  const length = Math.min(size - offset, limit)
  if (length <= 0) return ""
  const buffer = Buffer.alloc(length)
  const fd = openSync(path, "r")
  try {
    readSync(fd, buffer, 0, length, offset)
  } finally {
    closeSync(fd)
  }
  return buffer.toString("utf8")
}

export const fileSize = (path: string): number => {
  try {
    return statSync(path).size
  } catch {
    return 0
  }
}

const tryRun = (command: string, args: ReadonlyArray<string>): string => {
  try {
    return execFileSync(command, args, { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim()
  } catch {
    return "unknown"
  }
}

/** The machine and the versions the figures were taken with. */
export const machine = () => {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8")
  const model = /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1] ?? cpus()[0]?.model ?? "unknown"
  const status = tryRun("git", ["status", "--porcelain", "--untracked-files=no"])
  return {
    cpuModel: model,
    cores: cpus().length,
    memoryBytes: totalmem(),
    kernel: release(),
    node: process.version,
    go: tryRun("go", ["version"]),
    commit: tryRun("git", ["rev-parse", "HEAD"]),
    uncommittedChanges: status !== "" && status !== "unknown"
  }
}

/** A number for the table: 3 significant digits, thousands separated. */
export const figure = (value: number | undefined): string => {
  if (value === undefined || !Number.isFinite(value)) return "–"
  const abs = Math.abs(value)
  if (abs >= 1000) return Math.round(value).toLocaleString("en-US")
  if (abs >= 100) return value.toFixed(0)
  if (abs >= 10) return value.toFixed(1)
  if (abs >= 1) return value.toFixed(2)
  return value.toPrecision(2)
}

/** A plain text table with aligned columns. */
export const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ")
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n")
}

/** The value of `--name value` or `--name=value` among this process's arguments, if given. */
export const option = (name: string, argv: ReadonlyArray<string> = process.argv.slice(2)): string | undefined => {
  const index = argv.findIndex((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  if (index === -1) return undefined
  const arg = argv[index]!
  return arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : argv[index + 1]
}
