import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Exit, Layer, Scope, Stream } from "effect"
import * as GrpcClient from "../../../src/adapters/grpc/GrpcClient.ts"
import * as GrpcServer from "../../../src/adapters/grpc/GrpcServer.ts"
import { HelloRequestSchema, HelloResponseSchema } from "../../../src/gen/discovery/server/cluster_pb.ts"
import type { WatchEvent } from "../../../src/ports/ClusterApi.ts"
import { ClusterApi } from "../../../src/ports/ClusterApi.ts"
import { blob, connect, failureOf, endpoint, rawStream, rawUnary, serverLayer, watcher } from "./fixtures.ts"

const service = "/sidero.discovery.server.Cluster"

const helloBytes = toBinary(HelloRequestSchema, create(HelloRequestSchema, { clusterId: "c", clientVersion: "v1" }))

const clientIpOf = (target: string, metadata: grpc.Metadata) =>
  Effect.map(rawUnary(target, `${service}/Hello`, helloBytes, metadata), (bytes) =>
    Buffer.from(fromBinary(HelloResponseSchema, bytes).clientIp).toString("hex")
  )

const headers = (entries: Record<string, string>): grpc.Metadata => {
  const metadata = new grpc.Metadata()
  for (const [key, value] of Object.entries(entries)) metadata.add(key, value)
  return metadata
}

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

describe("GrpcServer", () => {
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
      assert.strictEqual(yield* clientIpOf(target, headers({ "x-forwarded-for": "5.6.7.8,192.168.0.0.1" })), "05060708")
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

  it.effect("ends an open watch with UNAVAILABLE when it stops, then stops gracefully (Q17)", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        GrpcServer.layer({ address: "127.0.0.1:0", shutdownTimeout: "1 minute" }).pipe(Layer.provide(silentApi)),
        scope
      )
      const { port } = Context.get(context, GrpcServer.GrpcServer)
      const api = yield* GrpcClient.make({ endpoint: `127.0.0.1:${port}`, tls: false })
      const watch = yield* watcher(api.watch({ clusterId: "c" }))
      assert.deepStrictEqual(yield* watch.next, { _tag: "Snapshot", revision: 0, affiliates: [] })
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
        yield* Effect.exit(Layer.build(GrpcServer.layer({ address: taken }).pipe(Layer.provide(silentApi))))
      )
      assert.strictEqual(error._tag, "BindError")
      assert.strictEqual(error.address, taken)
    }).pipe(Effect.provide(serverLayer()))
  )

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
})
