import * as http2 from "node:http2"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import { vi } from "vitest"
import { Context, Duration, Effect, Exit, Fiber, Layer, Metric, Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as GrpcClient from "../../../src/adapters/grpc/GrpcClient.ts"
import * as GrpcServer from "../../../src/adapters/grpc/GrpcServer.ts"
import { ServerCall } from "../../../src/adapters/grpc/http2/ServerCall.ts"
import {
  AffiliateUpdateRequestSchema,
  HelloRequestSchema,
  HelloResponseSchema,
  WatchRequestSchema
} from "../../../src/gen/discovery/server/cluster_pb.ts"
import { ClusterState } from "../../../src/core/server/ClusterState.ts"
import type { WatchEvent } from "../../../src/ports/ClusterApi.ts"
import { CallDeadline } from "../../../src/ports/CallDeadline.ts"
import { ClusterApi } from "../../../src/ports/ClusterApi.ts"
import { watchEndingsTotal } from "../../../src/core/server/changeReport.ts"
import type { WatchEndCause } from "../../../src/ports/ChangeCause.ts"
import {
  blob,
  captureLogs,
  connect,
  endpoint,
  failureOf,
  headers,
  type JsonLogLine,
  rawStream,
  rawUnary,
  realSleep,
  serverLayer as baseServerLayer,
  transports,
  waitUntil,
  watcher
} from "./fixtures.ts"

const service = "/sidero.discovery.server.Cluster"

const helloBytes = toBinary(HelloRequestSchema, create(HelloRequestSchema, { clusterId: "c", clientVersion: "v1" }))

const clientIpOf = (target: string, metadata: grpc.Metadata) =>
  Effect.map(rawUnary(target, `${service}/Hello`, helloBytes, metadata), (bytes) =>
    Buffer.from(fromBinary(HelloResponseSchema, bytes).clientIp).toString("hex")
  )

/** A `ClusterApi` whose watches send an empty snapshot and then nothing, and never end on their own. */
const silentApi = Layer.succeed(
  ClusterApi,
  ClusterApi.of({
    hello: () => Effect.succeed({}),
    affiliateUpdate: () => Effect.void,
    affiliateDelete: () => Effect.void,
    list: () => Effect.succeed([]),
    watch: () =>
      Stream.concat(Stream.succeed<WatchEvent>({ _tag: "Snapshot", revision: 0, affiliates: [] }), Stream.never)
  })
)

describe("GrpcServer.register", () => {
  it.effect("mounts on a server the application runs and unmounts with its scope", () =>
    Effect.gen(function* () {
      const server = new grpc.Server()
      yield* Effect.addFinalizer(() => Effect.sync(() => server.forceShutdown()))
      const port = yield* Effect.callback<number>((resume) => {
        server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (error, port) =>
          resume(error ? Effect.die(error) : Effect.succeed(port))
        )
      })
      const scope = yield* Scope.make()
      yield* GrpcServer.register(server).pipe(Scope.provide(scope))
      const api = yield* GrpcClient.make({ endpoint: `127.0.0.1:${port}`, tls: false })
      assert.deepStrictEqual(yield* api.list({ clusterId: "c" }), [])
      const watch = yield* watcher(api.watch({ clusterId: "c" }))
      yield* watch.next
      yield* Scope.close(scope, Exit.void)
      const error = failureOf(yield* Effect.exit(watch.next))
      assert.deepStrictEqual([error._tag, error.message], ["Unavailable", "server is shutting down"])
      const unmounted = failureOf(yield* Effect.exit(api.list({ clusterId: "c" })))
      assert.deepStrictEqual([unmounted._tag, "code" in unmounted && unmounted.code], ["RemoteFailure", 12])
    }).pipe(Effect.provide(silentApi))
  )
})

describe("GrpcServer.make", () => {
  it.effect("runs on the http2 transport unless told otherwise", () =>
    Effect.gen(function* () {
      const server = yield* GrpcServer.make({ address: "127.0.0.1:0", shutdownTimeout: "1 second" })
      assert.strictEqual(server.transport, "http2")
    }).pipe(Effect.provide(silentApi))
  )
})

for (const transport of transports) {
  describe(`GrpcServer over ${transport}`, () => {
    const serverLayer = (...[core, server]: Parameters<typeof baseServerLayer>) =>
      baseServerLayer(core, { transport, ...server })

    it.live("tells the ClusterApi the deadline of each call that has one", () => {
      const seen: Array<number> = []
      const recording = Layer.succeed(
        ClusterApi,
        ClusterApi.of({
          hello: () =>
            Effect.map(Effect.service(CallDeadline), (deadline) => {
              seen.push(deadline)
              return {}
            }),
          affiliateUpdate: () => Effect.void,
          affiliateDelete: () => Effect.void,
          list: () => Effect.succeed([]),
          watch: () => Stream.never
        })
      )
      return Effect.gen(function* () {
        const target = yield* endpoint
        const sent = Date.now()
        yield* rawUnary(target, `${service}/Hello`, helloBytes, new grpc.Metadata(), 5000)
        yield* rawUnary(target, `${service}/Hello`, helloBytes, new grpc.Metadata(), Number.POSITIVE_INFINITY)
        assert.strictEqual(seen.length, 2)
        assert.approximately(seen[0]!, sent + 5000, 1000)
        assert.strictEqual(seen[1], Number.POSITIVE_INFINITY)
      }).pipe(
        Effect.provide(
          GrpcServer.layer({ address: "127.0.0.1:0", transport, callDeadlines: true }).pipe(Layer.provide(recording))
        )
      )
    })

    it.effect("rejects IDs that are not valid UTF-8 with INVALID_ARGUMENT before the core sees them (Q20)", () =>
      Effect.gen(function* () {
        const target = yield* endpoint
        const badCluster = new Uint8Array([0x0a, 0x02, 0xff, 0xfe])
        const badAffiliate = new Uint8Array([0x0a, 0x01, 0x63, 0x12, 0x02, 0xc3, 0x28])
        const cases: ReadonlyArray<readonly [string, Uint8Array, string]> = [
          ["Hello", badCluster, "cluster ID is not valid UTF-8"],
          ["AffiliateUpdate", badCluster, "cluster ID is not valid UTF-8"],
          ["AffiliateUpdate", badAffiliate, "affiliate ID is not valid UTF-8"],
          ["AffiliateDelete", badAffiliate, "affiliate ID is not valid UTF-8"],
          ["List", badCluster, "cluster ID is not valid UTF-8"]
        ]
        for (const [method, request, details] of cases) {
          const status = failureOf(yield* Effect.exit(rawUnary(target, `${service}/${method}`, request)))
          assert.deepStrictEqual(status, { code: grpc.status.INVALID_ARGUMENT, details }, method)
        }
        const watch = yield* rawStream(target, `${service}/Watch`, badCluster)
        assert.deepStrictEqual(watch, {
          messages: [],
          status: { code: grpc.status.INVALID_ARGUMENT, details: "cluster ID is not valid UTF-8" }
        })
        const replacementCharacter = new Uint8Array([0x0a, 0x03, 0xef, 0xbf, 0xbd])
        yield* rawUnary(target, `${service}/List`, replacementCharacter)
      }).pipe(Effect.provide(serverLayer()))
    )

    it.effect("reports trusted X-Real-IP and X-Forwarded-For addresses in Hello (T41, T42)", () =>
      Effect.gen(function* () {
        const target = yield* endpoint
        assert.strictEqual(yield* clientIpOf(target, headers({ "x-real-ip": "1.2.3.4" })), "01020304")
        assert.strictEqual(
          yield* clientIpOf(target, headers({ "x-forwarded-for": "5.6.7.8,192.168.0.0.1" })),
          "05060708"
        )
        assert.strictEqual(yield* clientIpOf(target, headers({})), "7f000001")
      }).pipe(Effect.provide(serverLayer({}, { trustXRealIp: true, trustXForwardedFor: true })))
    )

    it.effect("ignores proxy headers unless told to trust them", () =>
      Effect.gen(function* () {
        const target = yield* endpoint
        const spoofed = headers({ "x-real-ip": "1.2.3.4", "x-forwarded-for": "5.6.7.8" })
        assert.strictEqual(yield* clientIpOf(target, spoofed), "7f000001")
      }).pipe(Effect.provide(serverLayer()))
    )

    if (transport === "http2") {
      it.effect("builds a call's metadata only when a proxy header is trusted", () =>
        Effect.gen(function* () {
          const built = vi.spyOn(ServerCall.prototype, "metadata", "get")
          yield* Effect.addFinalizer(() => Effect.sync(() => built.mockRestore()))
          const spoofed = headers({ "x-real-ip": "1.2.3.4" })
          const ignoring = yield* Layer.build(serverLayer())
          assert.strictEqual(yield* clientIpOf(yield* Effect.provide(endpoint, ignoring), spoofed), "7f000001")
          assert.strictEqual(built.mock.calls.length, 0)
          const trusting = yield* Layer.build(serverLayer({}, { trustXRealIp: true }))
          assert.strictEqual(yield* clientIpOf(yield* Effect.provide(endpoint, trusting), spoofed), "01020304")
          assert.strictEqual(built.mock.calls.length, 1)
        }).pipe(Effect.scoped)
      )
    }

    it.effect("counts a watch its client cancels as client gone, and one open when it stops as shutdown", () =>
      Effect.gen(function* () {
        const ended = (cause: WatchEndCause) =>
          Effect.map(Metric.value(Metric.withAttributes(watchEndingsTotal, { cause })), (state) => state.count)
        const before = [yield* ended("client_gone"), yield* ended("shutdown")]
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(serverLayer(), scope)
        const api = yield* connect().pipe(Effect.provide(context))
        const cancelled = yield* Effect.forkChild(Stream.runDrain(api.watch({ clusterId: "c" })))
        const open = yield* watcher(api.watch({ clusterId: "c" }))
        yield* open.next
        yield* Fiber.interrupt(cancelled)
        const counts = Effect.gen(function* () {
          return [(yield* ended("client_gone")) - before[0]!, (yield* ended("shutdown")) - before[1]!]
        })
        for (let i = 0; i < 100 && (yield* counts)[0] === 0; i++) yield* realSleep(20)
        assert.deepStrictEqual(yield* counts, [1, 0])
        yield* Scope.close(scope, Exit.void)
        assert.deepStrictEqual(yield* counts, [1, 1])
      })
    )

    it.effect("ends an open watch with UNAVAILABLE when it stops, then stops gracefully (Q17)", () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(
          GrpcServer.layer({ address: "127.0.0.1:0", transport, shutdownTimeout: "1 minute" }).pipe(
            Layer.provide(silentApi)
          ),
          scope
        )
        const { port } = Context.get(context, GrpcServer.GrpcServer)
        const api = yield* GrpcClient.make({ endpoint: `127.0.0.1:${port}`, tls: false })
        const watch = yield* watcher(api.watch({ clusterId: "c" }))
        assert.deepInclude(yield* watch.next, { _tag: "Snapshot", revision: 0, affiliates: [] })
        yield* Scope.close(scope, Exit.void)
        const error = failureOf(yield* Effect.exit(watch.next))
        assert.deepStrictEqual([error._tag, error.message], ["Unavailable", "server is shutting down"])
        const late = failureOf(yield* Effect.exit(api.hello({ clusterId: "c", clientVersion: "" })))
        assert.strictEqual(late._tag, "Unavailable")
      })
    )

    it.effect("fails with BindError when the address is taken", () =>
      Effect.gen(function* () {
        const taken = yield* endpoint
        const error = failureOf(
          yield* Effect.exit(
            Layer.build(GrpcServer.layer({ address: taken, transport }).pipe(Layer.provide(silentApi)))
          )
        )
        assert.deepStrictEqual(error._tag === "BindError" && error.address, taken)
        assert.strictEqual((yield* GrpcServer.GrpcServer).transport, transport)
      }).pipe(Effect.provide(serverLayer()))
    )

    it.effect("ends a Watch whose message the call cannot send, releasing its subscription", () =>
      Effect.gen(function* () {
        const core = yield* ClusterApi
        const state = yield* ClusterState
        const watch = yield* watcher((yield* connect()).watch({ clusterId: "c" }))
        assert.strictEqual((yield* watch.next)._tag, "Snapshot")
        assert.strictEqual((yield* state.stats).watches, 1)
        // Over the send limit: the call ends with RESOURCE_EXHAUSTED on its own.
        yield* core.affiliateUpdate({
          clusterId: "c",
          affiliateId: "a",
          data: blob(1024, 1),
          endpoints: [],
          ttl: Duration.minutes(1)
        })
        const error = failureOf(yield* Effect.exit(watch.next))
        assert.include(error.message, "larger than max")
        let watches = 1
        yield* waitUntil(() => {
          Effect.runFork(Effect.map(state.stats, (stats) => (watches = stats.watches)))
          return watches === 0
        }, "the subscription is released")
      }).pipe(Effect.provide(serverLayer({}, { channelOptions: { "grpc.max_send_message_length": 512 } })))
    )

    it.effect("keeps a reading watcher through a burst of changes made within one turn of the event loop", () =>
      Effect.gen(function* () {
        // Requests read in one poll phase make their changes in one turn; the call's buffer cannot drain before the
        // loop turns, which must not count as the client falling behind.
        const core = yield* ClusterApi
        const run = Effect.runForkWith(yield* Effect.context<never>())
        const watch = yield* watcher((yield* connect()).watch({ clusterId: "c" }))
        assert.strictEqual((yield* watch.next)._tag, "Snapshot")
        const count = 200
        const data = blob(2048, 7)
        for (let i = 0; i < count; i++) {
          setImmediate(() =>
            run(
              core.affiliateUpdate({
                clusterId: "c",
                affiliateId: `a${i}`,
                data,
                endpoints: [],
                ttl: Duration.minutes(1)
              })
            )
          )
        }
        const events = yield* watch.take(count)
        assert.deepStrictEqual(
          events.map((event) => event._tag === "Updated" && event.affiliate.id),
          Array.from({ length: count }, (_, i) => `a${i}`)
        )
      }).pipe(Effect.provide(serverLayer()))
    )

    it.effect("cuts off a watcher that stops reading with ABORTED while another keeps up", () =>
      Effect.gen(function* () {
        const core = yield* ClusterApi
        const fast = yield* watcher((yield* connect()).watch({ clusterId: "c" }))
        const slow = yield* watcher((yield* connect()).watch({ clusterId: "c" }))
        assert.strictEqual((yield* fast.next)._tag, "Snapshot")
        assert.strictEqual((yield* slow.next)._tag, "Snapshot")

        const updates = 400
        for (let i = 0; i < updates; i++) {
          const data = blob(2048, 0)
          data[0] = i & 0xff
          data[1] = i >> 8
          yield* core.affiliateUpdate({
            clusterId: "c",
            affiliateId: "af",
            data,
            endpoints: [],
            ttl: Duration.minutes(1)
          })
          const event = yield* fast.next
          assert.isTrue(
            event._tag === "Updated" && event.affiliate.data[0] === (i & 0xff) && event.affiliate.data[1] === i >> 8
          )
        }

        let received = 0
        let cutOff = yield* Effect.exit(slow.next)
        while (Exit.isSuccess(cutOff) && ++received < updates) cutOff = yield* Effect.exit(slow.next)
        const error = failureOf(cutOff)
        assert.deepStrictEqual([error._tag, error.message], ["SubscriptionLost", "subscription canceled: lost update"])
        assert.isTrue(received >= 32 && received < updates, `the slow watcher got ${received} updates before the cut`)
      }).pipe(Effect.provide(serverLayer()))
    )

    if (transport === "grpc-js") {
      it.live(
        "keeps a watch open while the client pings far more often than every 10 s (grpc-js enforces nothing)",
        () =>
          Effect.gen(function* () {
            const core = yield* ClusterApi
            const api = yield* connect({ keepaliveTime: "100 millis" })
            const watch = yield* watcher(api.watch({ clusterId: "k" }))
            assert.strictEqual((yield* watch.next)._tag, "Snapshot")
            yield* realSleep(1000)
            yield* core.affiliateUpdate({ clusterId: "k", affiliateId: "a", endpoints: [], ttl: Duration.minutes(1) })
            assert.strictEqual((yield* watch.next)._tag, "Updated")
          }).pipe(Effect.provide(serverLayer()))
      )
    } else {
      it.live("keeps a client that pings after each DATA frame it reads, as grpc-go's flow control does", () =>
        Effect.gen(function* () {
          const core = yield* ClusterApi
          for (let a = 0; a < 500; a++) {
            yield* core.affiliateUpdate({
              clusterId: "big",
              affiliateId: `n${a}`,
              data: blob(2000, a % 256),
              endpoints: [],
              ttl: Duration.minutes(10)
            })
          }
          const target = yield* endpoint
          const outcome = yield* Effect.promise(
            () =>
              new Promise<{ readonly bytes: number; readonly pings: number; readonly goaway: number | undefined }>(
                (resolve) => {
                  const session = http2.connect(`http://${target}`)
                  session.on("error", () => {})
                  let outstanding = false
                  let pings = 0
                  let bytes = 0
                  let goaway: number | undefined
                  const done = () => {
                    session.destroy()
                    resolve({ bytes, pings, goaway })
                  }
                  session.on("goaway", (code) => {
                    goaway = code
                    done()
                  })
                  const stream = session.request({
                    ":method": "POST",
                    ":path": `${service}/Watch`,
                    "content-type": "application/grpc",
                    te: "trailers"
                  })
                  stream.on("error", () => {})
                  stream.on("data", (chunk: Buffer) => {
                    bytes += chunk.length
                    if (bytes >= 500 * 2000) done()
                    else if (!outstanding && !session.destroyed) {
                      outstanding = true
                      pings++
                      session.ping(() => {
                        outstanding = false
                      })
                    }
                  })
                  const request = toBinary(WatchRequestSchema, create(WatchRequestSchema, { clusterId: "big" }))
                  const framed = Buffer.alloc(5 + request.length)
                  framed.writeUInt32BE(request.length, 1)
                  framed.set(request, 5)
                  stream.end(framed)
                }
              )
          )
          assert.isUndefined(outcome.goaway, `GOAWAY after ${outcome.pings} pings and ${outcome.bytes} bytes`)
          assert.isAbove(outcome.pings, 3, "the client pinged more than the policy tolerates without data between")
        }).pipe(Effect.provide(serverLayer()))
      )

      it.live("sends away a client that pings far more often than every 10 s, ending its watch", () =>
        Effect.gen(function* () {
          const api = yield* connect({ keepaliveTime: "100 millis" })
          const watch = yield* watcher(api.watch({ clusterId: "k" }))
          assert.strictEqual((yield* watch.next)._tag, "Snapshot")
          const ended = failureOf(yield* Effect.exit(watch.next))
          // grpc-js reads the GOAWAY's ENHANCE_YOUR_CALM as RESOURCE_EXHAUSTED.
          assert.strictEqual(ended._tag, "ResourceExhausted")
        }).pipe(Effect.provide(serverLayer()))
      )
    }

    describe("rate limiting", () => {
      const exceeded = { code: grpc.status.RESOURCE_EXHAUSTED, details: "rate limit exceeds request timeout" }
      const hello = (target: string, metadata: grpc.Metadata) =>
        Effect.asVoid(rawUnary(target, `${service}/Hello`, helloBytes, metadata, 1000))
      const trusting = { trustXRealIp: true, trustXForwardedFor: true }

      it.effect("lets 60 calls through per address at 1/s and refuses the 61st within a 1 s deadline (T55)", () =>
        Effect.gen(function* () {
          const target = yield* endpoint
          for (const client of [{ "x-real-ip": "1.2.3.4" }, { "x-forwarded-for": "5.6.7.8" }]) {
            for (let i = 0; i < 60; i++) yield* hello(target, headers(client))
            assert.deepStrictEqual(failureOf(yield* Effect.exit(hello(target, headers(client)))), exceeded)
          }
          // An IPv4-mapped IPv6 address is the same client as the IPv4 address (Q10).
          const mapped = yield* Effect.exit(hello(target, headers({ "x-real-ip": "::ffff:1.2.3.4" })))
          assert.deepStrictEqual(failureOf(mapped), exceeded)
          yield* hello(target, headers({}))
        }).pipe(Effect.provide(serverLayer({}, { ...trusting, rateLimit: { rate: 1, burst: 60 } })))
      )

      it.effect("charges a Watch once at open, and bounds its wait by maxWait as it has no deadline", () =>
        Effect.gen(function* () {
          const api = yield* connect()
          yield* api.list({ clusterId: "c" })
          const refused = failureOf(
            yield* Effect.exit(watcher(api.watch({ clusterId: "c" })).pipe(Effect.flatMap((w) => w.next)))
          )
          assert.deepStrictEqual(
            [refused._tag, refused.message],
            ["ResourceExhausted", "rate limit exceeds request timeout"]
          )
        }).pipe(Effect.provide(serverLayer({}, { rateLimit: { rate: 1, burst: 1, maxWait: "500 millis" } })))
      )

      it.effect("lets a Watch without a deadline wait for its token", () =>
        Effect.gen(function* () {
          const api = yield* connect()
          yield* api.list({ clusterId: "c" })
          const watch = yield* watcher(api.watch({ clusterId: "c" }))
          const first = yield* Effect.forkChild(watch.next)
          yield* realSleep(100)
          assert.isUndefined(first.pollUnsafe())
          yield* TestClock.adjust("1 second")
          assert.strictEqual((yield* Fiber.join(first))._tag, "Snapshot")
        }).pipe(Effect.provide(serverLayer({}, { rateLimit: { rate: 1, burst: 1 } })))
      )

      it.effect("gives the token of a call cancelled while waiting back", () => {
        const { lines, layer } = captureLogs()
        return Effect.gen(function* () {
          const target = yield* endpoint
          const list = (deadline: number) =>
            rawUnary(target, `${service}/List`, helloBytes.subarray(0, 3), new grpc.Metadata(), deadline)
          yield* list(1000)
          const waiting = yield* Effect.forkChild(list(5000))
          yield* realSleep(200)
          yield* Fiber.interrupt(waiting)
          yield* waitUntil(() => lines.some((line) => line.annotations.code === "Canceled"), "the cancel is logged")
          yield* TestClock.adjust("1 second")
          yield* list(500)
        }).pipe(Effect.provide(serverLayer({}, { rateLimit: { rate: 1, burst: 1 } })), Effect.provide(layer))
      })

      it.effect("does not limit when turned off", () =>
        Effect.gen(function* () {
          const api = yield* connect({ callTimeout: "1 second" })
          for (let i = 0; i < 70; i++) yield* api.list({ clusterId: "c" })
        }).pipe(Effect.provide(serverLayer({}, { rateLimit: false })))
      )
    })

    describe("request log", () => {
      const annotated = (lines: ReadonlyArray<JsonLogLine>, method: string) =>
        lines
          .filter((line) => line.message === `${service}/${method}`)
          .map(({ message, level, annotations }) => ({ message, level, annotations }))

      it.effect("logs one JSON line per call with the method, peer, code, duration and request IDs", () => {
        const { lines, layer } = captureLogs()
        return Effect.gen(function* () {
          const target = yield* endpoint
          yield* rawUnary(target, `${service}/Hello`, helloBytes, headers({ "x-real-ip": "1.2.3.4" }))
          const secret = blob(48, 0x5a)
          const update = toBinary(
            AffiliateUpdateRequestSchema,
            create(AffiliateUpdateRequestSchema, { clusterId: "c", affiliateId: "", affiliateData: secret })
          )
          yield* Effect.exit(rawUnary(target, `${service}/AffiliateUpdate`, update))
          assert.deepStrictEqual(annotated(lines, "Hello"), [
            {
              message: `${service}/Hello`,
              level: "INFO",
              annotations: {
                "peer.address": "1.2.3.4",
                code: "OK",
                duration: 0,
                cluster_id: "c",
                client_version: "v1"
              }
            }
          ])
          const failed = annotated(lines, "AffiliateUpdate")
          assert.strictEqual(failed.length, 1)
          assert.strictEqual(failed[0]!.level, "ERROR")
          assert.deepStrictEqual(failed[0]!.annotations, {
            "peer.address": "127.0.0.1",
            code: "InvalidArgument",
            duration: 0,
            cluster_id: "c",
            affiliate_id: "",
            error: "affiliate ID can't be empty"
          })
          const text = JSON.stringify(lines)
          assert.notInclude(text, Buffer.from(secret).toString("base64").slice(0, 16))
          assert.notInclude(text, "90,90,90")
        }).pipe(Effect.provide(serverLayer({}, { trustXRealIp: true })), Effect.provide(layer))
      })

      it.effect("logs a Watch when it ends, with OK when the client cancelled it", () => {
        const { lines, layer } = captureLogs()
        return Effect.gen(function* () {
          const scope = yield* Scope.make()
          const api = yield* connect().pipe(Scope.provide(scope))
          const watch = yield* watcher(api.watch({ clusterId: "w" })).pipe(Scope.provide(scope))
          yield* watch.next
          assert.deepStrictEqual(annotated(lines, "Watch"), [])
          yield* Scope.close(scope, Exit.void)
          yield* waitUntil(() => annotated(lines, "Watch").length === 1, "the watch is logged")
          const [line] = annotated(lines, "Watch")
          assert.deepStrictEqual(
            [line!.level, line!.annotations.code, line!.annotations.cluster_id],
            ["INFO", "OK", "w"]
          )
          assert.notProperty(line!.annotations, "error")
        }).pipe(Effect.provide(serverLayer()), Effect.provide(layer))
      })

      it.effect("cuts long IDs in log lines at 256 characters", () => {
        const { lines, layer } = captureLogs()
        return Effect.gen(function* () {
          const target = yield* endpoint
          const long = "x".repeat(5000)
          const bytes = toBinary(
            HelloRequestSchema,
            create(HelloRequestSchema, { clusterId: long, clientVersion: long })
          )
          yield* Effect.exit(rawUnary(target, `${service}/Hello`, bytes))
          const [line] = annotated(lines, "Hello")
          assert.strictEqual(line!.annotations.cluster_id, `${"x".repeat(256)}…(5000 characters)`)
          assert.strictEqual(line!.annotations.client_version, `${"x".repeat(256)}…(5000 characters)`)
          assert.strictEqual(line!.annotations.code, "InvalidArgument")
        }).pipe(Effect.provide(serverLayer()), Effect.provide(layer))
      })

      it.effect("logs calls the rate limiter refuses", () => {
        const { lines, layer } = captureLogs()
        return Effect.gen(function* () {
          const target = yield* endpoint
          yield* rawUnary(target, `${service}/Hello`, helloBytes)
          yield* Effect.exit(rawUnary(target, `${service}/Hello`, helloBytes, new grpc.Metadata(), 500))
          assert.deepStrictEqual(
            annotated(lines, "Hello").map((line) => [line.level, line.annotations.code, line.annotations.error]),
            [
              ["INFO", "OK", undefined],
              ["ERROR", "ResourceExhausted", "rate limit exceeds request timeout"]
            ]
          )
        }).pipe(Effect.provide(serverLayer({}, { rateLimit: { rate: 1, burst: 1 } })), Effect.provide(layer))
      })

      it.effect("logs nothing when turned off", () => {
        const { lines, layer } = captureLogs()
        return Effect.gen(function* () {
          yield* rawUnary(yield* endpoint, `${service}/Hello`, helloBytes)
          assert.deepStrictEqual(lines, [])
        }).pipe(Effect.provide(serverLayer({}, { requestLog: false })), Effect.provide(layer))
      })
    })
  })
}
