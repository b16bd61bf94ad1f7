import * as path from "node:path"
import { fromBinary } from "@bufbuild/protobuf"
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt"
import * as grpc from "@grpc/grpc-js"
import * as protoLoader from "@grpc/proto-loader"
import { assert, describe, it } from "@effect/vitest"
import type { Scope } from "effect"
import { Effect } from "effect"
import type { GrpcServer } from "../../../src/adapters/grpc/GrpcServer.ts"
import { endpoint, serverLayer } from "./fixtures.ts"

const reflectionProto = path.resolve(import.meta.dirname, "../../../proto/grpc/reflection/v1/reflection.proto")

interface ReflectionResponse {
  readonly listServicesResponse?: { readonly service: ReadonlyArray<{ readonly name: string }> }
  readonly allExtensionNumbersResponse?: {
    readonly baseTypeName: string
    readonly extensionNumber: ReadonlyArray<number>
  }
  readonly fileDescriptorResponse?: { readonly fileDescriptorProto: ReadonlyArray<Buffer> }
  readonly errorResponse?: { readonly errorCode: number; readonly errorMessage: string }
}

type ReflectionRequest =
  | { readonly listServices: string }
  | { readonly fileContainingSymbol: string }
  | { readonly fileByFilename: string }
  | { readonly allExtensionNumbersOfType: string }

interface ReflectionClient extends grpc.Client {
  ServerReflectionInfo(): grpc.ClientDuplexStream<ReflectionRequest, ReflectionResponse>
}

const definition = protoLoader.loadSync(reflectionProto, { longs: String, enums: String, defaults: true, oneofs: true })
const v1 = definition["grpc.reflection.v1.ServerReflection"] as grpc.ServiceDefinition
/** The v1alpha service: the same messages under the older package name. */
const v1alpha: grpc.ServiceDefinition = {
  ServerReflectionInfo: {
    ...v1.ServerReflectionInfo!,
    path: "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
  }
}
const clients = {
  v1: grpc.makeGenericClientConstructor(v1, "ServerReflection"),
  v1alpha: grpc.makeGenericClientConstructor(v1alpha, "ServerReflection")
}

/** Sends one request on a new reflection stream and gives the one response. */
const ask = (
  request: ReflectionRequest,
  version: keyof typeof clients = "v1"
): Effect.Effect<ReflectionResponse, Error, Scope.Scope | GrpcServer> =>
  Effect.gen(function* () {
    const target = yield* endpoint
    const client = yield* Effect.acquireRelease(
      Effect.sync(() => new clients[version](target, grpc.credentials.createInsecure()) as unknown as ReflectionClient),
      (client) => Effect.sync(() => client.close())
    )
    return yield* Effect.callback<ReflectionResponse, Error>((resume) => {
      const call = client.ServerReflectionInfo()
      call.on("data", (response: ReflectionResponse) => {
        call.end()
        resume(Effect.succeed(response))
      })
      call.on("error", (error) => resume(Effect.fail(error)))
      call.write(request)
    })
  })

describe("reflection", () => {
  it.effect("lists the Cluster and health services", () =>
    Effect.gen(function* () {
      const response = yield* ask({ listServices: "*" })
      assert.deepStrictEqual(response.listServicesResponse?.service.map((service) => service.name).sort(), [
        "grpc.health.v1.Health",
        "sidero.discovery.server.Cluster"
      ])
    }).pipe(Effect.provide(serverLayer()))
  )

  it.effect("describes the Cluster service with its proto file and the Duration file it imports", () =>
    Effect.gen(function* () {
      const response = yield* ask({ fileContainingSymbol: "sidero.discovery.server.Cluster" })
      const files = (response.fileDescriptorResponse?.fileDescriptorProto ?? []).map((bytes) =>
        fromBinary(FileDescriptorProtoSchema, bytes)
      )
      assert.deepStrictEqual(
        files.map((file) => file.name),
        ["discovery/server/cluster.proto", "google/protobuf/duration.proto"]
      )
      const [cluster] = files
      assert.deepStrictEqual(cluster!.dependency, ["google/protobuf/duration.proto"])
      assert.deepStrictEqual(
        cluster!.service.flatMap((service) => service.method.map((method) => `${service.name}/${method.name}`)),
        ["Cluster/Hello", "Cluster/AffiliateUpdate", "Cluster/AffiliateDelete", "Cluster/List", "Cluster/Watch"]
      )
      const watch = cluster!.service[0]!.method[4]!
      assert.deepStrictEqual(
        [watch.inputType, watch.outputType, watch.serverStreaming],
        [".sidero.discovery.server.WatchRequest", ".sidero.discovery.server.WatchResponse", true]
      )
    }).pipe(Effect.provide(serverLayer()))
  )

  it.effect("answers on the v1alpha name too", () =>
    Effect.gen(function* () {
      const response = yield* ask({ listServices: "*" }, "v1alpha")
      assert.strictEqual(response.listServicesResponse?.service.length, 2)
    }).pipe(Effect.provide(serverLayer()))
  )

  it.effect("finds the file of a message, a method, a nested enum value and the health service", () =>
    Effect.gen(function* () {
      const fileNames = (symbol: string) =>
        Effect.map(ask({ fileContainingSymbol: symbol }), (response) =>
          (response.fileDescriptorResponse?.fileDescriptorProto ?? []).map(
            (bytes) => fromBinary(FileDescriptorProtoSchema, bytes).name
          )
        )
      const cluster = ["discovery/server/cluster.proto", "google/protobuf/duration.proto"]
      assert.deepStrictEqual(yield* fileNames("sidero.discovery.server.HelloRequest"), cluster)
      assert.deepStrictEqual(yield* fileNames("sidero.discovery.server.Cluster.Watch"), cluster)
      assert.deepStrictEqual(yield* fileNames("grpc.health.v1.Health"), ["grpc/health/v1/health.proto"])
      assert.deepStrictEqual(yield* fileNames("grpc.health.v1.HealthCheckResponse.SERVING"), [
        "grpc/health/v1/health.proto"
      ])
    }).pipe(Effect.provide(serverLayer()))
  )

  it.effect("finds a file by name, with the files it imports", () =>
    Effect.gen(function* () {
      const response = yield* ask({ fileByFilename: "discovery/server/cluster.proto" })
      assert.strictEqual(response.fileDescriptorResponse?.fileDescriptorProto.length, 2)
      const missing = yield* ask({ fileByFilename: "no/such.proto" })
      assert.strictEqual(missing.errorResponse?.errorCode, grpc.status.NOT_FOUND)
    }).pipe(Effect.provide(serverLayer()))
  )

  it.effect("lists no extension numbers for a known message and refuses an unknown one", () =>
    Effect.gen(function* () {
      const known = yield* ask({ allExtensionNumbersOfType: "sidero.discovery.server.HelloRequest" })
      assert.deepStrictEqual(known.allExtensionNumbersResponse, {
        baseTypeName: "sidero.discovery.server.HelloRequest",
        extensionNumber: []
      })
      const unknown = yield* ask({ allExtensionNumbersOfType: "no.such.Message" })
      assert.strictEqual(unknown.errorResponse?.errorCode, grpc.status.NOT_FOUND)
    }).pipe(Effect.provide(serverLayer()))
  )

  it.effect("answers NOT_FOUND for an unknown symbol", () =>
    Effect.gen(function* () {
      const response = yield* ask({ fileContainingSymbol: "no.such.Service" })
      assert.strictEqual(response.errorResponse?.errorCode, grpc.status.NOT_FOUND)
    }).pipe(Effect.provide(serverLayer()))
  )

  it.effect("is not served when turned off", () =>
    Effect.gen(function* () {
      const error = yield* Effect.flip(ask({ listServices: "*" }))
      assert.strictEqual((error as Error & { code?: number }).code, grpc.status.UNIMPLEMENTED)
    }).pipe(Effect.provide(serverLayer({}, { reflection: false })))
  )
})
