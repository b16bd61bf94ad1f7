/**
 * The discovery client over gRPC: the client core joined with the gRPC client
 * transport. A new channel is opened for each endpoint the client goes to
 * (the configured one, then any redirect), with keepalive pings every
 * `max(10 s, TTL/10)` as the Go client sends them.
 *
 * @since 0.1.0
 */
import type * as grpc from "@grpc/grpc-js"
import type { Duration } from "effect"
import { Layer } from "effect"
import { ClusterConnector } from "../core/client/ClusterConnector.ts"
import * as DiscoveryClient from "../core/client/DiscoveryClient.ts"
import * as GrpcClient from "../adapters/grpc/GrpcClient.ts"

/**
 * How the channels are made.
 *
 * @category models
 * @since 0.1.0
 */
export interface TransportOptions {
  /** TLS with system roots (true, the default), plaintext h2c (false), or explicit credentials. */
  readonly tls?: boolean | grpc.ChannelCredentials | undefined
  /** Extra grpc-js channel options, applied over the defaults. */
  readonly channelOptions?: grpc.ChannelOptions | undefined
}

/**
 * Client options plus transport options.
 *
 * @category models
 * @since 0.1.0
 */
export interface GrpcClientOptions extends DiscoveryClient.ClientOptions, TransportOptions {}

/**
 * A connector that opens a gRPC channel per endpoint, with the keepalive
 * interval derived from `ttl`.
 *
 * @category layers
 * @since 0.1.0
 */
export const connectorLayer = (
  options: TransportOptions & { readonly ttl: Duration.Input }
): Layer.Layer<ClusterConnector> =>
  ClusterConnector.layer((endpoint) =>
    GrpcClient.make({
      endpoint,
      tls: options.tls,
      keepaliveTime: DiscoveryClient.keepaliveTime(options.ttl),
      channelOptions: options.channelOptions
    })
  )

/**
 * The discovery client over gRPC, running while the layer is alive.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  options: GrpcClientOptions
): Layer.Layer<DiscoveryClient.DiscoveryClient, DiscoveryClient.InvalidClientOptions> =>
  DiscoveryClient.layer(options).pipe(Layer.provide(connectorLayer(options)))
