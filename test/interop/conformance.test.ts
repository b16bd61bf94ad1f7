/**
 * `discovery-service conformance` against the original Go service (v1.1.0
 * from the module proxy): it announces no extensions, so it is judged on the
 * original protocol; every case about original behaviour holds, and the
 * cases of our deliberate improvements are reported as differing from the
 * original by design, never as passes. The Go service limits each client IP
 * to 15 requests per second, so the check takes a minute or two.
 */
import { execFile } from "node:child_process"
import { resolve } from "node:path"
import { promisify } from "node:util"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import type { PropertyResult } from "../../src/conformance/properties.ts"
import type { CaseResult } from "../../src/conformance/runner.ts"
import { buildGoBinaries } from "./support/goBuild.ts"
import { type ServerProcess, startGoServer } from "./support/processes.ts"

const root = resolve(import.meta.dirname, "../..")
let server: ServerProcess | undefined

beforeAll(async () => {
  server = await startGoServer(buildGoBinaries().discoveryService, { gcInterval: "1s" })
}, 600_000)

afterAll(async () => {
  await server?.stop()
})

describe("discovery-service conformance against the original", () => {
  it("holds every case of the original protocol and reports our improvements as differences", async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        "src/cli/main.ts",
        "conformance",
        server!.address,
        "--json",
        "--runs",
        "10",
        "--seed",
        "2611",
        "--expiry-within",
        "2s"
      ],
      { cwd: root, maxBuffer: 16 * 1024 * 1024 }
    )
    const report = JSON.parse(stdout) as {
      readonly extensions: boolean
      readonly summary: { readonly passed: number; readonly failed: number; readonly differs: number }
      readonly results: ReadonlyArray<CaseResult>
      readonly properties: ReadonlyArray<PropertyResult>
    }
    console.info(`the original: ${JSON.stringify(report.summary)}`)
    for (const result of report.results) console.info(`${result.status} ${result.group} › ${result.name}`)
    assert.isFalse(report.extensions)
    assert.deepStrictEqual(
      report.results.filter((result) => result.status === "failed"),
      []
    )
    assert.isAtLeast(report.summary.passed, 27)
    // its GC runs every second: the real-time expiry cases run and hold; it has no resumable watches
    for (const result of report.results) {
      if (result.group === "expiry in real time (slower)") assert.strictEqual(result.status, "passed", result.name)
      if (result.group === "extensions: resumable watches") assert.strictEqual(result.status, "skipped", result.name)
    }
    assert.deepStrictEqual(
      report.properties.map((property) => [property.status, property.runs]),
      [["passed", 10]]
    )
    const differing = report.results.filter((result) => result.status === "differs")
    assert.isAbove(differing.length, 0)
    for (const result of differing) {
      assert.include(result.name, "(improvement:")
      assert.match(result.reason ?? "", /^differs from the original by design \(Q\d+\)$/)
    }
  }, 600_000)
})
