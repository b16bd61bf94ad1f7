/**
 * The cores of a container's CPU quota, from cgroup v2 or v1 files.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { cpuQuotaCores } from "../../src/cli/cpuQuota.ts"

const root = (files: Record<string, string>): string => {
  const dir = mkdtempSync(join(tmpdir(), "cgroup-"))
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, ".."), { recursive: true })
    writeFileSync(join(dir, path), text)
  }
  return dir
}

describe("cpuQuotaCores", () => {
  it("reads cgroup v2's cpu.max and v1's quota and period; none without a quota", () => {
    assert.strictEqual(cpuQuotaCores(root({ "cpu.max": "200000 100000\n" })), 2)
    assert.strictEqual(cpuQuotaCores(root({ "cpu.max": "max 100000\n" })), undefined)
    assert.strictEqual(
      cpuQuotaCores(root({ "cpu/cpu.cfs_quota_us": "150000\n", "cpu/cpu.cfs_period_us": "100000\n" })),
      1.5
    )
    assert.strictEqual(
      cpuQuotaCores(root({ "cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n" })),
      undefined
    )
    assert.strictEqual(cpuQuotaCores(root({})), undefined)
  })
})
