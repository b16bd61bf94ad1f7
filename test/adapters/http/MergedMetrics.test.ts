import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Metric } from "effect"
import { PrometheusMetrics } from "effect/observability"
import * as GrpcMetrics from "../../../src/adapters/grpc/metrics.ts"
import * as MergedMetrics from "../../../src/adapters/http/MergedMetrics.ts"

/** A context with a registry of its own, standing for one thread. */
const thread = (): Context.Context<never> => Context.make(Metric.MetricRegistry, new Map())

const requests = Metric.counter("test_requests_total", { description: "Requests.", incremental: true })
const latency = Metric.histogram("test_latency_seconds", { description: "Latency.", boundaries: [0.1, 1] })
const inflight = Metric.gauge("test_inflight", { description: "In flight." })
const route = (path: string) => ({ route: path })

const workerA = (context: Context.Context<never>) => {
  Metric.withAttributes(requests, route("/a")).updateUnsafe(2, context)
  Metric.withAttributes(requests, route("/b")).updateUnsafe(1, context)
  Metric.withAttributes(latency, route("/a")).updateUnsafe(0.0625, context)
  Metric.withAttributes(latency, route("/a")).updateUnsafe(0.5, context)
  inflight.updateUnsafe(3, context)
}

const workerB = (context: Context.Context<never>) => {
  Metric.withAttributes(requests, route("/a")).updateUnsafe(5, context)
  Metric.withAttributes(latency, route("/a")).updateUnsafe(0.03125, context)
  Metric.withAttributes(latency, route("/a")).updateUnsafe(2, context)
  inflight.updateUnsafe(4, context)
}

const lines = (context: Context.Context<never>): Array<string> =>
  PrometheusMetrics.formatUnsafe(context).split("\n").slice(0, -1)

describe("MergedMetrics", () => {
  it("sums counters, histograms and gauges under their labels, help and type", () => {
    const a = thread()
    const b = thread()
    const main = thread()
    workerA(a)
    workerB(b)
    const merged = new MergedMetrics.MergedMetrics(main)
    merged.update(1, MergedMetrics.snapshotWire(a))
    merged.update(2, MergedMetrics.toWire(Metric.snapshotUnsafe(b)))
    assert.deepStrictEqual(lines(main), [
      "# HELP test_requests_total Requests.",
      "# TYPE test_requests_total counter",
      'test_requests_total{route="/a"} 7',
      'test_requests_total{route="/b"} 1',
      "# HELP test_latency_seconds Latency.",
      "# TYPE test_latency_seconds histogram",
      'test_latency_seconds_bucket{route="/a",le="0.1"} 2',
      'test_latency_seconds_bucket{route="/a",le="1"} 3',
      'test_latency_seconds_bucket{route="/a",le="+Inf"} 4',
      'test_latency_seconds_sum{route="/a"} 2.59375',
      'test_latency_seconds_count{route="/a"} 4',
      "# HELP test_inflight In flight.",
      "# TYPE test_inflight gauge",
      "test_inflight 7"
    ])
    const state = Metric.withAttributes(latency, route("/a")).valueUnsafe(main)
    assert.deepStrictEqual([state.min, state.max], [0.03125, 2])
  })

  it("shows each scrape the workers' latest values", () => {
    const a = thread()
    const main = thread()
    const merged = new MergedMetrics.MergedMetrics(main)
    workerA(a)
    merged.update(1, MergedMetrics.snapshotWire(a))
    Metric.withAttributes(requests, route("/a")).updateUnsafe(10, a)
    inflight.updateUnsafe(1, a)
    merged.update(1, MergedMetrics.snapshotWire(a))
    assert.include(lines(main), 'test_requests_total{route="/a"} 12')
    assert.include(lines(main), "test_inflight 1")
  })

  it("keeps the counts of a retired worker, ignores its late values, adds its restart's and drops its gauges", () => {
    const main = thread()
    const merged = new MergedMetrics.MergedMetrics(main)
    const first = thread()
    workerA(first)
    const b = thread()
    Metric.withAttributes(requests, route("/a")).updateUnsafe(5, b)
    merged.update(1, MergedMetrics.snapshotWire(first))
    merged.update(2, MergedMetrics.snapshotWire(b))
    merged.retire(1)
    const retired = lines(main)
    assert.include(retired, 'test_requests_total{route="/a"} 7')
    assert.include(retired, 'test_requests_total{route="/b"} 1')
    assert.include(retired, 'test_latency_seconds_count{route="/a"} 2')
    assert.notInclude(retired, "# TYPE test_inflight gauge")
    assert.notInclude(retired, "test_inflight 3")

    const restarted = thread()
    Metric.withAttributes(requests, route("/a")).updateUnsafe(1, restarted)
    Metric.withAttributes(latency, route("/a")).updateUnsafe(0.5, restarted)
    inflight.updateUnsafe(9, restarted)
    // a restarted worker is a new source; a late reply of the retired one changes nothing
    merged.update(1, MergedMetrics.snapshotWire(first))
    merged.update(3, MergedMetrics.snapshotWire(restarted))
    const after = lines(main)
    assert.include(after, 'test_requests_total{route="/a"} 8')
    assert.include(after, 'test_requests_total{route="/b"} 1')
    assert.include(after, 'test_latency_seconds_bucket{route="/a",le="1"} 3')
    assert.include(after, 'test_latency_seconds_count{route="/a"} 3')
    assert.include(after, "test_inflight 9")

    merged.retire(3)
    merged.retire(2)
    assert.include(lines(main), 'test_requests_total{route="/a"} 8')
    assert.notInclude(lines(main).join("\n"), "test_inflight")
  })

  it("drops a gauge the worker no longer posts", () => {
    const main = thread()
    const merged = new MergedMetrics.MergedMetrics(main)
    const a = thread()
    inflight.updateUnsafe(3, a)
    merged.update(1, MergedMetrics.snapshotWire(a))
    merged.update(1, [])
    assert.strictEqual(PrometheusMetrics.formatUnsafe(main), "")
  })

  it("posts plain data that survives structuredClone", () => {
    const a = thread()
    workerA(a)
    Metric.frequency("test_words").updateUnsafe("x", a)
    Metric.counter("test_big", { bigint: true }).updateUnsafe(5n, a)
    const wire = MergedMetrics.snapshotWire(a)
    const cloned = structuredClone(wire)
    assert.deepStrictEqual(cloned, wire)

    const direct = thread()
    const viaClone = thread()
    new MergedMetrics.MergedMetrics(direct).update(1, wire)
    new MergedMetrics.MergedMetrics(viaClone).update(1, cloned)
    assert.strictEqual(PrometheusMetrics.formatUnsafe(viaClone), PrometheusMetrics.formatUnsafe(direct))
    assert.include(lines(viaClone), 'test_words{key="x"} 1')
    assert.include(lines(viaClone), "test_big 5")
  })

  it("has the names and totals of one registry that received every update", () => {
    const workers = [thread(), thread()]
    const single = thread()
    const hello = GrpcMetrics.methodMetrics("Hello", "unary")
    const watch = GrpcMetrics.methodMetrics("Watch", "server_stream")
    for (const context of [...workers, single]) GrpcMetrics.seed(context, [hello, watch])
    const updates: ReadonlyArray<(context: Context.Context<never>) => void> = [
      (c) => hello.started.updateUnsafe(1, c),
      (c) => hello.handled[0]!.updateUnsafe(1, c),
      (c) => hello.handlingSeconds.updateUnsafe(0.005, c),
      (c) => GrpcMetrics.helloRequests("v1.8").updateUnsafe(1, c),
      (c) => watch.started.updateUnsafe(1, c),
      (c) => watch.sent.updateUnsafe(3, c),
      (c) => watch.handled[1]!.updateUnsafe(1, c),
      (c) => watch.handlingSeconds.updateUnsafe(0.3, c),
      (c) => hello.handled[3]!.updateUnsafe(1, c),
      (c) => hello.handlingSeconds.updateUnsafe(4, c),
      (c) => GrpcMetrics.logLinesSuppressed.updateUnsafe(2, c)
    ]
    updates.forEach((apply, i) => {
      apply(workers[i % 2]!)
      apply(single)
    })
    const main = thread()
    const merged = new MergedMetrics.MergedMetrics(main)
    merged.update(1, MergedMetrics.snapshotWire(workers[0]!))
    merged.update(2, MergedMetrics.snapshotWire(workers[1]!))
    assert.deepStrictEqual(lines(main), lines(single))
  })

  it("leaves alone a series the main thread has itself", () => {
    const main = thread()
    Metric.withAttributes(requests, route("/a")).updateUnsafe(100, main)
    const a = thread()
    workerA(a)
    new MergedMetrics.MergedMetrics(main).update(1, MergedMetrics.snapshotWire(a))
    const own = lines(main).filter((line) => line.startsWith('test_requests_total{route="/a"}'))
    assert.deepStrictEqual(own, ['test_requests_total{route="/a"} 100'])
    assert.include(lines(main), 'test_requests_total{route="/b"} 1')
  })

  it.effect("removes its series when its scope closes", () =>
    Effect.gen(function* () {
      const a = thread()
      workerA(a)
      const main = yield* Effect.context<never>()
      yield* Effect.scoped(
        Effect.gen(function* () {
          const merged = yield* MergedMetrics.make
          merged.update(1, MergedMetrics.snapshotWire(a))
          assert.include(lines(main), "test_inflight 3")
        })
      )
      assert.strictEqual(PrometheusMetrics.formatUnsafe(main), "")
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )
})
