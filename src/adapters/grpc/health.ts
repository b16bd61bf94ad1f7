/**
 * The standard gRPC health service (`grpc.health.v1.Health`, from the
 * grpc-health-check package), so load balancers and Kubernetes gRPC probes
 * can ask whether the server serves: SERVING for the whole server (`""`) and
 * for each named service while mounted, NOT_SERVING once shutdown begins.
 * The package is loaded only when the service is used.
 *
 * @since 0.1.0
 */
import type * as grpc from "@grpc/grpc-js"
import type { Scope } from "effect"
import { Effect } from "effect"

type HealthModule = typeof import("grpc-health-check")
type HealthServer = Parameters<InstanceType<HealthModule["HealthImplementation"]>["addToServer"]>[0]
type Implementation = Parameters<HealthServer["addService"]>[1]
type WatchCall = grpc.ServerWritableStream<unknown, unknown>

const loadModule: Effect.Effect<HealthModule> = Effect.promise(() => import("grpc-health-check"))

/**
 * The name the health service is registered under.
 *
 * @category protocols
 * @since 0.1.0
 */
export const serviceName = "grpc.health.v1.Health"

/**
 * The serialized descriptors of the health service's proto files, for a
 * reflection service to describe it.
 *
 * @category protocols
 * @since 0.1.0
 */
export const fileDescriptorProtos: Effect.Effect<ReadonlyArray<Buffer>> = Effect.map(loadModule, ({ service }) => {
  const check = service.Check
  return check === undefined ? [] : check.requestType.fileDescriptorProtos
})

/**
 * Adds the health service to `server`, reporting SERVING for `""` and for
 * each name in `services`. When the scope closes, every status turns
 * NOT_SERVING (open Watch calls receive it and then end) and the service is
 * removed. The server must not have a health service already.
 *
 * @category constructors
 * @since 0.1.0
 */
export const register = (
  server: grpc.Server,
  services: ReadonlyArray<string>
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { HealthImplementation, service } = yield* loadModule
    const names = ["", ...services]
    const health = new HealthImplementation(Object.fromEntries(names.map((name) => [name, "SERVING" as const])))
    const watches = new Set<WatchCall>()
    const track = (implementation: Implementation): grpc.UntypedServiceImplementation => {
      const watch = implementation.watch as unknown as grpc.handleServerStreamingCall<unknown, unknown>
      return {
        ...(implementation as unknown as grpc.UntypedServiceImplementation),
        watch: (call: WatchCall) => {
          watches.add(call)
          call.on("close", () => watches.delete(call))
          watch(call)
        }
      }
    }
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        health.addToServer({
          addService: (definition, implementation) =>
            server.addService(definition as unknown as grpc.ServiceDefinition, track(implementation))
        })
      ),
      () =>
        Effect.sync(() => {
          for (const name of names) health.setStatus(name, "NOT_SERVING")
          for (const call of watches) call.end()
          watches.clear()
          server.removeService(service as unknown as grpc.ServiceDefinition)
        })
    )
  })
