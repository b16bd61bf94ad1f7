/**
 * The gRPC adapters: the server that exposes any `ClusterApi` over the Talos
 * discovery protocol (with its rate limiter, request log and the failure log
 * that bounds it, metrics, TLS reload, health and reflection services, on its
 * own `node:http2` transport or on grpc-js), the client that implements
 * `ClusterApi` over it, and the wire pieces they share.
 *
 * @since 0.1.0
 */
export * as ClientAddress from "./clientAddress.ts"
export * as ClusterService from "./ClusterService.ts"
export * as Codec from "./codec.ts"
export * as FailureLog from "./failureLog.ts"
export * as GrpcClient from "./GrpcClient.ts"
export * as GrpcMetrics from "./metrics.ts"
export * as GrpcServer from "./GrpcServer.ts"
export * as GrpcStatus from "./status.ts"
export * as Health from "./health.ts"
export * as Http2Server from "./http2/Http2Server.ts"
export * as RateLimit from "./rateLimit.ts"
export * as Reflection from "./reflection.ts"
export * as Tls from "./tls.ts"
