/**
 * gRPC server reflection (`grpc.reflection.v1` and `v1alpha`), so tools such
 * as grpcurl can list and call the Cluster service without its proto files.
 * It answers from serialized FileDescriptorProtos: the Cluster service's,
 * taken from the generated protobuf-es code so they always match what the
 * server speaks, and any others given. They are indexed at the first request,
 * so registering costs nothing at start.
 *
 * @since 0.1.0
 */
import type { MessageInitShape } from "@bufbuild/protobuf"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import type { DescriptorProto, EnumDescriptorProto, FileDescriptorProto } from "@bufbuild/protobuf/wkt"
import { FileDescriptorProtoSchema, file_google_protobuf_duration } from "@bufbuild/protobuf/wkt"
import * as grpc from "@grpc/grpc-js"
import type { Scope } from "effect"
import { Effect } from "effect"
import { deserializer, serializer } from "./serializers.ts"
import { file_discovery_server_cluster } from "../../gen/discovery/server/cluster_pb.ts"
import type { ServerReflectionRequest, ServerReflectionResponse } from "../../gen/grpc/reflection/v1/reflection_pb.ts"
import {
  ServerReflectionRequestSchema,
  ServerReflectionResponseSchema
} from "../../gen/grpc/reflection/v1/reflection_pb.ts"

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

/** The files to describe, by name, with what reflection looks up in them. */
interface Index {
  readonly files: ReadonlyMap<string, { readonly proto: FileDescriptorProto; readonly bytes: Uint8Array }>
  /** Fully qualified names of messages, fields, enums, services, methods, … → the file declaring them. */
  readonly symbols: ReadonlyMap<string, string>
  /** Extended message → extension field number → the file declaring the extension. */
  readonly extensions: ReadonlyMap<string, ReadonlyMap<number, string>>
  readonly services: ReadonlyArray<string>
}

/** Indexes the files; the first file of a name wins. */
const makeIndex = (serialized: ReadonlyArray<Uint8Array>): Index => {
  const files = new Map<string, { readonly proto: FileDescriptorProto; readonly bytes: Uint8Array }>()
  const symbols = new Map<string, string>()
  const extensions = new Map<string, Map<number, string>>()
  const services: Array<string> = []
  for (const bytes of serialized) {
    const proto = fromBinary(FileDescriptorProtoSchema, bytes)
    if (files.has(proto.name)) continue
    files.set(proto.name, { proto, bytes })
    const add = (name: string) => symbols.set(name, proto.name)
    const scoped = (scope: string, name: string) => (scope === "" ? name : `${scope}.${name}`)
    const addExtensions = (scope: string, fields: DescriptorProto["extension"]) => {
      for (const field of fields) {
        add(scoped(scope, field.name))
        const extendee = field.extendee.replace(/^\./, "")
        extensions.set(extendee, (extensions.get(extendee) ?? new Map()).set(field.number, proto.name))
      }
    }
    // Enum values are siblings of their enum, as in protobuf's own scoping.
    const addEnum = (scope: string, type: EnumDescriptorProto) => {
      add(scoped(scope, type.name))
      for (const value of type.value) add(scoped(scope, value.name))
    }
    const addMessage = (scope: string, type: DescriptorProto) => {
      const name = scoped(scope, type.name)
      add(name)
      for (const field of type.field) add(`${name}.${field.name}`)
      for (const oneof of type.oneofDecl) add(`${name}.${oneof.name}`)
      for (const nested of type.nestedType) addMessage(name, nested)
      for (const nested of type.enumType) addEnum(name, nested)
      addExtensions(name, type.extension)
    }
    for (const type of proto.messageType) addMessage(proto.package, type)
    for (const type of proto.enumType) addEnum(proto.package, type)
    addExtensions(proto.package, proto.extension)
    for (const service of proto.service) {
      const name = scoped(proto.package, service.name)
      add(name)
      services.push(name)
      for (const method of service.method) add(`${name}.${method.name}`)
    }
  }
  return { files, symbols, extensions, services }
}

type Answer = NonNullable<MessageInitShape<typeof ServerReflectionResponseSchema>["messageResponse"]>

const failure = (code: grpc.status, message: string): Answer => ({
  case: "errorResponse",
  value: { errorCode: code, errorMessage: message }
})

/** The file named `name` and every file it imports, directly or not, that the index has. */
const withImports = (index: Index, name: string | undefined, notFound: string): Answer => {
  if (name === undefined || !index.files.has(name)) return failure(grpc.status.NOT_FOUND, notFound)
  const names = [name]
  for (let i = 0; i < names.length; i++) {
    for (const dependency of index.files.get(names[i]!)!.proto.dependency) {
      if (index.files.has(dependency) && !names.includes(dependency)) names.push(dependency)
    }
  }
  return { case: "fileDescriptorResponse", value: { fileDescriptorProto: names.map((n) => index.files.get(n)!.bytes) } }
}

const answer = (index: Index, request: ServerReflectionRequest["messageRequest"]): Answer => {
  switch (request.case) {
    case "listServices":
      return { case: "listServicesResponse", value: { service: index.services.map((name) => ({ name })) } }
    case "fileByFilename":
      return withImports(index, request.value, `Proto file not found: ${request.value}`)
    case "fileContainingSymbol":
      return withImports(index, index.symbols.get(request.value), `Symbol not found: ${request.value}`)
    case "fileContainingExtension": {
      const { containingType, extensionNumber } = request.value
      return withImports(
        index,
        index.extensions.get(containingType)?.get(extensionNumber),
        `Extension not found for symbol ${containingType} at field ${extensionNumber}`
      )
    }
    case "allExtensionNumbersOfType": {
      const numbers = index.extensions.get(request.value)
      if (numbers === undefined && !index.symbols.has(request.value)) {
        return failure(grpc.status.NOT_FOUND, `Type not found: ${request.value}`)
      }
      return {
        case: "allExtensionNumbersResponse",
        value: { baseTypeName: request.value, extensionNumber: [...(numbers?.keys() ?? [])] }
      }
    }
    case undefined:
      return failure(grpc.status.INVALID_ARGUMENT, "The request names no message_request")
  }
}

/** v1 and v1alpha have the same messages, field for field, so the v1 code reads and writes both. */
const definition = (version: "v1" | "v1alpha") => ({
  ServerReflectionInfo: {
    path: `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
    requestStream: true,
    responseStream: true,
    requestSerialize: serializer(ServerReflectionRequestSchema),
    requestDeserialize: deserializer(ServerReflectionRequestSchema),
    responseSerialize: serializer(ServerReflectionResponseSchema),
    responseDeserialize: deserializer(ServerReflectionResponseSchema)
  }
})

/**
 * The grpc-js service definitions of `grpc.reflection.v1.ServerReflection`
 * and of its older name, `grpc.reflection.v1alpha.ServerReflection`.
 *
 * @category protocols
 * @since 0.1.0
 */
export const definitions = [
  definition("v1"),
  definition("v1alpha")
] as const satisfies ReadonlyArray<grpc.ServiceDefinition>

/**
 * Adds the reflection services to `server`, describing the Cluster service
 * and the files in `extraFileDescriptorProtos` (serialized
 * FileDescriptorProtos, e.g. the health service's). They are removed when the
 * scope closes. The server must not have a reflection service already; any
 * server with grpc-js's `addService` and `removeService` will do.
 *
 * @category constructors
 * @since 0.1.0
 */
export const register = (
  server: Pick<grpc.Server, "addService" | "removeService">,
  extraFileDescriptorProtos: ReadonlyArray<Uint8Array> = []
): Effect.Effect<void, never, Scope.Scope> => {
  const extra = [...extraFileDescriptorProtos]
  let index: Index | undefined
  const indexed = () => (index ??= makeIndex([...clusterFileDescriptorProtos(), ...extra]))
  const info = (call: grpc.ServerDuplexStream<ServerReflectionRequest, ServerReflectionResponse>) => {
    call.on("data", (request: ServerReflectionRequest) =>
      call.write(
        create(ServerReflectionResponseSchema, {
          validHost: request.host,
          originalRequest: request,
          messageResponse: answer(indexed(), request.messageRequest)
        })
      )
    )
    call.on("end", () => call.end())
  }
  return Effect.acquireRelease(
    Effect.sync(() => {
      for (const service of definitions) server.addService(service, { ServerReflectionInfo: info })
    }),
    () =>
      Effect.sync(() => {
        for (const service of definitions) server.removeService(service)
      })
  )
}
