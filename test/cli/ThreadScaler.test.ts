/**
 * When `--io-threads auto` adds and removes worker threads: only after the
 * main thread stayed busy for several seconds while a core was idle, never
 * past the most, never twice without a pause, and back once the process is
 * quiet for long enough.
 */
import { assert, describe, it } from "@effect/vitest"
import { type ScalerDecision, type ScalerSample, ThreadScaler } from "../../src/cli/ThreadScaler.ts"

const busy: ScalerSample = { mainUtilization: 0.95, processCores: 1, idleCores: 1.5 }
/** Busy still, the added thread doing more work beside it. */
const busierWithThread: ScalerSample = { mainUtilization: 0.95, processCores: 1.6, idleCores: 1.2 }
const busyNoSpareCore: ScalerSample = { mainUtilization: 0.97, processCores: 1, idleCores: 0.3 }
const moderate: ScalerSample = { mainUtilization: 0.5, processCores: 0.5, idleCores: 1.5 }
const quiet: ScalerSample = { mainUtilization: 0.05, processCores: 0.05, idleCores: 1.9 }

/** The decisions for `samples` in turn, the workers following them. */
const run = (scaler: ThreadScaler, samples: ReadonlyArray<ScalerSample>, workers = 0) => {
  const decisions: Array<ScalerDecision> = []
  for (const sample of samples) {
    const decision = scaler.decide(sample, workers)
    if (decision === "add") workers++
    if (decision === "remove") workers--
    decisions.push(decision)
  }
  return { decisions, workers }
}

const times = (sample: ScalerSample, n: number) => Array.from({ length: n }, () => sample)

describe("ThreadScaler", () => {
  it("adds a thread after three busy seconds with a core to spare, then waits for the load to settle", () => {
    const scaler = new ThreadScaler({ maxWorkers: 3 })
    const { decisions, workers } = run(scaler, [...times(busy, 3), ...times(busierWithThread, 13)])
    assert.deepStrictEqual(decisions.slice(0, 3), ["hold", "hold", "add"])
    assert.deepStrictEqual(
      decisions.slice(3, 13),
      Array.from({ length: 10 }, () => "hold")
    )
    assert.strictEqual(decisions[15], "add", "busy again after the pause: one more")
    assert.strictEqual(workers, 2)
  })

  it("adds none while the host has no core to spare, or the main thread is not busy enough, or none is left", () => {
    assert.notInclude(run(new ThreadScaler({ maxWorkers: 3 }), times(busyNoSpareCore, 30)).decisions, "add")
    assert.notInclude(run(new ThreadScaler({ maxWorkers: 3 }), times(moderate, 30)).decisions, "add")
    assert.strictEqual(
      run(new ThreadScaler({ maxWorkers: 1 }), [...times(busy, 3), ...times(busierWithThread, 60)]).workers,
      1
    )
    assert.strictEqual(run(new ThreadScaler({ maxWorkers: 0 }), times(busy, 60)).workers, 0)
  })

  it("takes a thread that brought no more work done away again, and tries none for ten minutes", () => {
    const scaler = new ThreadScaler({ maxWorkers: 3 })
    const { decisions, workers } = run(scaler, times(busy, 700))
    assert.strictEqual(decisions.indexOf("add"), 2)
    assert.strictEqual(decisions.indexOf("remove"), 13, "judged on the first second after the pause")
    assert.strictEqual(decisions.lastIndexOf("add"), 613, "tried again once the ten minutes passed")
    assert.strictEqual(decisions.lastIndexOf("remove"), 624, "and taken away again")
    assert.strictEqual(workers, 0)
  })

  it("needs busy seconds in a row", () => {
    const samples = [busy, busy, moderate, busy, busy, moderate, busy, busy]
    assert.notInclude(run(new ThreadScaler({ maxWorkers: 3 }), samples).decisions, "add")
  })

  it("removes a thread once the process stayed quiet for a minute, and none when there is none", () => {
    const scaler = new ThreadScaler({ maxWorkers: 3 })
    const { decisions, workers } = run(scaler, [...times(quiet, 59), moderate, ...times(quiet, 60)], 2)
    assert.strictEqual(decisions.indexOf("remove"), 119)
    assert.strictEqual(workers, 1)
    assert.notInclude(run(new ThreadScaler({ maxWorkers: 3 }), times(quiet, 200), 0).decisions, "remove")
  })
})
