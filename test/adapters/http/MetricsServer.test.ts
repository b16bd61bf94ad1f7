import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Layer, Metric, Scope } from "effect"
import * as MetricsServer from "../../../src/adapters/http/MetricsServer.ts"
import { Readiness } from "../../../src/adapters/http/Readiness.ts"
import * as TestDiscovery from "../../../src/adapters/testing/TestDiscovery.ts"
import { ClusterState } from "../../../src/core/server/ClusterState.ts"
import * as GarbageCollector from "../../../src/core/server/GarbageCollector.ts"
import { endpoint, record, updateRequest } from "../../core/fixtures/discovery.ts"
import type { Scrape } from "./fixtures.ts"
import { metrics, parseScrape, request, samplesOf, sampleValue } from "./fixtures.ts"

const scrape = Effect.gen(function* () {
  const server = yield* MetricsServer.MetricsServer
  const reply = yield* request(server.port, "/metrics")
  assert.strictEqual(reply.status, 200)
  assert.strictEqual(reply.headers.get("content-type"), "text/plain; version=0.0.4; charset=utf-8")
  return parseScrape(reply.body)
})

/** The §4.6 metrics this adapter and the GC export: name, type, no labels. */
const owned = {
  discovery_state_clusters: "gauge",
  discovery_state_affiliates: "gauge",
  discovery_state_endpoints: "gauge",
  discovery_state_subscriptions: "gauge",
  discovery_state_gc_runs_total: "counter",
  discovery_state_gc_clusters_total: "counter",
  discovery_state_gc_affiliates_total: "counter"
} as const

const processMetrics = {
  process_cpu_user_seconds_total: "counter",
  process_cpu_system_seconds_total: "counter",
  process_cpu_seconds_total: "counter",
  process_start_time_seconds: "gauge",
  process_resident_memory_bytes: "gauge",
  process_virtual_memory_bytes: "gauge",
  process_open_fds: "gauge",
  process_max_fds: "gauge",
  nodejs_heap_size_total_bytes: "gauge",
  nodejs_heap_size_used_bytes: "gauge",
  nodejs_external_memory_bytes: "gauge",
  nodejs_heap_space_size_total_bytes: "gauge",
  nodejs_heap_space_size_used_bytes: "gauge",
  nodejs_heap_space_size_available_bytes: "gauge",
  nodejs_eventloop_lag_p99_seconds: "gauge",
  nodejs_version_info: "gauge"
} as const

const state = (s: Scrape) => ({
  clusters: sampleValue(s, "discovery_state_clusters"),
  affiliates: sampleValue(s, "discovery_state_affiliates"),
  endpoints: sampleValue(s, "discovery_state_endpoints"),
  subscriptions: sampleValue(s, "discovery_state_subscriptions")
})

const gc = (s: Scrape) => ({
  runs: sampleValue(s, "discovery_state_gc_runs_total")!,
  clusters: sampleValue(s, "discovery_state_gc_clusters_total")!,
  affiliates: sampleValue(s, "discovery_state_gc_affiliates_total")!
})

describe("MetricsServer", () => {
  it.effect(
    "exports the state and GC metrics with the original's names, types and no labels, from the first scrape",
    () =>
      Effect.gen(function* () {
        const first = yield* scrape
        for (const [name, type] of Object.entries(owned)) {
          assert.strictEqual(first.types.get(name), type, name)
          assert.isTrue(first.help.has(name), `${name} has HELP`)
          const samples = samplesOf(first, name)
          assert.strictEqual(samples.length, 1, name)
          assert.deepStrictEqual(samples[0]!.labels, {}, name)
        }
        assert.deepStrictEqual(state(first), { clusters: 0, affiliates: 0, endpoints: 0, subscriptions: 0 })
      }).pipe(Effect.provide(metrics()))
  )

  it.effect("computes the state gauges at scrape time", () =>
    Effect.gen(function* () {
      const cluster = yield* ClusterState
      yield* cluster.update(
        updateRequest({ clusterId: "c1", affiliateId: "a1", endpoints: [endpoint(1), endpoint(2)] })
      )
      yield* cluster.update(updateRequest({ clusterId: "c1", affiliateId: "a2", endpoints: [endpoint(3)] }))
      yield* cluster.update(updateRequest({ clusterId: "c2", affiliateId: "a1" }))
      yield* record(cluster, "c3")
      assert.deepStrictEqual(state(yield* scrape), { clusters: 3, affiliates: 3, endpoints: 3, subscriptions: 1 })
      yield* cluster.delete({ clusterId: "c1", affiliateId: "a1" })
      assert.deepStrictEqual(state(yield* scrape), { clusters: 3, affiliates: 2, endpoints: 1, subscriptions: 1 })
    }).pipe(Effect.provide(metrics()))
  )

  it.effect("counts GC runs and what they removed (endpoint trims are not counted)", () =>
    Effect.gen(function* () {
      const cluster = yield* ClusterState
      const before = gc(yield* scrape)
      yield* cluster.update(updateRequest({ clusterId: "c1", affiliateId: "old", ttl: Duration.seconds(1) }))
      yield* cluster.update(updateRequest({ clusterId: "c2", affiliateId: "old", ttl: Duration.seconds(1) }))
      yield* cluster.update(updateRequest({ clusterId: "c2", affiliateId: "new", ttl: Duration.minutes(5) }))
      yield* cluster.update(
        updateRequest({ clusterId: "c2", affiliateId: "new", endpoints: [endpoint(9)], ttl: Duration.seconds(1) })
      )
      yield* TestDiscovery.advance("2 seconds")
      yield* GarbageCollector.runOnce
      yield* GarbageCollector.runOnce
      const after = gc(yield* scrape)
      assert.deepStrictEqual(
        {
          runs: after.runs - before.runs,
          clusters: after.clusters - before.clusters,
          affiliates: after.affiliates - before.affiliates
        },
        { runs: 2, clusters: 1, affiliates: 2 }
      )
    }).pipe(Effect.provide(metrics()))
  )

  it.effect("exports process and Node.js runtime metrics under the standard names", () =>
    Effect.gen(function* () {
      const s = yield* scrape
      for (const [name, type] of Object.entries(processMetrics)) {
        if (
          process.platform !== "linux" &&
          ["process_virtual_memory_bytes", "process_open_fds", "process_max_fds"].includes(name)
        )
          continue
        assert.strictEqual(s.types.get(name), type, name)
        assert.isAbove(samplesOf(s, name).length, 0, name)
      }
      const now = Date.now() / 1000
      const start = sampleValue(s, "process_start_time_seconds")!
      assert.isTrue(start > now - 3600 && start <= now, `start time ${start}`)
      assert.isAbove(sampleValue(s, "process_resident_memory_bytes")!, 1_000_000)
      assert.isAbove(sampleValue(s, "process_cpu_seconds_total")!, 0)
      assert.isAbove(sampleValue(s, "process_open_fds")!, 0)
      const spaces = samplesOf(s, "nodejs_heap_space_size_used_bytes").map((sample) => sample.labels.space)
      assert.include(spaces, "old")
      assert.include(spaces, "new")
      const [version] = samplesOf(s, "nodejs_version_info")
      assert.strictEqual(version!.labels.version, process.version)
      assert.strictEqual(version!.value, 1)
      // Every family has exactly one TYPE line and every name is valid.
      for (const name of s.types.keys()) assert.match(name, /^[a-zA-Z_:][a-zA-Z0-9_:]*$/)
    }).pipe(Effect.provide(metrics()))
  )

  it.effect("can leave the process metrics out", () =>
    Effect.gen(function* () {
      const s = yield* scrape
      assert.isFalse(s.types.has("process_cpu_seconds_total"))
      assert.strictEqual(s.types.get("discovery_state_clusters"), "gauge")
    }).pipe(Effect.provide(metrics({ processMetrics: false })))
  )

  it.effect("serves only /metrics and the probes", () =>
    Effect.gen(function* () {
      const { port } = yield* MetricsServer.MetricsServer
      assert.strictEqual((yield* request(port, "/")).status, 404)
      assert.strictEqual((yield* request(port, "/stats")).status, 404)
      assert.strictEqual((yield* request(port, "/healthz")).status, 200)
      assert.strictEqual((yield* request(port, "/readyz")).status, 503)
      yield* Effect.flatMap(Readiness, (r) => r.markReady)
      assert.strictEqual((yield* request(port, "/readyz")).status, 200)
    }).pipe(Effect.provide(metrics()))
  )

  it.effect("registers the collectors before listening and removes them when it closes", () =>
    Effect.gen(function* () {
      const names = Effect.map(Metric.snapshot, (all) => new Set(all.map((m) => m.id)))
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(metrics(), scope)
      assert.isTrue((yield* names).has("discovery_state_clusters"))
      assert.isTrue((yield* names).has("process_resident_memory_bytes"))
      assert.isAbove(Context.get(context, MetricsServer.MetricsServer).port, 0)
      yield* Scope.close(scope, Exit.void)
      assert.isFalse((yield* names).has("discovery_state_clusters"))
      assert.isFalse((yield* names).has("process_resident_memory_bytes"))
      // The GC counters are plain counters and stay.
      assert.isTrue((yield* names).has("discovery_state_gc_runs_total"))
    })
  )
})
