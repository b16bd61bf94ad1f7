/**
 * Resumable watches on the memory backend, as a property (see
 * `fixtures/resumeProperty.ts`): random histories with watchers that
 * disconnect and resume at random points, with logs short enough that some
 * resumes must fall back to a snapshot.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import fc from "fast-check"
import { historyArb, type InstancesUnderTest, runResumeHistory } from "./fixtures/resumeProperty.ts"
import { inMemory } from "./fixtures/stateModel.ts"

const memory: InstancesUnderTest = (caps) =>
  Effect.map(inMemory(caps), ({ state, profile }) => ({
    states: [state],
    profile,
    exactLog: caps.watchLogLength
  }))

describe("resumable watches in memory", () => {
  it("a watcher that resumes rebuilds the cluster exactly, and is resumed whenever the log holds what it missed", async () => {
    let resumed = 0
    let fresh = 0
    await fc.assert(
      fc.asyncProperty(historyArb, fc.constantFrom(4, 16), async (history, logLength) => {
        const counts = await runResumeHistory(history, memory, logLength)
        resumed += counts.resumed
        fresh += counts.fresh
      }),
      { numRuns: 150, seed: 0x4e5e }
    )
    // the histories exercise both outcomes
    assert.isAbove(resumed, 200)
    assert.isAbove(fresh, 450)
  }, 60_000)
})
