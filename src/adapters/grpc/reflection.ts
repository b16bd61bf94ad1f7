/**
 * gRPC server reflection (`grpc.reflection.v1` and `v1alpha`, from the
 * @grpc/reflection package), so tools such as grpcurl can list and call the
 * Cluster service without its proto files. The descriptors come from the
 * generated protobuf-es code, so they always match what the server speaks.
 * The package is loaded only when the service is used.
 *
 * @since 0.1.0
 */
import { toBinary } from "@bufbuild/protobuf"
import { FileDescriptorProtoSchema, file_google_protobuf_duration } from "@bufbuild/protobuf/wkt"
import type * as grpc from "@grpc/grpc-js"
import type { Scope } from "effect"
import { Effect } from "effect"
import { Cluster, file_discovery_server_cluster } from "../../gen/discovery/server/cluster_pb.ts"

type ReflectionModule = typeof import("@grpc/reflection")
type PackageDefinition = ConstructorParameters<ReflectionModule["ReflectionService"]>[0]

/**
 * The serialized FileDescriptorProtos of the Cluster service: its proto file
 * and the `google/protobuf/duration.proto` it imports.
 *
 * @category protocols
 * @since 0.1.0
 */
export const clusterFileDescriptorProtos = (): ReadonlyArray<Buffer> =>
  [file_discovery_server_cluster, file_google_protobuf_duration].map((file) =>
    Buffer.from(toBinary(FileDescriptorProtoSchema, file.proto))
  )

/**
 * Adds the reflection services to `server`, describing the Cluster service
 * and the files in `extraFileDescriptorProtos` (serialized
 * FileDescriptorProtos, e.g. the health service's). They are removed when the
 * scope closes. The server must not have a reflection service already.
 *
 * @category constructors
 * @since 0.1.0
 */
export const register = (
  server: grpc.Server,
  extraFileDescriptorProtos: ReadonlyArray<Uint8Array> = []
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { ReflectionService } = yield* Effect.promise(() => import("@grpc/reflection"))
    // ReflectionService reads only the `fileDescriptorProtos` of each entry of a proto-loader package definition.
    const definition = {
      [Cluster.typeName]: {
        format: "Protocol Buffer 3 DescriptorProto",
        type: {},
        fileDescriptorProtos: [
          ...clusterFileDescriptorProtos(),
          ...extraFileDescriptorProtos.map((bytes) => Buffer.from(bytes))
        ]
      }
    } as unknown as PackageDefinition
    const reflection = new ReflectionService(definition)
    const added: Array<grpc.ServiceDefinition> = []
    yield* Effect.acquireRelease(
      Effect.sync(() =>
        reflection.addToServer({
          addService: (service, implementation) => {
            server.addService(service, implementation)
            added.push(service)
          }
        })
      ),
      () =>
        Effect.sync(() => {
          for (const service of added) server.removeService(service)
        })
    )
  })
