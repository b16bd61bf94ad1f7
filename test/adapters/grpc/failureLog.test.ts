import { create, toBinary } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Metric, Scope } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { TestClock } from "effect/testing"
import * as FailureLog from "../../../src/adapters/grpc/failureLog.ts"
import { logLinesSuppressed } from "../../../src/adapters/grpc/metrics.ts"
import { AffiliateUpdateRequestSchema, HelloRequestSchema } from "../../../src/gen/discovery/server/cluster_pb.ts"
import { captureLogs, endpoint, type JsonLogLine, rawUnary, serverLayer, transports, waitUntil } from "./fixtures.ts"

const ip = (...bytes: Array<number>): Uint8Array => Uint8Array.from(bytes)
const a = ip(10, 0, 0, 1)
const b = ip(10, 0, 0, 2)
const mappedA = ip(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1)

const failed = grpc.status.INVALID_ARGUMENT

/** How many of `n` failure lines from `address` the log lets through now. */
const admitted = (log: FailureLog.FailureLog, address: Uint8Array | undefined, n: number, code: number = failed) =>
  Array.from({ length: n }, () => log.admitUnsafe(code, address)).filter(Boolean).length

const suppressedTotal = Effect.map(Metric.value(logLinesSuppressed), (state) => state.count)

const summaries = (lines: ReadonlyArray<JsonLogLine>) =>
  lines
    .filter((line) => line.message === FailureLog.summaryMessage)
    .map(({ level, annotations }) => ({ level, annotations }))

describe("failureLog", () => {
  describe("make", () => {
    it.effect("lets a burst of an address's failure lines through, then one per second as tokens come back", () =>
      Effect.gen(function* () {
        const log = yield* FailureLog.make()
        assert.strictEqual(admitted(log, a, 25), 10)
        assert.strictEqual(admitted(log, b, 1), 1, "another address has a bucket of its own")
        yield* TestClock.adjust("999 millis")
        assert.strictEqual(admitted(log, a, 1), 0)
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(admitted(log, a, 2), 1)
        yield* TestClock.adjust("10 seconds")
        assert.strictEqual(admitted(log, a, 25), 10)
        assert.strictEqual(yield* suppressedTotal, 15 + 1 + 1 + 15)
      }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
    )

    it.effect("never holds back nor counts an OK line, which takes no token", () =>
      Effect.gen(function* () {
        const log = yield* FailureLog.make()
        assert.strictEqual(admitted(log, a, 100, grpc.status.OK), 100)
        assert.strictEqual(admitted(log, undefined, 100, grpc.status.OK), 100)
        assert.strictEqual(admitted(log, a, 10), 10, "the burst is still whole")
        assert.strictEqual(admitted(log, a, 100, grpc.status.OK), 100, "an empty bucket does not stop OK lines")
        assert.strictEqual(yield* suppressedTotal, 0)
        assert.strictEqual(yield* log.size, 1, "OK lines make no bucket")
      }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
    )

    it.effect("caps the lines of all addresses together, so rotating addresses cannot flood the log", () =>
      Effect.gen(function* () {
        const log = yield* FailureLog.make({ totalRate: 2 })
        const many = Array.from({ length: 50 }, (_, i) => ip(10, 1, 0, i))
        assert.strictEqual(many.filter((address) => log.admitUnsafe(failed, address)).length, 20)
        assert.strictEqual(yield* suppressedTotal, 30)
        yield* TestClock.adjust("500 millis")
        assert.strictEqual(admitted(log, ip(10, 2, 0, 0), 3), 1)
        assert.strictEqual(admitted(log, many[40], 1), 0, "the total has no token left")
      }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
    )

    it.effect("counts an IPv4-mapped address as its IPv4 address, and unknown addresses together", () =>
      Effect.gen(function* () {
        const log = yield* FailureLog.make()
        assert.strictEqual(admitted(log, mappedA, 6), 6)
        assert.strictEqual(admitted(log, a, 6), 4)
        assert.strictEqual(admitted(log, undefined, 12), 10)
        assert.strictEqual(yield* log.size, 2)
      })
    )

    it.effect("tells at most maxAddresses apart; the others share one bucket until quiet ones are dropped", () =>
      Effect.gen(function* () {
        const log = yield* FailureLog.make({ maxAddresses: 2, summaryInterval: "1 minute" })
        assert.strictEqual(admitted(log, ip(10, 0, 0, 1), 1), 1)
        assert.strictEqual(admitted(log, ip(10, 0, 0, 2), 1), 1)
        const others = [3, 4, 5, 6].map((last) => ip(10, 0, 0, last))
        assert.strictEqual(
          others.map((address) => admitted(log, address, 4)).reduce((x, y) => x + y),
          10
        )
        assert.strictEqual(yield* log.size, 2)
        yield* TestClock.adjust("1 minute")
        assert.strictEqual(yield* log.size, 0)
        assert.strictEqual(admitted(log, others[0], 12), 10, "a dropped bucket comes back full")
      })
    )

    it.effect("leaves the metric registry alone when its metrics are turned off", () =>
      Effect.gen(function* () {
        const log = yield* FailureLog.make({ metrics: false })
        assert.strictEqual(admitted(log, a, 20), 10)
        assert.strictEqual(yield* PrometheusMetrics.format(), "")
      }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
    )

    it.effect("gives a rate below a tenth a burst of one line", () =>
      Effect.gen(function* () {
        const log = yield* FailureLog.make({ perAddressRate: 0.05 })
        assert.strictEqual(admitted(log, a, 3), 1)
        yield* TestClock.adjust("20 seconds")
        assert.strictEqual(admitted(log, a, 3), 1)
      })
    )

    it.effect("writes one summary per interval when lines were held back, and one when its scope closes", () => {
      const { lines, layer } = captureLogs()
      return Effect.gen(function* () {
        const scope = yield* Scope.make()
        const log = yield* FailureLog.make().pipe(Scope.provide(scope))
        admitted(log, a, 15)
        admitted(log, b, 12)
        admitted(log, undefined, 11)
        yield* TestClock.adjust("59 seconds")
        assert.deepStrictEqual(summaries(lines), [])
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(summaries(lines), [
          { level: "WARN", annotations: { suppressed: 8, addresses: 3, "peer.address": "10.0.0.1" } }
        ])
        yield* TestClock.adjust("1 minute")
        assert.strictEqual(summaries(lines).length, 1, "nothing held back, nothing written")
        admitted(log, b, 12)
        yield* Scope.close(scope, Exit.void)
        assert.deepStrictEqual(summaries(lines).slice(1), [
          { level: "WARN", annotations: { suppressed: 2, addresses: 1, "peer.address": "10.0.0.2" } }
        ])
      }).pipe(Effect.provide(layer))
    })

    it.effect("dies with a RangeError for a rate that is not positive and finite", () =>
      Effect.gen(function* () {
        for (const options of [{ perAddressRate: 0 }, { totalRate: Number.POSITIVE_INFINITY }, { maxAddresses: 0 }]) {
          const exit = yield* Effect.exit(FailureLog.make(options))
          assert.isTrue(Exit.isFailure(exit) && Cause.squash(exit.cause) instanceof RangeError, JSON.stringify(options))
        }
      })
    )
  })

  const service = "/sidero.discovery.server.Cluster"
  const invalidUpdate = toBinary(
    AffiliateUpdateRequestSchema,
    create(AffiliateUpdateRequestSchema, { clusterId: "c", affiliateId: "" })
  )
  const hello = toBinary(HelloRequestSchema, create(HelloRequestSchema, { clusterId: "c", clientVersion: "v1" }))

  const byMethod = (lines: ReadonlyArray<JsonLogLine>, method: string) =>
    lines.filter((line) => line.message === `${service}/${method}`)

  for (const transport of transports) {
    describe(`over ${transport}`, () => {
      it.effect("writes a burst of a client's failure lines, every success line, and sums up the rest", () => {
        const { lines, layer } = captureLogs()
        return Effect.gen(function* () {
          const target = yield* endpoint
          for (let i = 0; i < 50; i++) {
            const exit = yield* Effect.exit(rawUnary(target, `${service}/AffiliateUpdate`, invalidUpdate))
            assert.deepStrictEqual(Exit.isFailure(exit) && Cause.squash(exit.cause), {
              code: grpc.status.INVALID_ARGUMENT,
              details: "affiliate ID can't be empty"
            })
            if (i % 10 === 9) yield* rawUnary(target, `${service}/Hello`, hello)
          }
          const failures = byMethod(lines, "AffiliateUpdate")
          assert.strictEqual(failures.length, 10)
          assert.isTrue(failures.every((line) => line.level === "ERROR" && line.annotations.code === "InvalidArgument"))
          assert.deepStrictEqual(
            byMethod(lines, "Hello").map((line) => [line.level, line.annotations.code]),
            Array.from({ length: 5 }, () => ["INFO", "OK"])
          )
          assert.strictEqual(yield* suppressedTotal, 40)
          assert.include(yield* PrometheusMetrics.format(), "\ndiscovery_server_log_lines_suppressed_total 40\n")
          assert.deepStrictEqual(summaries(lines), [])

          yield* TestClock.adjust("1 minute")
          yield* waitUntil(() => summaries(lines).length > 0, "the summary is written")
          assert.deepStrictEqual(summaries(lines), [
            { level: "WARN", annotations: { suppressed: 40, addresses: 1, "peer.address": "127.0.0.1" } }
          ])
        }).pipe(
          Effect.provide(serverLayer({}, { transport, rateLimit: false })),
          Effect.provide(layer),
          Effect.provideService(Metric.MetricRegistry, new Map())
        )
      })

      it.effect("writes every failure line when turned off", () => {
        const { lines, layer } = captureLogs()
        return Effect.gen(function* () {
          const target = yield* endpoint
          for (let i = 0; i < 15; i++) {
            yield* Effect.exit(rawUnary(target, `${service}/AffiliateUpdate`, invalidUpdate))
          }
          assert.strictEqual(byMethod(lines, "AffiliateUpdate").length, 15)
          assert.strictEqual(yield* suppressedTotal, 0)
        }).pipe(
          Effect.provide(serverLayer({}, { transport, rateLimit: false, failureLog: false })),
          Effect.provide(layer),
          Effect.provideService(Metric.MetricRegistry, new Map())
        )
      })
    })
  }
})
