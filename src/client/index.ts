/**
 * The discovery client: the transport-free core (re-exported here, as it
 * needs `node:crypto`, which the root entry avoids), the client over gRPC as
 * an Effect layer, and a Promise/EventEmitter facade for applications that do
 * not use Effect.
 *
 * @since 0.1.0
 */
export * from "../core/client/index.ts"
export * as GrpcDiscoveryClient from "./GrpcDiscoveryClient.ts"
export * from "./PromiseClient.ts"
