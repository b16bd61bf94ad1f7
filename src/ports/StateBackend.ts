/**
 * Where the cluster state lives: the port behind the core's `ClusterState`.
 * The core keeps the protocol's rules that need no stored state (validation,
 * the clock, shutdown, watch buffers); a backend stores the affiliates,
 * applies each change atomically with the merge rules and limits of
 * PROTOCOL.md, gives it the next revision of its cluster, and hands every
 * change to the watchers it registered, in revision order. The memory
 * backend (the core's synchronous engine) is the default; a remote one (Redis)
 * may fail any operation with `Unavailable`.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import { Context } from "effect"
import type {
  AffiliateDeleteRequest,
  AffiliateUpdateRequest,
  AffiliateView,
  ResumePoint,
  WatchSink,
  WatchStart
} from "./ClusterApi.ts"
import type { ChangeRecord } from "./ChangeCause.ts"
import type { ResourceExhausted, Unavailable } from "./DiscoveryError.ts"

/**
 * Global caps that protect the service from unbounded growth.
 *
 * @category models
 * @since 0.1.0
 */
export interface StateCaps {
  /** Most clusters held at once (all instances together on a shared backend). */
  readonly maxClusters: number
  /** Most watches open at once (per instance). */
  readonly maxWatches: number
  /** Changes kept per watched cluster so that a watcher that comes back gets only what it missed (0: none). */
  readonly watchLogLength?: number | undefined
}

/**
 * What one garbage collection pass removed.
 *
 * @category models
 * @since 0.1.0
 */
export interface GcReport {
  readonly removedClusters: number
  readonly removedAffiliates: number
  readonly trimmedAffiliates: number
  /**
   * Each change the pass made, with its cause; and, on a shared backend,
   * clusters dropped since the last pass when a watch let go, and what a pass
   * that failed part way had applied.
   */
  readonly changes: ReadonlyArray<ChangeRecord>
}

/**
 * Counts of what the state holds; `watches` are this instance's.
 *
 * @category models
 * @since 0.1.0
 */
export interface StoreStats {
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
  readonly watches: number
}

/**
 * How a new watch starts: the snapshot (the cluster's revision and its
 * affiliates at that revision), or, when it asked to resume from a point the
 * backend still holds the changes after, those changes. `epoch` names the
 * sequence of revisions; it changes whenever the sequence may have restarted.
 *
 * @category models
 * @since 0.1.0
 */
export type Subscription = WatchStart & { readonly epoch: string }

/**
 * The operations of a state backend. Requests are already validated; times
 * are milliseconds since the epoch, read from the core's clock (never the
 * backend's), so `TestClock` drives every expiry.
 *
 * @category models
 * @since 0.1.0
 */
export interface StateBackendShape {
  /**
   * Applies an AffiliateUpdate expiring at `expiresAt` (its TTL from now),
   * whole or not at all; a change no one can see is not one (its record says
   * `ttl_refreshed`). Gives the record of what it did.
   */
  readonly update: (
    request: AffiliateUpdateRequest,
    expiresAt: number
  ) => Effect.Effect<ChangeRecord, ResourceExhausted | Unavailable>
  /** Removes an affiliate if it exists, at `now`; gives the records of what it removed (none when nothing). */
  readonly delete: (
    request: AffiliateDeleteRequest,
    now: number
  ) => Effect.Effect<ReadonlyArray<ChangeRecord>, Unavailable>
  /** Every affiliate of a cluster (none for an unknown cluster, which is not created). */
  readonly list: (clusterId: string) => Effect.Effect<ReadonlyArray<AffiliateView>, Unavailable>
  /**
   * Registers `sink` for the cluster's changes and returns how it starts: a
   * snapshot, or with `resume` (when the backend holds every change after
   * that point in that epoch) the changes since. Every later change is
   * offered to `sink`, in order, until `unsubscribe` or until `sink.end` (a
   * sink that refuses a change is ended with SubscriptionLost).
   */
  readonly subscribe: (
    clusterId: string,
    sink: WatchSink,
    resume?: ResumePoint | undefined
  ) => Effect.Effect<Subscription, ResourceExhausted | Unavailable>
  /**
   * Ends a watch registered by `subscribe` (its slot may already be free if
   * it was cut off) at `now`; gives the record of the cluster it dropped, if
   * it did (a shared backend reports those in the next `collectGarbage`).
   */
  readonly unsubscribe: (clusterId: string, sink: WatchSink, now: number) => Effect.Effect<ChangeRecord | undefined>
  /** The records of a cluster's last changes, newest first (as many as the backend keeps). */
  readonly history: (clusterId: string) => Effect.Effect<ReadonlyArray<ChangeRecord>, Unavailable>
  /** Removes what has expired at `now`, announcing each change once. */
  readonly collectGarbage: (now: number) => Effect.Effect<GcReport, Unavailable>
  /**
   * Counts what the state holds, synchronously (metrics read it in a scrape):
   * a remote backend answers with the counts of its last pass over the state.
   */
  readonly stats: Effect.Effect<StoreStats>
  /** Ends every open watch of this instance with `end` (shutdown). */
  readonly closeWatches: (end: (sink: WatchSink) => void) => void
  /** Whether the backend can serve right now (a remote one: connected); absent means always. */
  readonly available?: (() => boolean) | undefined
}

/**
 * The state backend of a service.
 *
 * @category services
 * @since 0.1.0
 */
export class StateBackend extends Context.Service<StateBackend, StateBackendShape>()("talos-discovery/StateBackend") {}
