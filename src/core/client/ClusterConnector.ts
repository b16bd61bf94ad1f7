/**
 * How the discovery client reaches a service: given an endpoint (`host:port`),
 * a `ClusterApi` that lives as long as the scope. The client asks again
 * whenever it must follow a redirect or rebuild a connection, so a transport
 * (gRPC) or an in-process service can stand behind it.
 *
 * @since 0.1.0
 */
import type { Scope } from "effect"
import { Context, Effect, Layer } from "effect"
import { ClusterApi } from "../../ports/ClusterApi.ts"
import { type DiscoveryError, Unavailable } from "../../ports/DiscoveryError.ts"

/**
 * Opens a `ClusterApi` to an endpoint; the connection closes with the scope.
 *
 * @category services
 * @since 0.1.0
 */
export class ClusterConnector extends Context.Service<
  ClusterConnector,
  {
    readonly connect: (endpoint: string) => Effect.Effect<ClusterApi["Service"], DiscoveryError, Scope.Scope>
  }
>()("talos-discovery/ClusterConnector") {
  /** A connector from a function, e.g. `(endpoint) => GrpcClient.make({ endpoint })`. */
  static readonly layer = (
    connect: (endpoint: string) => Effect.Effect<ClusterApi["Service"], DiscoveryError, Scope.Scope>
  ): Layer.Layer<ClusterConnector> => Layer.succeed(ClusterConnector, ClusterConnector.of({ connect }))

  /** Every endpoint leads to the `ClusterApi` in context: an in-process service. */
  static readonly layerClusterApi: Layer.Layer<ClusterConnector, never, ClusterApi> = Layer.effect(
    ClusterConnector,
    Effect.map(ClusterApi, (api) => ClusterConnector.of({ connect: () => Effect.succeed(api) }))
  )

  /** A fixed set of services by endpoint; any other endpoint is Unavailable. */
  static readonly layerEndpoints = (
    services: Readonly<Record<string, ClusterApi["Service"]>>
  ): Layer.Layer<ClusterConnector> =>
    ClusterConnector.layer((endpoint) => {
      const api = Object.hasOwn(services, endpoint) ? services[endpoint] : undefined
      return api === undefined
        ? Effect.fail(new Unavailable({ message: `no discovery service at ${endpoint}` }))
        : Effect.succeed(api)
    })
}
