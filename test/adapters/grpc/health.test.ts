import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { service as healthService } from "grpc-health-check"
import * as GrpcServer from "../../../src/adapters/grpc/GrpcServer.ts"
import { TestDiscovery } from "../../../src/adapters/testing/index.ts"
import { endpoint, serverLayer } from "./fixtures.ts"

/** A client of `grpc.health.v1.Health` built from the package's own service definition. */
interface HealthClient extends grpc.Client {
  Check(
    request: { readonly service: string },
    callback: (error: grpc.ServiceError | null, response?: { readonly status: string }) => void
  ): grpc.ClientUnaryCall
  Watch(request: { readonly service: string }): grpc.ClientReadableStream<{ readonly status: string }>
}

const Client = grpc.makeGenericClientConstructor(healthService as unknown as grpc.ServiceDefinition, "Health")

const healthClient = (target: string): Effect.Effect<HealthClient, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.sync(() => new Client(target, grpc.credentials.createInsecure()) as unknown as HealthClient),
    (client) => Effect.sync(() => client.close())
  )

const check = (client: HealthClient, service: string) =>
  Effect.callback<string, grpc.status>((resume) => {
    client.Check({ service }, (error, response) =>
      resume(error ? Effect.fail(error.code) : Effect.succeed(response!.status))
    )
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
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(
        GrpcServer.layer({ address: "127.0.0.1:0", shutdownTimeout: "10 seconds" }).pipe(
          Layer.provide(TestDiscovery.layer())
        ),
        scope
      )
      const client = yield* healthClient(`127.0.0.1:${Context.get(context, GrpcServer.GrpcServer).port}`)
      const statuses: Array<string> = []
      const ended = yield* Effect.callback<grpc.status>((resume) => {
        const call = client.Watch({ service: "" })
        call.on("data", (message: { readonly status: string }) => {
          statuses.push(message.status)
          if (statuses.length === 1) Effect.runFork(Scope.close(scope, Exit.void))
        })
        call.on("error", () => {})
        call.on("status", (status: grpc.StatusObject) => resume(Effect.succeed(status.code)))
      })
      assert.deepStrictEqual(statuses, ["SERVING", "NOT_SERVING"])
      assert.strictEqual(ended, grpc.status.OK)
    })
  )

  it.effect("is not served when turned off", () =>
    Effect.gen(function* () {
      const client = yield* healthClient(yield* endpoint)
      assert.strictEqual(yield* Effect.flip(check(client, "")), grpc.status.UNIMPLEMENTED)
    }).pipe(Effect.provide(serverLayer({}, { health: false })))
  )
})
