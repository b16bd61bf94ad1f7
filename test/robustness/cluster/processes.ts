/**
 * Child processes of a robustness run, tracked by PID. Every process the
 * cluster starts goes through `spawnTracked`, so that signals go to the PID
 * it was started with (and never to one the system reused after it exited),
 * and so that whatever is still running when the harness's process exits
 * (normally, by an uncaught error, by SIGINT or SIGTERM) is killed with -9.
 * A harness killed with -9 itself cannot do that: its children stay behind.
 */
import { type ChildProcess, type SpawnOptions, spawn } from "node:child_process"

/** A started child process. */
export interface TrackedProcess {
  /** What it is, for messages ("redis", "i0", "toxiproxy"). */
  readonly name: string
  readonly pid: number
  readonly child: ChildProcess
  /** Resolves once it has exited, with its exit code or the signal that ended it. */
  readonly exited: Promise<string>
  /** Whether it has not exited yet (a stopped process is still running). */
  readonly running: () => boolean
  /** Sends `signal` to its PID if it is still running. */
  readonly signal: (signal: NodeJS.Signals) => void
  /** kill -9 by PID, then waits until it has exited. */
  readonly kill: () => Promise<void>
  /** SIGTERM (and SIGCONT, in case it is stopped), then kill -9 if it has not exited after `graceMillis`. */
  readonly terminate: (graceMillis?: number) => Promise<void>
}

const live = new Set<TrackedProcess>()
let hooked = false

/** kill -9 of every tracked process still running; synchronous, so it can run in an exit handler. */
export const killAllTracked = (): void => {
  for (const tracked of live) tracked.signal("SIGKILL")
}

const onSignal = (signal: NodeJS.Signals) => {
  killAllTracked()
  process.removeListener(signal, onSignal)
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal)
}

const hookExit = () => {
  if (hooked) return
  hooked = true
  process.once("exit", killAllTracked)
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)
}

/** Starts `command` and tracks it until it exits; throws if it could not be started. */
export const spawnTracked = (
  name: string,
  command: string,
  args: ReadonlyArray<string>,
  options: SpawnOptions
): TrackedProcess => {
  hookExit()
  const child = spawn(command, args, options)
  if (child.pid === undefined) throw new Error(`could not start ${name} (${command})`)
  const pid = child.pid
  let done = false
  const exited = new Promise<string>((resolve) => {
    child.once("exit", (code, signal) => {
      done = true
      live.delete(tracked)
      resolve(signal ?? `exit code ${code}`)
    })
  })
  child.on("error", () => undefined)
  const signal = (sig: NodeJS.Signals) => {
    if (done) return
    try {
      process.kill(pid, sig)
    } catch {
      // It exited between the check and the signal.
    }
  }
  const tracked: TrackedProcess = {
    name,
    pid,
    child,
    exited,
    running: () => !done,
    signal,
    kill: async () => {
      signal("SIGKILL")
      await exited
    },
    terminate: async (graceMillis = 5000) => {
      signal("SIGTERM")
      signal("SIGCONT")
      const timer = setTimeout(() => signal("SIGKILL"), graceMillis)
      await exited
      clearTimeout(timer)
    }
  }
  live.add(tracked)
  return tracked
}
