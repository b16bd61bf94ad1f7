/**
 * Decides, for each Hello, whether the client should stay or move to another
 * endpoint. Static redirects come first; the same hook can shard clusters
 * across instances.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer } from "effect"
import type { HelloRequest } from "../../ports/ClusterApi.ts"

const stay = Effect.succeed(undefined)

/**
 * The redirect decision for a Hello: an endpoint (`host:port`) to go to, or
 * `undefined` to stay.
 *
 * @category services
 * @since 0.1.0
 */
export class RedirectPolicy extends Context.Service<
  RedirectPolicy,
  {
    readonly redirectFor: (request: HelloRequest) => Effect.Effect<string | undefined>
  }
>()("talos-discovery/RedirectPolicy") {
  /** The policy that sends every client to `endpoint`; an empty endpoint means no redirect. */
  static readonly staticTo = (endpoint: string): RedirectPolicy["Service"] =>
    RedirectPolicy.of({ redirectFor: endpoint === "" ? () => stay : () => Effect.succeed(endpoint) })

  /** Never redirects. */
  static readonly layerNone: Layer.Layer<RedirectPolicy> = Layer.succeed(RedirectPolicy, RedirectPolicy.staticTo(""))

  /** Sends every client to `endpoint`; an empty endpoint means no redirect. */
  static readonly layerStatic = (endpoint: string): Layer.Layer<RedirectPolicy> =>
    Layer.succeed(RedirectPolicy, RedirectPolicy.staticTo(endpoint))
}
