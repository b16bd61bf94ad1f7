/**
 * The live view's sampler on the test clock: a sample a second with the
 * state's counts and the rates of the counters `/metrics` exports, kept for
 * 15 minutes; with a directory, this instance announced every 5 seconds for
 * 15, the instances listed every second (the last list kept, with the error,
 * while the directory fails), and the announcement withdrawn on the way out.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Metric, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as LiveSampler from "../../../src/adapters/http/live/LiveSampler.ts"
import { keptSamples } from "../../../src/adapters/http/live/LiveSample.ts"
import { ClusterState } from "../../../src/core/server/ClusterState.ts"
import { Unavailable } from "../../../src/ports/DiscoveryError.ts"
import type { InstanceAnnouncement, InstanceDirectory } from "../../../src/ports/InstanceDirectory.ts"
import { updateRequest } from "../../core/fixtures/discovery.ts"

const handled = Metric.counter("grpc_server_handled_total")
const sent = Metric.counter("grpc_server_msg_sent_total")
const endings = Metric.counter("discovery_watch_endings_total")

const sources = (directory?: InstanceDirectory["Service"]): LiveSampler.LiveSources => ({
  self: { name: "me", version: "1.2.3", startedAt: 0, state: "redis" },
  address: () => "me.example:3000",
  threads: (watches) => [{ index: 0, connections: 1, watches, requestBytes: 3, unreadBytes: 0 }],
  requestMemory: () => ({ bytes: 1024, budget: 4096 }),
  refreshMetrics: Effect.void,
  directory
})

/** A directory in memory that records what it is told and fails while `down`. */
const memoryDirectory = () => {
  const told: Array<string> = []
  const held = new Map<string, InstanceAnnouncement>()
  const control = { down: false }
  const guard = <A>(effect: Effect.Effect<A>) =>
    Effect.suspend(() => (control.down ? Effect.fail(new Unavailable({ message: "directory down" })) : effect))
  const directory: InstanceDirectory["Service"] = {
    announce: (announcement, ttlMillis) =>
      guard(
        Effect.sync(() => {
          told.push(`announce ${announcement.name} at ${announcement.announcedAt} for ${ttlMillis}`)
          held.set(announcement.name, announcement)
        })
      ),
    list: guard(Effect.sync(() => [...held.values()])),
    withdraw: (name) => Effect.sync(() => void told.push(`withdraw ${name}`))
  }
  return { directory, told, held, control }
}

describe("LiveSampler", () => {
  it.effect("samples once a second: counts, rates of the exported counters, request memory", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const view = yield* LiveSampler.make(sources()).pipe(Scope.provide(scope))
      yield* TestClock.adjust("1 second")
      const state = yield* ClusterState
      yield* state.update(updateRequest({ clusterId: "c", affiliateId: "a" }))
      yield* Metric.update(Metric.withAttributes(handled, { grpc_method: "AffiliateUpdate" }), 6)
      yield* Metric.update(Metric.withAttributes(handled, { grpc_method: "List" }), 100)
      yield* Metric.update(Metric.withAttributes(sent, { grpc_method: "Watch" }), 4)
      yield* Metric.update(Metric.withAttributes(endings, { cause: "cut_off" }), 2)
      yield* TestClock.adjust("2 seconds")
      const frame = yield* view.frame(0)
      const last = frame.samples.at(-1)!
      assert.strictEqual(last.affiliates, 1)
      assert.strictEqual(last.clusters, 1)
      // the counters moved between two samples a second apart
      const rates = frame.samples.map((sample) => sample.updatesPerSecond)
      assert.include(rates, 6)
      assert.notInclude(rates, 106)
      assert.include(
        frame.samples.map((sample) => sample.deliveriesPerSecond),
        4
      )
      assert.strictEqual(last.cutOffTotal, 2)
      assert.strictEqual(last.requestBytes, 1024)
      assert.strictEqual(last.requestBudgetBytes, 4096)
      // the rows of the last sample, with the watches the state counted then
      assert.deepStrictEqual(frame.threads, sources().threads(last.watches))
      assert.isUndefined(frame.instances)
      // a viewer gets only what it has not seen
      assert.deepStrictEqual(yield* view.frame(last.at), { ...frame, samples: [] })
      yield* Scope.close(scope, Exit.void)
    }).pipe(Effect.provide(ClusterState.layer))
  )

  it.effect("keeps the last 15 minutes", () =>
    Effect.gen(function* () {
      const view = yield* LiveSampler.make(sources())
      yield* TestClock.adjust("20 minutes")
      const samples = (yield* view.frame(0)).samples
      assert.lengthOf(samples, keptSamples)
      assert.strictEqual(samples.at(-1)!.at - samples[0]!.at, (keptSamples - 1) * 1000)
    }).pipe(Effect.scoped, Effect.provide(ClusterState.layer))
  )

  it.effect(
    "announces itself every 5 s for 15 s, lists the instances, keeps the last list while the directory fails, and withdraws",
    () =>
      Effect.gen(function* () {
        const memory = memoryDirectory()
        const scope = yield* Scope.make()
        const view = yield* LiveSampler.make(sources(memory.directory)).pipe(Scope.provide(scope))
        yield* TestClock.adjust("6 seconds")
        assert.deepStrictEqual(memory.told, ["announce me at 0 for 15000", "announce me at 5000 for 15000"])
        const announced = memory.held.get("me")!
        assert.strictEqual(announced.address, "me.example:3000")
        assert.strictEqual(announced.version, "1.2.3")
        assert.strictEqual(announced.threads, 1)
        memory.held.set("other", { ...announced, name: "other" })
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(
          (yield* view.frame(0)).instances?.map((one) => one.name),
          ["me", "other"]
        )
        memory.control.down = true
        yield* TestClock.adjust("1 second")
        const failing = yield* view.frame(0)
        assert.deepStrictEqual(
          failing.instances?.map((one) => one.name),
          ["me", "other"]
        )
        assert.strictEqual(failing.instancesError, "directory down")
        memory.control.down = false
        yield* TestClock.adjust("1 second")
        // back: it announces at once rather than waiting for its turn
        assert.strictEqual(memory.told.at(-1), "announce me at 9000 for 15000")
        assert.isUndefined((yield* view.frame(0)).instancesError)
        yield* Scope.close(scope, Exit.void)
        assert.strictEqual(memory.told.at(-1), "withdraw me")
      }).pipe(Effect.provide(ClusterState.layer))
  )
})
