import { spawn } from "node:child_process"
import { existsSync, readFileSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { decode } from "../../src/core/server/SnapshotCodec.ts"
import { crashStateBytes } from "./fixtures/crashStates.ts"
import { tempDir } from "./fixtures/snapshots.ts"

const writer = resolve(import.meta.dirname, "fixtures", "crashWriter.ts")
const stateA = crashStateBytes("A")
const stateB = crashStateBytes("B")
const runs = 50
const parallel = 5

/** A small deterministic PRNG (mulberry32), so the kill delays are the same on every run. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

const { dir, remove } = tempDir()
afterAll(remove)

interface Outcome {
  readonly state: "A" | "B" | "other"
  readonly leftTemporary: boolean
}

/** Starts the writer on a file holding A, kills it with SIGKILL `delay` ms after its first save, and reads the file. */
const crashOnce = (run: number, delay: number): Promise<Outcome> =>
  new Promise((done, fail) => {
    const path = join(dir, `run-${run}.binpb`)
    writeFileSync(path, stateA)
    const child = spawn(process.execPath, [writer, path], { stdio: ["ignore", "pipe", "inherit"] })
    let timer: NodeJS.Timeout | undefined
    child.stdout.on("data", (chunk: Buffer) => {
      if (timer === undefined && chunk.toString().includes("ready")) {
        timer = setTimeout(() => child.kill("SIGKILL"), delay)
      }
    })
    child.on("error", fail)
    child.on("exit", (_code, signal) => {
      if (signal !== "SIGKILL") return fail(new Error(`writer of run ${run} exited on its own`))
      const bytes = new Uint8Array(readFileSync(path))
      const same = (other: Uint8Array) => Buffer.compare(bytes, other) === 0
      done({ state: same(stateA) ? "A" : same(stateB) ? "B" : "other", leftTemporary: existsSync(`${path}.tmp`) })
    })
  })

describe("FileSnapshotStore crash safety", () => {
  it(`leaves exactly state A or state B after each of ${runs} kill -9 during saves`, { timeout: 60_000 }, async () => {
    const next = random(20240131)
    const delays = Array.from({ length: runs }, () => Math.floor(next() * 80))
    const outcomes: Array<Outcome> = []
    for (let start = 0; start < runs; start += parallel) {
      const batch = delays.slice(start, start + parallel).map((delay, i) => crashOnce(start + i, delay))
      outcomes.push(...(await Promise.all(batch)))
    }
    assert.deepStrictEqual(
      outcomes.filter((o) => o.state === "other"),
      []
    )
    // Both states show up, so kills landed at different points of the loop.
    assert.isTrue(outcomes.some((o) => o.state === "A"))
    assert.isTrue(outcomes.some((o) => o.state === "B"))
    // Every file also decodes cleanly.
    for (const bytes of [stateA, stateB]) assert.deepStrictEqual(decode(bytes, 0).skipped, [])
    console.info(
      `crash test: ${outcomes.filter((o) => o.state === "A").length} × A, ` +
        `${outcomes.filter((o) => o.state === "B").length} × B, ` +
        `${outcomes.filter((o) => o.leftTemporary).length} killed with a temporary file in place`
    )
  })
})
