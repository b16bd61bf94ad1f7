/**
 * Property tests of the cluster state on the memory backend: random
 * interleavings of updates, deletes, time steps, GC runs and watches (some of
 * which stop reading), checked after every step against the reference model
 * of `fixtures/stateModel.ts`. The Redis backend runs the same properties in
 * `test/adapters/redis/ClusterState.prop.test.ts`.
 */
import { describe, it } from "@effect/vitest"
import fc from "fast-check"
import { actionsArb, runCase, stoppedReaderIsCutOff } from "./fixtures/stateModel.ts"

describe("ClusterState properties", () => {
  it("keeps watchers, List and a reference model in agreement over random interleavings", { timeout: 60_000 }, () =>
    fc.assert(
      fc.asyncProperty(actionsArb, async (actions) => {
        await runCase(actions)
      }),
      { numRuns: 120, seed: 0x5eed, timeout: 2000 }
    )
  )

  it("never exceeds small caps on clusters and watches, and refusals change nothing", { timeout: 60_000 }, () =>
    fc.assert(
      fc.asyncProperty(actionsArb, async (actions) => {
        await runCase(actions, { maxClusters: 2, maxWatches: 3 })
      }),
      { numRuns: 120, seed: 0xca95, timeout: 2000 }
    )
  )

  it("cuts off a stopped watcher after more than 32 unread events while another keeps reading", () =>
    stoppedReaderIsCutOff())
})
