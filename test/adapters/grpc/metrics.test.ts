import { create, toBinary } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Metric, Scope } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { TestClock } from "effect/testing"
import { goCodeNames, helloRequests, parseVersion } from "../../../src/adapters/grpc/metrics.ts"
import { HelloRequestSchema } from "../../../src/gen/discovery/server/cluster_pb.ts"
import {
  connect,
  endpoint,
  rawUnary,
  serverLayer as baseServerLayer,
  transports,
  waitUntil,
  watcher
} from "./fixtures.ts"

const service = "sidero.discovery.server.Cluster"

const helloBytes = (clusterId: string, clientVersion: string) =>
  toBinary(HelloRequestSchema, create(HelloRequestSchema, { clusterId, clientVersion }))

/** The sample lines of `name` (with any suffix such as `_bucket`), without HELP and TYPE. */
const samples = (text: string, name: string): Array<string> =>
  text.split("\n").filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))

const labels = (method: string, type: string) => `grpc_method="${method}",grpc_service="${service}",grpc_type="${type}"`

describe("metrics", () => {
  describe("parseVersion", () => {
    it("maps versions to labels as the original does (T39)", () => {
      const cases: ReadonlyArray<readonly [string, string]> = [
        ["", "unknown"],
        ["unknown", "unknown"],
        ["v0.13.0", "v0.13"],
        ["v0.13.0-beta.0", "v0.13-pre"],
        ["v0.14.0-alpha.0-7-gf7d9f211", "v0.14-pre"],
        ["v0.14.0-alpha.0-7-gf7d9f211-dirty", "v0.14-pre"],
        ["v1.8.3", "v1.8"],
        ["v1.8.3-7-gf7d9f211", "v1.8-pre"],
        ["v1.8.0-beta.1", "v1.8-pre"],
        ["v1.2", "unknown"],
        ["1.2.3", "unknown"],
        ["v123.1.0", "unknown"],
        ["v12.1.0", "v12.1"],
        ["v1.1234.0", "unknown"],
        ["v1.123.0", "v1.123"],
        ["vab.cde.f", "vab.cde"],
        ["-v1.2.3", "unknown"],
        ["v1.2.3-", "v1.2"]
      ]
      for (const [version, label] of cases) assert.strictEqual(parseVersion(version), label, version)
    })

    it.effect("counts a version label that is not digits as unknown, so clients cannot mint series (Q11)", () =>
      Effect.gen(function* () {
        const before = yield* PrometheusMetrics.format()
        yield* Metric.update(helloRequests(parseVersion("vab.cde.f")), 1)
        yield* Metric.update(helloRequests(parseVersion("v1.9.0")), 1)
        const after = yield* PrometheusMetrics.format()
        assert.notInclude(after, 'client_version="vab.cde"')
        assert.include(after, 'client_version="v1.9"')
        const unknown = (text: string) =>
          Number(/discovery_server_hello_requests_total\{client_version="unknown"\} (\d+)/.exec(text)?.[1] ?? 0)
        assert.strictEqual(unknown(after) - unknown(before), 1)
      })
    )
  })

  for (const transport of transports) {
    describe(`over ${transport}`, () => {
      const serverLayer = (...[core, server]: Parameters<typeof baseServerLayer>) =>
        baseServerLayer(core, { transport, ...server })

      it.effect("exports the original's names, types, labels and buckets, seeded at zero", () =>
        Effect.gen(function* () {
          const text = yield* PrometheusMetrics.format()
          assert.include(text, "# TYPE grpc_server_started_total counter\n")
          assert.include(text, "# TYPE grpc_server_handled_total counter\n")
          assert.include(text, "# TYPE grpc_server_msg_received_total counter\n")
          assert.include(text, "# TYPE grpc_server_msg_sent_total counter\n")
          assert.include(text, "# TYPE grpc_server_handling_seconds histogram\n")
          assert.include(text, "# TYPE discovery_server_hello_requests_total counter\n")
          const methods = [
            ["Hello", "unary"],
            ["AffiliateUpdate", "unary"],
            ["AffiliateDelete", "unary"],
            ["List", "unary"],
            ["Watch", "server_stream"]
          ] as const
          for (const name of [
            "grpc_server_started_total",
            "grpc_server_msg_received_total",
            "grpc_server_msg_sent_total"
          ]) {
            assert.deepStrictEqual(
              samples(text, name),
              methods.map(([method, type]) => `${name}{${labels(method, type)}} 0`)
            )
          }
          assert.deepStrictEqual(
            samples(text, "grpc_server_handled_total"),
            methods.flatMap(([method, type]) =>
              goCodeNames.map((code) => `grpc_server_handled_total{grpc_code="${code}",${labels(method, type)}} 0`)
            )
          )
          assert.deepStrictEqual(samples(text, "grpc_server_handling_seconds_bucket").slice(0, 7), [
            `grpc_server_handling_seconds_bucket{${labels("Hello", "unary")},le="0.01"} 0`,
            `grpc_server_handling_seconds_bucket{${labels("Hello", "unary")},le="0.1"} 0`,
            `grpc_server_handling_seconds_bucket{${labels("Hello", "unary")},le="0.25"} 0`,
            `grpc_server_handling_seconds_bucket{${labels("Hello", "unary")},le="0.5"} 0`,
            `grpc_server_handling_seconds_bucket{${labels("Hello", "unary")},le="1"} 0`,
            `grpc_server_handling_seconds_bucket{${labels("Hello", "unary")},le="2.5"} 0`,
            `grpc_server_handling_seconds_bucket{${labels("Hello", "unary")},le="+Inf"} 0`
          ])
          assert.deepStrictEqual(samples(text, "discovery_server_hello_requests_total"), [
            `discovery_server_hello_requests_total{client_version="unknown"} 0`
          ])
          assert.deepStrictEqual(goCodeNames.slice(0, 4), ["OK", "Canceled", "Unknown", "InvalidArgument"])
          assert.strictEqual(goCodeNames[grpc.status.RESOURCE_EXHAUSTED], "ResourceExhausted")
          assert.strictEqual(goCodeNames.length, 17)
        }).pipe(Effect.provide(serverLayer()), Effect.provideService(Metric.MetricRegistry, new Map()))
      )

      it.effect(
        "counts calls by method and code, Hello by version before validation, but not calls refused by the limiter",
        () =>
          Effect.gen(function* () {
            const target = yield* endpoint
            const hello = (clusterId: string, version: string, deadline = 5000) =>
              Effect.exit(
                rawUnary(target, `/${service}/Hello`, helloBytes(clusterId, version), new grpc.Metadata(), deadline)
              )
            assert.isTrue(Exit.isSuccess(yield* hello("c", "v1.8.3")))
            assert.isTrue(Exit.isFailure(yield* hello("", "v1.9.0-beta.1")))
            assert.isTrue(Exit.isFailure(yield* hello("c", "v1.8.3", 500)))

            yield* TestClock.adjust("1 minute")
            const scope = yield* Scope.make()
            const api = yield* connect().pipe(Scope.provide(scope))
            yield* Effect.forEach(["c", "c"], (clusterId) => api.list({ clusterId }), { discard: true })
            yield* TestClock.adjust("1 minute")
            const watch = yield* watcher(api.watch({ clusterId: "c" })).pipe(Scope.provide(scope))
            yield* watch.next
            yield* Scope.close(scope, Exit.void)

            const value = (line: string) => Number(line.slice(line.lastIndexOf(" ") + 1))
            const sample = (text: string, name: string, labelSet: string) => {
              const line = samples(text, name).find((line) => line.startsWith(`${name}{${labelSet}}`))
              return line === undefined ? undefined : value(line)
            }
            const context = yield* Effect.context<never>()
            yield* waitUntil(() => {
              const text = PrometheusMetrics.formatUnsafe(context)
              return (
                sample(text, "grpc_server_handled_total", `grpc_code="OK",${labels("Watch", "server_stream")}`) === 1
              )
            }, "the watch is counted")
            const text = yield* PrometheusMetrics.format()
            const helloLabels = labels("Hello", "unary")
            assert.strictEqual(sample(text, "grpc_server_started_total", helloLabels), 2)
            assert.strictEqual(sample(text, "grpc_server_msg_received_total", helloLabels), 2)
            assert.strictEqual(sample(text, "grpc_server_msg_sent_total", helloLabels), 2)
            assert.strictEqual(sample(text, "grpc_server_handled_total", `grpc_code="OK",${helloLabels}`), 1)
            assert.strictEqual(
              sample(text, "grpc_server_handled_total", `grpc_code="InvalidArgument",${helloLabels}`),
              1
            )
            assert.strictEqual(
              sample(text, "grpc_server_handled_total", `grpc_code="ResourceExhausted",${helloLabels}`),
              0
            )
            assert.strictEqual(sample(text, "grpc_server_handling_seconds_bucket", `${helloLabels},le="0.01"`), 2)
            assert.strictEqual(sample(text, "grpc_server_handling_seconds_count", helloLabels), 2)
            assert.strictEqual(
              sample(text, "grpc_server_handled_total", `grpc_code="OK",${labels("List", "unary")}`),
              2
            )
            const watchLabels = labels("Watch", "server_stream")
            assert.strictEqual(sample(text, "grpc_server_started_total", watchLabels), 1)
            assert.strictEqual(sample(text, "grpc_server_msg_received_total", watchLabels), 1)
            assert.strictEqual(sample(text, "grpc_server_msg_sent_total", watchLabels), 1)
            assert.deepStrictEqual(samples(text, "discovery_server_hello_requests_total"), [
              `discovery_server_hello_requests_total{client_version="unknown"} 0`,
              `discovery_server_hello_requests_total{client_version="v1.8"} 1`,
              `discovery_server_hello_requests_total{client_version="v1.9-pre"} 1`
            ])
          }).pipe(
            Effect.provide(serverLayer({}, { rateLimit: { rate: 1, burst: 2 } })),
            Effect.provideService(Metric.MetricRegistry, new Map())
          )
      )

      it.effect("leaves the registry alone when turned off", () =>
        Effect.gen(function* () {
          yield* rawUnary(yield* endpoint, `/${service}/Hello`, helloBytes("c", "v1.8.3"))
          assert.strictEqual(yield* PrometheusMetrics.format(), "")
        }).pipe(
          Effect.provide(serverLayer({}, { metrics: false })),
          Effect.provideService(Metric.MetricRegistry, new Map())
        )
      )
    })
  }
})
