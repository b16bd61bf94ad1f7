/**
 * The service's own cost per call without the transport: the handlers that
 * `GrpcServer.register` mounts, called directly with stand-in grpc-js call
 * objects, in one process. Each call runs what a real call runs between
 * grpc-js and the socket: request decoding (`requestDeserialize`), the
 * handler with the command's request log (the CLI's logger, so run this with
 * stdout sent to /dev/null or a file), metrics and the state change, and
 * response encoding (`responseSerialize`). Without the rate limiter, as the
 * bench runs ours. Prints one JSON object: ns per call for AffiliateUpdate and
 * Hello. Every loop is bounded in count and time.
 *
 * Run: `node bench/handler.ts [--warmup 1] [--duration 3] [--per-turn 16] [--rounds 5] [--console-json] > FILE`
 * (`--console-json`: Effect's `Logger.consoleJson` instead of the command's
 * logger, for comparison).
 * (figures go to stderr as JSON, so stdout can take the log lines).
 */
import * as grpc from "@grpc/grpc-js"
import { create, toBinary } from "@bufbuild/protobuf"
import { DurationSchema } from "@bufbuild/protobuf/wkt"
import { Effect, Layer, Logger, References } from "effect"
import { ClusterService } from "../src/adapters/grpc/ClusterService.ts"
import * as GrpcServer from "../src/adapters/grpc/GrpcServer.ts"
import { loggerLayer } from "../src/cli/serve.ts"
import * as DiscoveryServer from "../src/core/server/DiscoveryServer.ts"
import { AffiliateUpdateRequestSchema, HelloRequestSchema } from "../src/gen/discovery/server/cluster_pb.ts"

const flag = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? fallback : Number(process.argv[index + 1])
}
const warmupMs = flag("warmup", 1) * 1000
const durationMs = flag("duration", 3) * 1000
const perTurn = flag("per-turn", 16)
const rounds = flag("rounds", 5)
const maxCalls = 20_000_000

type Handler = (call: unknown, callback: (error: unknown, value?: unknown) => void) => void

/** Captures the implementation `register` mounts. */
const captured: Record<string, Handler> = {}
const fakeServer = {
  addService: (_definition: unknown, implementation: Record<string, Handler>) =>
    Object.assign(captured, implementation),
  removeService: () => {}
} as unknown as grpc.Server

const blob = (label: string, size: number) => {
  const bytes = new Uint8Array(size).fill(0x2e)
  bytes.set(new TextEncoder().encode(label).subarray(0, size))
  return bytes
}

/** AffiliateUpdate bytes: 128 clusters × 5 affiliates, data that changes on every call, as in the gRPC rows. */
const updateBytes = Array.from({ length: 1024 * 5 }, (_, i) =>
  Buffer.from(
    toBinary(
      AffiliateUpdateRequestSchema,
      create(AffiliateUpdateRequestSchema, {
        clusterId: `handler-${i % 128}`,
        affiliateId: `affiliate-${Math.floor(i / 128) % 5}`,
        affiliateData: blob(`data-${i}`, 256),
        affiliateEndpoints: [blob(`endpoint-${i % 128}-a`, 32), blob(`endpoint-${i % 128}-b`, 32)],
        ttl: create(DurationSchema, { seconds: 1800n })
      })
    )
  )
)
const helloBytes = Buffer.from(
  toBinary(HelloRequestSchema, create(HelloRequestSchema, { clusterId: "handler-hello", clientVersion: "v1.7.0" }))
)

const metadata = new grpc.Metadata()
metadata.set("x-real-ip", "2001:db8::1")

const callOf = (request: unknown) => ({
  request,
  metadata,
  cancelled: false,
  getPeer: () => "127.0.0.1:40000",
  getDeadline: () => Number.POSITIVE_INFINITY,
  on: () => {},
  once: () => {},
  off: () => {},
  emit: () => false
})

interface Rate {
  readonly calls: number
  /** Median of the rounds' ns per call. */
  readonly nsPerCall: number
  /** The best round's ns per call (least disturbed by the rest of the machine). */
  readonly bestNsPerCall: number
  readonly perSecond: number
  readonly rounds: ReadonlyArray<number>
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * Calls the handler in turns of `perTurn` calls, yielding to the event loop
 * between turns as a server does between socket reads (so work deferred to
 * the next turn, like batched log writes, is inside the measured time): a
 * warm-up, then `rounds` rounds sharing the measured duration.
 */
const measure = async (method: "AffiliateUpdate" | "Hello"): Promise<Rate> => {
  const handler = captured[method]!
  const definition = ClusterService[method]
  let replies = 0
  let failures = 0
  let i = 0
  const callback = (error: unknown, value?: unknown) => {
    if (error) failures++
    else {
      ;(definition.responseSerialize as (v: unknown) => Buffer)(value)
      replies++
    }
  }
  /** Runs calls for `ms`; returns how many ran and for how long (ms). */
  const window = async (ms: number) => {
    const from = performance.now()
    const first = i
    let now = from
    while (now - from < ms && i < maxCalls) {
      for (let j = 0; j < perTurn; j++, i++) {
        const bytes = method === "Hello" ? helloBytes : updateBytes[i % updateBytes.length]!
        handler(callOf(definition.requestDeserialize(bytes)), callback)
      }
      await turn()
      now = performance.now()
    }
    return { calls: i - first, ms: now - from }
  }
  await window(warmupMs)
  const nsPerCall: Array<number> = []
  let calls = 0
  let ms = 0
  for (let round = 0; round < rounds; round++) {
    const result = await window(durationMs / rounds)
    calls += result.calls
    ms += result.ms
    nsPerCall.push((result.ms * 1e6) / result.calls)
  }
  await turn()
  if (failures > 0 || replies !== i)
    throw new Error(`${method}: ${failures} failures, ${replies}/${i} replies (async?)`)
  const sorted = [...nsPerCall].sort((a, b) => a - b)
  return {
    calls,
    nsPerCall: sorted[Math.floor((sorted.length - 1) / 2)]!,
    bestNsPerCall: sorted[0]!,
    perSecond: (calls * 1000) / ms,
    rounds: nsPerCall.map(Math.round)
  }
}

const program = Effect.gen(function* () {
  yield* GrpcServer.register(fakeServer, { rateLimit: false })
  const update = yield* Effect.promise(() => measure("AffiliateUpdate"))
  const hello = yield* Effect.promise(() => measure("Hello"))
  return { update, hello }
}).pipe(
  Effect.scoped,
  Effect.provide(DiscoveryServer.layer({ gcInterval: "disabled" })),
  Effect.provide(
    process.argv.includes("--console-json")
      ? Layer.mergeAll(Logger.layer([Logger.consoleJson]), Layer.succeed(References.MinimumLogLevel, "Info"))
      : loggerLayer({ debug: false })
  )
)

const result = await Effect.runPromise(program)
process.stderr.write(`${JSON.stringify(result)}\n`)
