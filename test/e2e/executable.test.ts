/**
 * The single executable (`npm run build:exe`), copied alone into an empty
 * folder and run with no Node on PATH: `--help` and `--version`, and a gRPC
 * round trip through I/O threads (whose code the executable carries) on a
 * shared Redis state. `.ci/run` also runs the black-box CLI tests
 * (`test/e2e/cli.test.ts`) against it.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { copyFile, mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { Duration, Effect } from "effect"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { GrpcClient } from "../../src/adapters/grpc/index.ts"
import { freePort, redisForTests } from "../adapters/redis/redisServer.ts"

const run = promisify(execFile)
const root = resolve(import.meta.dirname, "../..")
const redis = redisForTests()

let scratch: string
let executable: string
/** An environment whose PATH holds no Node (an empty folder). */
let noNode: NodeJS.ProcessEnv
const children: Array<ChildProcess> = []

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "discovery-exe-"))
  // as `npm run build:exe` does it
  await run(process.execPath, [join(root, "scripts/buildExe.ts"), join(scratch, "build")], { cwd: root })
  const built = join(scratch, "build", "discovery-service")
  const alone = join(scratch, "alone")
  await run("mkdir", [alone, join(scratch, "empty")])
  executable = join(alone, "discovery-service")
  await copyFile(built, executable)
  await run("chmod", ["755", executable])
  await rm(join(scratch, "build"), { recursive: true, force: true })
  noNode = { HOME: scratch, PATH: join(scratch, "empty") }
}, 120_000)

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true })
})

describe("the single executable", { timeout: 60_000 }, () => {
  it("prints its version and its flags with no Node on PATH", async () => {
    const version = await run(executable, ["--version"], { env: noNode, cwd: scratch })
    assert.strictEqual(version.stdout.trim(), "discovery-service v0.1.0")
    const help = await run(executable, ["--help"], { env: noNode, cwd: scratch })
    for (const flag of ["--addr", "--io-threads", "--state", "--log-level"]) assert.include(help.stdout, flag)
  })

  it("is what the Containerfile copies, and its command there gets ready", async () => {
    const containerfile = await readFile(join(root, "deploy/Containerfile"), "utf8")
    const instruction = (name: string) =>
      containerfile
        .split("\n")
        .find((line) => line.startsWith(`${name} `))
        ?.slice(name.length + 1) ?? ""
    const [source, target] = instruction("COPY").split(" ")
    assert.strictEqual(source, "build/discovery-service", "what npm run build:exe writes")
    assert.deepStrictEqual(JSON.parse(instruction("ENTRYPOINT")), [target])
    const command = JSON.parse(instruction("CMD")) as Array<string>
    const exposed = instruction("EXPOSE").split(" ")
    const ports = new Map<string, number>()
    for (const port of exposed) ports.set(port, await freePort())
    const args = command.map((arg) =>
      arg
        .replace(/^(--[a-z-]*addr)=:(\d+)$/, (_, flag: string, port: string) => {
          assert.include(exposed, port, `${flag} listens on an exposed port`)
          return `${flag}=127.0.0.1:${ports.get(port)}`
        })
        .replace(/^--snapshot-path=.*$/, `--snapshot-path=${join(scratch, "container.binpb")}`)
    )
    const child = spawn(executable, args, { env: noNode, cwd: scratch, stdio: "ignore" })
    children.push(child)
    let status = 0
    for (let i = 0; i < 200 && status !== 200; i++) {
      await new Promise((r) => setTimeout(r, 50))
      status = await fetch(`http://127.0.0.1:${ports.get("2122")}/readyz`).then(
        (response) => response.status,
        () => 0
      )
    }
    assert.strictEqual(status, 200)
    child.kill("SIGTERM")
  })

  it("serves a gRPC round trip through its I/O threads on a Redis state", async () => {
    const [port, metricsPort] = [await freePort(), await freePort()]
    const child = spawn(
      executable,
      [
        `--addr=127.0.0.1:${port}`,
        `--metrics-addr=127.0.0.1:${metricsPort}`,
        "--landing-addr=",
        "--io-threads=2",
        `--state=${redis.server.url}`,
        "--state-key-prefix=exe:"
      ],
      { env: noNode, cwd: scratch, stdio: "ignore" }
    )
    children.push(child)
    let metrics = ""
    for (let i = 0; i < 200 && !/^discovery_io_threads 2$/m.test(metrics); i++) {
      await new Promise((r) => setTimeout(r, 50))
      metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then(
        (response) => response.text(),
        () => ""
      )
    }
    assert.match(metrics, /^discovery_io_threads 2$/m, "its I/O thread runs")
    assert.match(metrics, /^discovery_state_backend_available 1$/m)
    const round = Effect.gen(function* () {
      const listed: Array<ReadonlyArray<string>> = []
      // several connections, so that both threads serve some
      for (let i = 0; i < 6; i++) {
        const api = yield* GrpcClient.make({
          endpoint: `127.0.0.1:${port}`,
          tls: false,
          channelOptions: { "grpc.use_local_subchannel_pool": 1 }
        })
        yield* api.affiliateUpdate({
          clusterId: "exe",
          affiliateId: `node-${i}`,
          data: Uint8Array.of(i),
          endpoints: [],
          ttl: Duration.minutes(1)
        })
        listed.push((yield* api.list({ clusterId: "exe" })).map((affiliate) => affiliate.id))
      }
      return listed
    }).pipe(Effect.scoped)
    const listed = await Effect.runPromise(round)
    assert.deepStrictEqual([...listed.at(-1)!].sort(), ["node-0", "node-1", "node-2", "node-3", "node-4", "node-5"])
    child.kill("SIGTERM")
  })
})
