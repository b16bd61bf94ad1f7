/**
 * The embeddable discovery service: ports and the transport-free core. The
 * gRPC adapters live on the `./grpc` subpath, so this entry needs no gRPC.
 *
 * @since 0.1.0
 */
export * from "./core/server/index.ts"
export * from "./ports/index.ts"
