/**
 * The one port of the discovery protocol: the five operations on a cluster.
 * The core server implements it; the gRPC server adapter exposes any
 * implementation, and the gRPC client adapter implements it over a channel.
 *
 * @since 0.1.0
 */
import type { Duration, Effect, Scope, Stream } from "effect"
import { Context } from "effect"
import type { DiscoveryError, SubscriptionLost, Unavailable } from "./DiscoveryError.ts"

/**
 * One member of a cluster as the service stores it: opaque, client-encrypted
 * data and endpoint blobs.
 *
 * @category models
 * @since 0.1.0
 */
export interface AffiliateView {
  readonly id: string
  readonly data: Uint8Array
  readonly endpoints: ReadonlyArray<Uint8Array>
}

/**
 * The first call of a client. `clientAddress` is the caller's address as the
 * transport saw it (binary, 4 or 16 bytes); server adapters fill it in.
 *
 * @category models
 * @since 0.1.0
 */
export interface HelloRequest {
  readonly clusterId: string
  readonly clientVersion: string
  readonly clientAddress?: Uint8Array | undefined
}

/**
 * The answer to Hello: where to go instead (if anywhere) and the caller's
 * public address (when reported).
 *
 * @category models
 * @since 0.1.0
 */
export interface HelloResponse {
  readonly redirect?: string | undefined
  readonly clientIp?: Uint8Array | undefined
}

/**
 * Creates or refreshes an affiliate. Empty or absent data leaves the stored
 * data alone; endpoints are merged by their bytes.
 *
 * @category models
 * @since 0.1.0
 */
export interface AffiliateUpdateRequest {
  readonly clusterId: string
  readonly affiliateId: string
  readonly data?: Uint8Array | undefined
  readonly endpoints: ReadonlyArray<Uint8Array>
  readonly ttl: Duration.Duration
  /** The caller's address as the transport saw it (server adapters fill it in; it explains the change). */
  readonly clientAddress?: Uint8Array | undefined
}

/**
 * Removes one affiliate with its endpoints.
 *
 * @category models
 * @since 0.1.0
 */
export interface AffiliateDeleteRequest {
  readonly clusterId: string
  readonly affiliateId: string
  /** The caller's address as the transport saw it (server adapters fill it in; it explains the change). */
  readonly clientAddress?: Uint8Array | undefined
}

/**
 * Names the cluster that List or Watch is about.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClusterRequest {
  readonly clusterId: string
}

/**
 * Where a watch left off: the last revision a client applied, and the epoch
 * (the unbroken sequence of revisions) it belongs to.
 *
 * @category models
 * @since 0.1.0
 */
export interface ResumePoint {
  readonly epoch: string
  readonly revision: number
}

/**
 * Names the cluster to watch; with `resume`, asks for only the changes after
 * that point (the service answers with a fresh snapshot when it cannot).
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchRequest extends ClusterRequest {
  readonly resume?: ResumePoint | undefined
}

/**
 * One element of a watch: a snapshot first (or, for a resumed watch, the
 * point it resumed after), then one delta per change. The revision counts the
 * changes of the cluster and `epoch` names their sequence; transports that do
 * not carry them number the messages in arrival order and leave `epoch` out.
 * One delta object goes to every watcher of the cluster, so treat its bytes
 * as read-only.
 *
 * @category models
 * @since 0.1.0
 */
export type WatchEvent =
  | {
      readonly _tag: "Snapshot"
      readonly revision: number
      readonly affiliates: ReadonlyArray<AffiliateView>
      readonly epoch?: string | undefined
    }
  | { readonly _tag: "Resumed"; readonly revision: number; readonly epoch: string }
  | { readonly _tag: "Updated"; readonly revision: number; readonly affiliate: AffiliateView }
  | { readonly _tag: "Deleted"; readonly revision: number; readonly affiliateId: string }

/**
 * The snapshot a watch starts from.
 *
 * @category models
 * @since 0.1.0
 */
export type WatchSnapshot = Extract<WatchEvent, { readonly _tag: "Snapshot" }>

/**
 * A change after the snapshot: an affiliate updated or deleted.
 *
 * @category models
 * @since 0.1.0
 */
export type WatchDelta = Extract<WatchEvent, { readonly _tag: "Updated" | "Deleted" }>

/**
 * How a pushed watch starts: a snapshot, or the point it resumed after with
 * the changes since (in order; later ones go to the sink).
 *
 * @category models
 * @since 0.1.0
 */
export type WatchStart =
  | WatchSnapshot
  | {
      readonly _tag: "Resumed"
      readonly revision: number
      readonly epoch: string
      readonly missed: ReadonlyArray<WatchDelta>
    }

/**
 * The receiving end of a pushed watch (`ClusterApi.subscribe`): it is handed
 * each delta synchronously, in revision order, by the code that made the
 * change, so it must not block; it buffers what it cannot pass on at once.
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchSink {
  /** Takes the next delta; `false` means the sink's buffer is full, and the watch is then cut off with `end`. */
  readonly offer: (delta: WatchDelta) => boolean
  /** The watch is over: the sink fell behind (SubscriptionLost) or the service is shutting down (Unavailable). */
  readonly end: (error: SubscriptionLost | Unavailable) => void
}

/**
 * The five discovery operations, with tagged errors. Implemented by the core
 * server (in process) and by the gRPC client transport (remote).
 *
 * @category services
 * @since 0.1.0
 */
export class ClusterApi extends Context.Service<
  ClusterApi,
  {
    readonly hello: (request: HelloRequest) => Effect.Effect<HelloResponse, DiscoveryError>
    readonly affiliateUpdate: (request: AffiliateUpdateRequest) => Effect.Effect<void, DiscoveryError>
    readonly affiliateDelete: (request: AffiliateDeleteRequest) => Effect.Effect<void, DiscoveryError>
    readonly list: (request: ClusterRequest) => Effect.Effect<ReadonlyArray<AffiliateView>, DiscoveryError>
    readonly watch: (request: WatchRequest) => Stream.Stream<WatchEvent, DiscoveryError>
    /**
     * Watch in push form, for transports that write without waiting (optional;
     * the core server has it): registers `sink` and returns how the watch
     * starts; every later change goes to `sink` until it ends or the scope
     * closes. Same rules and errors as `watch`.
     */
    readonly subscribe?:
      | ((request: WatchRequest, sink: WatchSink) => Effect.Effect<WatchStart, DiscoveryError, Scope.Scope>)
      | undefined
  }
>()("talos-discovery/ClusterApi") {}
