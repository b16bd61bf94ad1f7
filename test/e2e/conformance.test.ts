/**
 * `discovery-service conformance` against the command itself, as a user runs
 * it: over plaintext gRPC on loopback, with `--json`. Our server (memory and
 * Redis) holds every case it can be judged on over the wire, announces our
 * extensions, and nothing fails; a server started with a redirect endpoint
 * the check was not told of fails its Hello case, with what came, and the
 * command exits 1.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { afterAll, assert, describe, it } from "@effect/vitest"
import type { PropertyResult } from "../../src/conformance/properties.ts"
import type { CaseResult } from "../../src/conformance/runner.ts"
import { redisForTests } from "../adapters/redis/redisServer.ts"
import { listening } from "./listening.ts"

const root = resolve(import.meta.dirname, "../..")
const run = promisify(execFile)

const started: Array<ChildProcess> = []

/** Starts the service on a free loopback port without rate limiting (the check makes over a thousand calls). */
const startService = async (extra: ReadonlyArray<string>): Promise<number> => {
  const child = spawn(
    process.execPath,
    [
      "src/cli/main.ts",
      "--addr=127.0.0.1:0",
      "--landing-addr=",
      "--metrics-addr=",
      "--snapshots-enabled=false",
      "--rate-limit-rps=0",
      ...extra
    ],
    { cwd: root, stdio: ["ignore", "pipe", "pipe"] }
  )
  started.push(child)
  return (await listening(child)).ports.port!
}

interface Report {
  readonly target: string
  readonly extensions: boolean
  readonly summary: { passed: number; failed: number; skipped: number; differs: number; holds: boolean }
  readonly results: ReadonlyArray<CaseResult>
  readonly properties: ReadonlyArray<PropertyResult>
}

/** Runs the check; gives its exit code and its report. */
const conformance = async (port: number, extra: ReadonlyArray<string> = []) => {
  const args = ["src/cli/main.ts", "conformance", `127.0.0.1:${port}`, "--json", ...extra]
  try {
    const { stdout } = await run(process.execPath, args, { cwd: root, maxBuffer: 16 * 1024 * 1024 })
    return { code: 0, report: JSON.parse(stdout) as Report }
  } catch (error) {
    const failed = error as { code: number; stdout: string }
    return { code: failed.code, report: JSON.parse(failed.stdout) as Report }
  }
}

afterAll(async () => {
  await Promise.all(
    started.map(async (child) => {
      if (child.exitCode !== null) return
      child.kill("SIGTERM")
      await once(child, "exit")
    })
  )
})

describe("discovery-service conformance", () => {
  const redis = redisForTests()

  for (const state of ["memory", "redis"] as const) {
    it(`finds our server (${state}) holding every case it can check over the wire`, async () => {
      const port = await startService(state === "memory" ? [] : [`--state=${redis.server.url}`])
      const { code, report } = await conformance(port)
      assert.strictEqual(code, 0, JSON.stringify(report.results.filter((result) => result.status === "failed")))
      assert.isTrue(report.extensions)
      assert.strictEqual(report.summary.failed, 0)
      assert.strictEqual(report.summary.differs, 0)
      assert.isAtLeast(report.summary.passed, 28)
      assert.deepStrictEqual(
        report.properties.map((property) => [property.status, property.runs]),
        [["passed", 30]]
      )
      // what cannot be checked over the wire says why
      for (const skipped of report.results.filter((result) => result.status === "skipped")) {
        assert.match(
          skipped.reason ?? "",
          /no time control|cannot count clusters|small-caps|slow-watcher|UTF-8 wire|32-event|real-time expiry not asked for|cannot stop this server/
        )
      }
    }, 120_000)
  }

  it("runs the real-time expiry cases when told how soon the server collects, and they hold", async () => {
    const port = await startService(["--gc-interval=1s"])
    const { code, report } = await conformance(port, ["--only", "real time", "--expiry-within", "2s"])
    assert.strictEqual(code, 0, JSON.stringify(report.results))
    assert.deepStrictEqual(
      report.results.map((result) => result.status),
      ["passed", "passed"]
    )
    const untold = await conformance(port, ["--only", "real time"])
    assert.deepStrictEqual(
      untold.report.results.map((result) => [result.status, result.reason]),
      report.results.map(() => [
        "skipped",
        "real-time expiry not asked for (it needs the server's GC interval: --expiry-within)"
      ])
    )
  }, 90_000)

  it("runs the shutdown case last with --stop-command, and the server it stopped is gone", async () => {
    const port = await startService([])
    const server = started.at(-1)!
    const exited = once(server, "exit")
    const { code, report } = await conformance(port, [
      "--only",
      "shutdown",
      "--stop-command",
      `kill -TERM ${server.pid}`
    ])
    assert.strictEqual(code, 0, JSON.stringify(report.results))
    assert.deepStrictEqual(
      report.results.map((result) => [result.group, result.status]),
      [["shutdown", "passed"]]
    )
    const [exitCode] = (await exited) as [number | null]
    assert.strictEqual(exitCode, 0)
  }, 60_000)

  it("replays a saved sequence, and nothing else", async () => {
    const port = await startService([])
    const script = join(mkdtempSync(join(tmpdir(), "discovery-replay-")), "script.json")
    writeFileSync(
      script,
      JSON.stringify({
        property: "saved by hand",
        seed: 1,
        steps: [
          { op: "watch", cluster: 0 },
          { op: "update", cluster: 0, affiliate: 1, data: 2, endpoints: [3, 3, 4] },
          { op: "update", cluster: 0, affiliate: 1, endpoints: [4, 5] },
          { op: "delete", cluster: 0, affiliate: 1 },
          { op: "disconnect", watch: 0 },
          { op: "list", cluster: 0 }
        ]
      })
    )
    const { code, report } = await conformance(port, ["--replay", script])
    assert.strictEqual(code, 0)
    assert.deepStrictEqual(report.results, [])
    assert.deepStrictEqual(
      report.properties.map((property) => [property.name, property.status]),
      [["saved by hand (replayed)", "passed"]]
    )
  }, 60_000)

  it("exits 2 when it cannot run: nothing selected, a server that does not answer, an unreadable script", async () => {
    const port = await startService([])
    const nothing = await conformance(port, ["--only", "no such case"])
    assert.strictEqual(nothing.code, 2)
    assert.include((nothing.report as unknown as { error: string }).error, "selects no case and no property")
    const closed = await conformance(1, [])
    assert.strictEqual(closed.code, 2)
    assert.include((closed.report as unknown as { error: string }).error, "cannot reach 127.0.0.1:1")
    const script = join(mkdtempSync(join(tmpdir(), "discovery-replay-")), "script.json")
    writeFileSync(script, JSON.stringify({ steps: [{ op: "reboot" }] }))
    const unreadable = await conformance(port, ["--replay", script])
    assert.strictEqual(unreadable.code, 2)
    assert.include((unreadable.report as unknown as { error: string }).error, "is not a saved sequence")
  }, 60_000)

  it("exits 130, not 0, when interrupted in the middle of a check", async () => {
    // rate limited as by default: the limit cases take a minute, time enough to interrupt it
    const child = spawn(
      process.execPath,
      ["src/cli/main.ts", "--addr=127.0.0.1:0", "--landing-addr=", "--metrics-addr=", "--snapshots-enabled=false"],
      {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"]
      }
    )
    started.push(child)
    const port = (await listening(child)).ports.port!
    const check = spawn(process.execPath, ["src/cli/main.ts", "conformance", `127.0.0.1:${port}`, "--only", "limits"], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let output = ""
    check.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString()
    })
    for (let i = 0; i < 100 && !output.includes("checking"); i++) await new Promise((r) => setTimeout(r, 50))
    await new Promise((r) => setTimeout(r, 500))
    check.kill("SIGINT")
    const [code] = (await once(check, "exit")) as [number | null]
    assert.strictEqual(code, 130)
  }, 60_000)

  it("fails a server whose Hello carries a redirect it was not told of, saying what came, and exits 1", async () => {
    const port = await startService(["--redirect-endpoint=elsewhere.example:443"])
    const { code, report } = await conformance(port, ["--only", "Hello"])
    assert.strictEqual(code, 1)
    const failed = report.results.filter((result) => result.status === "failed")
    assert.deepStrictEqual(
      failed.map((result) => result.name),
      ["T40 hello carries no redirect when none is configured"]
    )
    assert.strictEqual(failed[0]!.actual, "elsewhere.example:443")
    const told = await conformance(port, ["--only", "Hello", "--redirect", "elsewhere.example:443"])
    assert.strictEqual(told.code, 0)
  }, 60_000)
})
