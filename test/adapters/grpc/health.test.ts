import * as path from "node:path"
import * as grpc from "@grpc/grpc-js"
import * as protoLoader from "@grpc/proto-loader"
import { fromBinary } from "@bufbuild/protobuf"
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import * as GrpcServer from "../../../src/adapters/grpc/GrpcServer.ts"
import * as Health from "../../../src/adapters/grpc/health.ts"
import { TestDiscovery } from "../../../src/adapters/testing/index.ts"
import { endpoint, serverLayer } from "./fixtures.ts"

/** A client of `grpc.health.v1.Health` built by proto-loader from the proto file alone. */
interface HealthClient extends grpc.Client {
  Check(
    request: { readonly service: string },
    callback: (error: grpc.ServiceError | null, response?: { readonly status: string }) => void
  ): grpc.ClientUnaryCall
  Watch(request: { readonly service: string }): grpc.ClientReadableStream<{ readonly status: string }>
  List(
    request: object,
    callback: (
      error: grpc.ServiceError | null,
      response?: { readonly statuses: Record<string, { readonly status: string }> }
    ) => void
  ): grpc.ClientUnaryCall
}

const definition = protoLoader.loadSync("grpc/health/v1/health.proto", {
  includeDirs: [path.resolve(import.meta.dirname, "../../../proto")],
  enums: String,
  defaults: true
})
const Client = grpc.loadPackageDefinition(definition).grpc as unknown as {
  readonly health: { readonly v1: { readonly Health: grpc.ServiceClientConstructor } }
}

const healthClient = (target: string): Effect.Effect<HealthClient, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(
      () => new Client.health.v1.Health(target, grpc.credentials.createInsecure()) as unknown as HealthClient
    ),
    (client) => Effect.sync(() => client.close())
  )

const check = (client: HealthClient, service: string) =>
  Effect.callback<string, grpc.status>((resume) => {
    client.Check({ service }, (error, response) =>
      resume(error ? Effect.fail(error.code) : Effect.succeed(response!.status))
    )
  })

/**
 * Watches `service` on a server of its own, which starts shutting down once the first status arrived; gives the
 * statuses received and the code the stream ended with.
 */
const watchThroughShutdown = (service: string) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(
      GrpcServer.layer({ address: "127.0.0.1:0", shutdownTimeout: "10 seconds" }).pipe(
        Layer.provide(TestDiscovery.layer())
      ),
      scope
    )
    const client = yield* healthClient(`127.0.0.1:${Context.get(context, GrpcServer.GrpcServer).port}`)
    const statuses: Array<string> = []
    const code = yield* Effect.callback<grpc.status>((resume) => {
      const call = client.Watch({ service })
      call.on("data", (message: { readonly status: string }) => {
        statuses.push(message.status)
        if (statuses.length === 1) Effect.runFork(Scope.close(scope, Exit.void))
      })
      call.on("error", () => {})
      call.on("status", (status: grpc.StatusObject) => resume(Effect.succeed(status.code)))
    })
    return { statuses, code }
  })

describe("health", () => {
  it.effect("reports SERVING for the server and the Cluster service, NOT_FOUND for others", () =>
    Effect.gen(function* () {
      const client = yield* healthClient(yield* endpoint)
      assert.strictEqual(yield* check(client, ""), "SERVING")
      assert.strictEqual(yield* check(client, "sidero.discovery.server.Cluster"), "SERVING")
      assert.strictEqual(yield* Effect.flip(check(client, "other")), grpc.status.NOT_FOUND)
    }).pipe(Effect.provide(serverLayer()))
  )

  it.effect("tells watchers NOT_SERVING when shutdown begins, then ends their streams", () =>
    Effect.gen(function* () {
      const { statuses, code } = yield* watchThroughShutdown("")
      assert.deepStrictEqual(statuses, ["SERVING", "NOT_SERVING"])
      assert.strictEqual(code, grpc.status.OK)
    })
  )

  it.effect("tells watchers of an unknown service SERVICE_UNKNOWN and keeps their streams open until shutdown", () =>
    Effect.gen(function* () {
      const { statuses, code } = yield* watchThroughShutdown("other")
      assert.deepStrictEqual(statuses, ["SERVICE_UNKNOWN"])
      assert.strictEqual(code, grpc.status.OK)
    })
  )

  it.effect("lists the status of every service", () =>
    Effect.gen(function* () {
      const client = yield* healthClient(yield* endpoint)
      const statuses = yield* Effect.callback<Record<string, { readonly status: string }>, grpc.status>((resume) => {
        client.List({}, (error, response) =>
          resume(error ? Effect.fail(error.code) : Effect.succeed(response!.statuses))
        )
      })
      assert.deepStrictEqual(statuses, {
        "": { status: "SERVING" },
        "sidero.discovery.server.Cluster": { status: "SERVING" }
      })
    }).pipe(Effect.provide(serverLayer()))
  )

  it.effect("registers on any server that can add and remove services, and removes itself when the scope closes", () =>
    Effect.gen(function* () {
      const added: Array<string> = []
      const removed: Array<string> = []
      const paths = (service: grpc.ServiceDefinition) => Object.values(service).map((method) => method.path)
      const server = {
        addService: (service: grpc.ServiceDefinition) => void added.push(...paths(service)),
        removeService: (service: grpc.ServiceDefinition) => void removed.push(...paths(service))
      }
      const scope = yield* Scope.make()
      yield* Health.register(server, []).pipe(Scope.provide(scope))
      const expected = ["Check", "Watch", "List"].map((name) => `/grpc.health.v1.Health/${name}`)
      assert.deepStrictEqual([added, removed], [expected, []])
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(removed, expected)
    })
  )

  it.effect("describes its proto file for reflection", () =>
    Effect.gen(function* () {
      const [file, ...rest] = (yield* Health.fileDescriptorProtos).map((bytes) =>
        fromBinary(FileDescriptorProtoSchema, bytes)
      )
      assert.strictEqual(rest.length, 0)
      assert.deepStrictEqual(
        [file!.name, file!.package, file!.service.map((service) => service.name)],
        ["grpc/health/v1/health.proto", "grpc.health.v1", ["Health"]]
      )
    })
  )

  it.effect("is not served when turned off", () =>
    Effect.gen(function* () {
      const client = yield* healthClient(yield* endpoint)
      assert.strictEqual(yield* Effect.flip(check(client, "")), grpc.status.UNIMPLEMENTED)
    }).pipe(Effect.provide(serverLayer({}, { health: false })))
  )
})
