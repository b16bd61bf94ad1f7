/**
 * Child processes of the interop tests: the original Go server on a free
 * loopback port, and our server (the `discovery-service` command) the same way.
 * Every process is killed when the test file ends.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { createServer } from "node:net"
import { resolve } from "node:path"
import { createInterface } from "node:readline"

const root = resolve(import.meta.dirname, "../../..")
const children = new Set<ChildProcess>()

process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL")
})

/** A free TCP port on 127.0.0.1 (free when asked; the caller binds it soon after). */
export const freePort = async (): Promise<number> => {
  const server = createServer()
  server.listen(0, "127.0.0.1")
  await once(server, "listening")
  const address = server.address()
  server.close()
  if (address === null || typeof address === "string") throw new Error("no port")
  return address.port
}

/** A running server process and its gRPC address. */
export interface ServerProcess {
  readonly address: string
  readonly child: ChildProcess
  readonly output: Array<string>
  readonly stop: () => Promise<void>
}

const track = (child: ChildProcess, output: Array<string>) => {
  children.add(child)
  child.on("exit", () => children.delete(child))
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream }).on("line", (line) => output.push(line))
  }
}

const stopper = (child: ChildProcess) => async () => {
  if (child.exitCode !== null || child.signalCode !== null) return
  child.kill("SIGTERM")
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000)
  await once(child, "exit")
  clearTimeout(timer)
}

const waitFor = async (output: Array<string>, child: ChildProcess, pattern: string, what: string) => {
  const deadline = Date.now() + 20_000
  while (!output.some((line) => line.includes(pattern))) {
    if (child.exitCode !== null) throw new Error(`${what} exited: ${output.join("\n")}`)
    if (Date.now() > deadline) throw new Error(`${what} did not start: ${output.join("\n")}`)
    await new Promise((r) => setTimeout(r, 25))
  }
}

/** How a test server is started; the Go service always trusts X-Real-IP. */
export interface ServerOptions {
  readonly gcInterval?: string
  readonly redirect?: string
  readonly port?: number
  readonly trustXRealIp?: boolean
  /** Serve /metrics on this loopback port (default: off). */
  readonly metricsPort?: number
  /** Load and save snapshots at this path (default: off). */
  readonly snapshotPath?: string
  /** More flags for our server, after the others. */
  readonly extraFlags?: ReadonlyArray<string>
}

/** Starts the original Go service; snapshots, metrics and the landing page are off unless asked for. */
export const startGoServer = async (binary: string, options: ServerOptions = {}): Promise<ServerProcess> => {
  const port = options.port ?? (await freePort())
  const args = [
    `-addr=127.0.0.1:${port}`,
    "-landing-addr=",
    `-metrics-addr=${options.metricsPort ? `127.0.0.1:${options.metricsPort}` : ""}`,
    ...(options.snapshotPath ? [`-snapshot-path=${options.snapshotPath}`] : ["-snapshots-enabled=false"]),
    `-gc-interval=${options.gcInterval ?? "1s"}`,
    ...(options.redirect ? [`-redirect-endpoint=${options.redirect}`] : [])
  ]
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] })
  const output: Array<string> = []
  track(child, output)
  await waitFor(output, child, "API server starting", "Go discovery-service")
  return { address: `127.0.0.1:${port}`, child, output, stop: stopper(child) }
}

/** Starts our `discovery-service` command (Node 24, TypeScript sources). */
export const startOurServer = async (options: ServerOptions = {}): Promise<ServerProcess> => {
  const port = options.port ?? (await freePort())
  const args = [
    "src/cli/main.ts",
    `--addr=127.0.0.1:${port}`,
    "--landing-addr=",
    `--metrics-addr=${options.metricsPort ? `127.0.0.1:${options.metricsPort}` : ""}`,
    ...(options.snapshotPath ? [`--snapshot-path=${options.snapshotPath}`] : ["--snapshots-enabled=false"]),
    `--gc-interval=${options.gcInterval ?? "1s"}`,
    ...(options.redirect ? [`--redirect-endpoint=${options.redirect}`] : []),
    ...(options.trustXRealIp ? ["--trust-x-real-ip"] : []),
    ...(options.extraFlags ?? [])
  ]
  const child = spawn(process.execPath, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
  const output: Array<string> = []
  track(child, output)
  await waitFor(output, child, "discovery service listening", "our discovery-service")
  return { address: `127.0.0.1:${port}`, child, output, stop: stopper(child) }
}
