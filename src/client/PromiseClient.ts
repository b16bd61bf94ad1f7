/**
 * The discovery client for applications that do not use Effect: a Promise
 * and EventEmitter facade over the Effect client, on gRPC by default.
 *
 * ```ts
 * const client = await createDiscoveryClient({
 *   key, endpoint: "discovery.talos.dev:443", clusterId, affiliateId, ttl: "30 minutes"
 * })
 * client.on("change", (affiliates) => console.log(affiliates.map((a) => a.id)))
 * await client.setLocalData({ affiliate: { nodeId, hostname }, endpoints: [{ ip, port: 51820 }] })
 * // …
 * await client.close()
 * ```
 *
 * @since 0.1.0
 */
import { EventEmitter } from "node:events"
import { Deferred, Effect, Fiber, Layer, ManagedRuntime, References, Stream } from "effect"
import type { LogLevel } from "effect"
import { ClusterConnector } from "../core/client/ClusterConnector.ts"
import * as DiscoveryClient from "../core/client/DiscoveryClient.ts"
import type { DiscoveredAffiliate } from "../core/client/reconcile.ts"
import { connectorLayer, type TransportOptions } from "./GrpcDiscoveryClient.ts"

/**
 * Client options, transport options, and where logs go.
 *
 * @category models
 * @since 0.1.0
 */
export interface PromiseClientOptions extends DiscoveryClient.ClientOptions, TransportOptions {
  /**
   * Reach the service through this connector instead of gRPC (for example a
   * service in the same process); `tls` and `channelOptions` are then unused.
   */
  readonly connector?: ClusterConnector["Service"] | undefined
  /** The least severe log level written to the console (default "Warn"). */
  readonly logLevel?: LogLevel.LogLevel | undefined
}

/**
 * Events of the facade: `change` carries the new list of discovered
 * affiliates after every change.
 *
 * @category models
 * @since 0.1.0
 */
export type PromiseClientEvents = {
  change: [affiliates: ReadonlyArray<DiscoveredAffiliate>]
}

type Runtime = ManagedRuntime.ManagedRuntime<DiscoveryClient.DiscoveryClient, DiscoveryClient.InvalidClientOptions>

/**
 * A running discovery client. Read `affiliates()` once for the current list;
 * `change` fires on every later change.
 *
 * @category models
 * @since 0.1.0
 */
export class PromiseClient extends EventEmitter<PromiseClientEvents> {
  readonly #runtime: Runtime
  readonly #client: DiscoveryClient.DiscoveryClient["Service"]
  readonly #forward: Fiber.Fiber<void, unknown>
  #closed: Promise<void> | undefined

  /** @internal use `createDiscoveryClient` */
  constructor(
    runtime: Runtime,
    client: DiscoveryClient.DiscoveryClient["Service"],
    forward: Fiber.Fiber<void, unknown>
  ) {
    super()
    this.#runtime = runtime
    this.#client = client
    this.#forward = forward
  }

  /** Seals and publishes this node's data; rejects with `InvalidLocalData` when it cannot be published. */
  setLocalData(
    local: DiscoveryClient.LocalAffiliate,
    otherEndpoints?: ReadonlyArray<DiscoveryClient.PeerEndpoints>
  ): Promise<void> {
    return this.#runtime.runPromise(this.#client.setLocalData(local, otherEndpoints))
  }

  /** Stops publishing and deletes this node from the service (sent until it succeeds once). */
  deleteLocalAffiliate(): Promise<void> {
    return this.#runtime.runPromise(this.#client.deleteLocalAffiliate)
  }

  /** The other members of the cluster (copies). */
  affiliates(): ReadonlyArray<DiscoveredAffiliate> {
    return Effect.runSync(this.#client.affiliates)
  }

  /** This node's address as the service saw it (4 or 16 bytes), if reported. */
  publicIp(): Uint8Array | undefined {
    return Effect.runSync(this.#client.publicIp)
  }

  /** The endpoint in use (the configured one, or where the service redirected). */
  endpoint(): string {
    return Effect.runSync(this.#client.endpoint)
  }

  /** Stops the client without deleting this node (its entry expires on the service). */
  close(): Promise<void> {
    this.#closed ??= this.#runtime.runPromise(Fiber.interrupt(this.#forward)).then(() => this.#runtime.dispose())
    return this.#closed
  }
}

/**
 * Starts a discovery client; rejects with `InvalidClientOptions` when the
 * options are unusable. It connects over gRPC (TLS unless `tls: false`)
 * unless a `connector` is given.
 *
 * @category constructors
 * @since 0.1.0
 */
export const createDiscoveryClient = async (options: PromiseClientOptions): Promise<PromiseClient> => {
  const connector =
    options.connector === undefined ? connectorLayer(options) : Layer.succeed(ClusterConnector, options.connector)
  const runtime = ManagedRuntime.make(
    DiscoveryClient.layer(options).pipe(
      Layer.provide(connector),
      Layer.provide(Layer.succeed(References.MinimumLogLevel, options.logLevel ?? "Warn"))
    )
  )
  try {
    const client = await runtime.runPromise(DiscoveryClient.DiscoveryClient)
    let facade: PromiseClient | undefined
    const subscribed = await runtime.runPromise(Deferred.make<void>())
    let first = true
    // the first element is the list at subscription time: it only tells that
    // the subscription is in place
    const forward = runtime.runFork(
      Stream.runForEach(client.changes, (affiliates) => {
        if (first) {
          first = false
          return Deferred.succeed(subscribed, undefined)
        }
        return Effect.sync(() => facade?.emit("change", affiliates)).pipe(
          Effect.catchDefect((error) => Effect.logError("a change listener threw", error))
        )
      })
    )
    await runtime.runPromise(Deferred.await(subscribed))
    facade = new PromiseClient(runtime, client, forward)
    return facade
  } catch (error) {
    await runtime.dispose()
    throw error
  }
}
