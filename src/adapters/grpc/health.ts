/**
 * The standard gRPC health service (`grpc.health.v1.Health`), over the
 * messages generated from `proto/grpc/health/v1/health.proto`, so load
 * balancers and Kubernetes gRPC probes can ask whether the server serves:
 * SERVING for the whole server (`""`) and for each named service while
 * mounted, NOT_SERVING once shutdown begins. Check answers NOT_FOUND for an
 * unknown service, Watch sends SERVICE_UNKNOWN for it and stays open, as the
 * health-checking protocol says.
 *
 * @since 0.1.0
 */
import type { DescMessage, MessageShape } from "@bufbuild/protobuf"
import { create, toBinary } from "@bufbuild/protobuf"
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt"
import * as grpc from "@grpc/grpc-js"
import type { Scope } from "effect"
import { Effect } from "effect"
import { deserializer, serializer } from "./serializers.ts"
import type {
  HealthCheckRequest,
  HealthCheckResponse,
  HealthListRequest,
  HealthListResponse
} from "../../gen/grpc/health/v1/health_pb.ts"
import {
  file_grpc_health_v1_health,
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthCheckResponseSchema,
  HealthListRequestSchema,
  HealthListResponseSchema
} from "../../gen/grpc/health/v1/health_pb.ts"

/**
 * The name the health service is registered under.
 *
 * @category protocols
 * @since 0.1.0
 */
export const serviceName = "grpc.health.v1.Health"

/**
 * The serialized descriptor of the health service's proto file, for a
 * reflection service to describe it.
 *
 * @category protocols
 * @since 0.1.0
 */
export const fileDescriptorProtos: Effect.Effect<ReadonlyArray<Buffer>> = Effect.sync(() => [
  Buffer.from(toBinary(FileDescriptorProtoSchema, file_grpc_health_v1_health.proto))
])

/** List answers RESOURCE_EXHAUSTED beyond this many services (the limit of grpc-health-check, which this replaces). */
const listLimit = 100

const method = <I extends DescMessage, O extends DescMessage>(
  name: string,
  input: I,
  output: O,
  responseStream: boolean
): grpc.MethodDefinition<MessageShape<I>, MessageShape<O>> => ({
  path: `/${serviceName}/${name}`,
  requestStream: false,
  responseStream,
  requestSerialize: serializer(input),
  requestDeserialize: deserializer(input),
  responseSerialize: serializer(output),
  responseDeserialize: deserializer(output)
})

/**
 * The grpc-js service definition of `grpc.health.v1.Health`.
 *
 * @category protocols
 * @since 0.1.0
 */
export const definition = {
  Check: method("Check", HealthCheckRequestSchema, HealthCheckResponseSchema, false),
  Watch: method("Watch", HealthCheckRequestSchema, HealthCheckResponseSchema, true),
  List: method("List", HealthListRequestSchema, HealthListResponseSchema, false)
} satisfies grpc.ServiceDefinition

type WatchCall = grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>

const reply = (status: ServingStatus): HealthCheckResponse => create(HealthCheckResponseSchema, { status })

/** The statuses of `names` and the open Watch calls, with the handlers that serve them. */
const makeState = (names: ReadonlyArray<string>) => {
  const statuses = new Map<string, ServingStatus>(names.map((name) => [name, ServingStatus.SERVING]))
  const watches = new Set<WatchCall>()

  const handlers = {
    Check: (
      call: grpc.ServerUnaryCall<HealthCheckRequest, HealthCheckResponse>,
      callback: grpc.sendUnaryData<HealthCheckResponse>
    ) => {
      const service = call.request.service
      const status = statuses.get(service)
      if (status === undefined) {
        callback({ code: grpc.status.NOT_FOUND, details: `Health status unknown for service ${service}` })
      } else {
        callback(null, reply(status))
      }
    },
    Watch: (call: WatchCall) => {
      watches.add(call)
      call.on("close", () => watches.delete(call))
      call.write(reply(statuses.get(call.request.service) ?? ServingStatus.SERVICE_UNKNOWN))
    },
    List: (
      _call: grpc.ServerUnaryCall<HealthListRequest, HealthListResponse>,
      callback: grpc.sendUnaryData<HealthListResponse>
    ) => {
      if (statuses.size > listLimit) {
        callback({ code: grpc.status.RESOURCE_EXHAUSTED, details: "Too many services to list." })
        return
      }
      const entries = [...statuses].map(([name, status]) => [name, reply(status)] as const)
      callback(null, create(HealthListResponseSchema, { statuses: Object.fromEntries(entries) }))
    }
  }

  /** Every status turns NOT_SERVING; each open Watch call is told if it watches one of them, then ended. */
  const stop = () => {
    for (const name of statuses.keys()) statuses.set(name, ServingStatus.NOT_SERVING)
    for (const call of watches) {
      if (statuses.has(call.request.service)) call.write(reply(ServingStatus.NOT_SERVING))
      call.end()
    }
    watches.clear()
  }

  return { handlers, stop }
}

/**
 * Adds the health service to `server`, reporting SERVING for `""` and for
 * each name in `services`. When the scope closes, every status turns
 * NOT_SERVING (open Watch calls receive it and then end) and the service is
 * removed. The server must not have a health service already; any server
 * with grpc-js's `addService` and `removeService` will do.
 *
 * @category constructors
 * @since 0.1.0
 */
export const register = (
  server: Pick<grpc.Server, "addService" | "removeService">,
  services: ReadonlyArray<string>
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.asVoid(
    Effect.acquireRelease(
      Effect.sync(() => {
        const state = makeState(["", ...services])
        server.addService(definition, state.handlers)
        return state
      }),
      (state) =>
        Effect.sync(() => {
          state.stop()
          server.removeService(definition)
        })
    )
  )
