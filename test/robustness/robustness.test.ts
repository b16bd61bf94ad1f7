/**
 * The short robustness run inside `npm test`: the main scenarios for a few
 * seconds each, with fixed seeds, every validator over each history (the
 * long run is `npm run robustness -- --minutes N`). A failed run keeps its
 * folder, named in the failure, with the history and the servers' logs.
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { runScenario } from "./run.ts"
import { scenarioByName } from "./scenarios.ts"
import { buildGoNodes } from "./traffic/goNodes.ts"

const root = mkdtempSync(join(tmpdir(), "discovery-robustness-short-"))

const short = (name: string, seconds: number, seed: number) =>
  it(`${name}: ${seconds} s of traffic and faults, no violation`, { timeout: (seconds + 150) * 1000 }, async () => {
    const scenario = scenarioByName(name)!
    const report = await runScenario({
      scenario,
      seed,
      durationMillis: seconds * 1000,
      dir: join(root, `${name}-${seed}`),
      goNodesBinary: scenario.goNodes ? buildGoNodes(() => undefined) : undefined,
      log: () => undefined
    })
    const summary = report.violations
      .slice(0, 5)
      .map((violation) => `${violation.validator}: ${violation.message}`)
      .join("\n")
    assert.deepStrictEqual(report.violations.length, 0, `kept in ${report.dir}:\n${summary}`)
    assert.isAbove(report.counts["watch-msg"] ?? 0, 0, "watchers received messages")
  })

describe("robustness, short run", () => {
  short("redis", 25, 101)
  short("memory", 12, 102)
  short("redis-always", 12, 103)
  short("redis-cluster", 15, 104)
})
