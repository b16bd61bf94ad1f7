/**
 * Why the state changed: one closed set of causes, decided where each change
 * is made (the memory backend's engine, and the Redis scripts, which keep it
 * in the cluster's change log so every instance reads the same cause), with
 * the facts that explain it. Logs, metrics and the inspect page all read
 * these records.
 *
 * @since 0.1.0
 */

/**
 * Why an affiliate or a cluster changed. `ttl_refreshed` is an update that
 * changed nothing a watcher can see (it only moved expiries); every other
 * affiliate cause has a revision. `cluster_dropped` is a cluster forgotten
 * once it had no affiliate and no watcher left.
 *
 * @category models
 * @since 0.1.0
 */
export type ChangeCause =
  | "created"
  | "data_changed"
  | "endpoints_added"
  | "ttl_refreshed"
  | "endpoint_expired"
  | "affiliate_expired"
  | "deleted"
  | "cluster_dropped"

/**
 * Every cause, in the order of an affiliate's life (metric label values).
 *
 * @category models
 * @since 0.1.0
 */
export const changeCauses: ReadonlyArray<ChangeCause> = [
  "created",
  "data_changed",
  "endpoints_added",
  "ttl_refreshed",
  "endpoint_expired",
  "affiliate_expired",
  "deleted",
  "cluster_dropped"
]

/**
 * Why a watch ended: cut off for falling behind its changes, its client gone
 * (cancelled, disconnected), the instance shutting down, the I/O thread that
 * served it stopped (stalled, died or retired), or the state backend
 * unavailable (unreachable, or its sequence of changes broke: a restart, a
 * failover or a flush of a shared state).
 *
 * @category models
 * @since 0.1.0
 */
export type WatchEndCause = "cut_off" | "client_gone" | "shutdown" | "thread_stopped" | "backend_unavailable"

/**
 * Every watch end cause (metric label values).
 *
 * @category models
 * @since 0.1.0
 */
export const watchEndCauses: ReadonlyArray<WatchEndCause> = [
  "cut_off",
  "client_gone",
  "shutdown",
  "thread_stopped",
  "backend_unavailable"
]

/**
 * One change with its cause and the facts that explain it; times are
 * milliseconds since the epoch on the core's clock. What a cause has no use
 * for is absent: an expiry has no client, a refresh no revision.
 *
 * @category models
 * @since 0.1.0
 */
export interface ChangeRecord {
  readonly clusterId: string
  /** Absent for `cluster_dropped`. */
  readonly affiliateId?: string | undefined
  readonly cause: ChangeCause
  /** The cluster's revision this change got (absent for `ttl_refreshed` and `cluster_dropped`). */
  readonly revision?: number | undefined
  /** When it was applied. */
  readonly at: number
  /** The TTL the update asked for (ms). */
  readonly ttlMillis?: number | undefined
  /** The affiliate's expiry after an update, or the expiry that was reached (an endpoint's, an affiliate's). */
  readonly expiresAt?: number | undefined
  /** An update of a known affiliate: how long its previous expiry still had to run (negative: it came that late). */
  readonly leftMillis?: number | undefined
  /** Endpoints the change added (`created`, `data_changed` and `endpoints_added`), or removed as expired. */
  readonly endpoints?: number | undefined
  /** The address of the client whose call made the change (4 or 16 bytes, as the transport saw it). */
  readonly clientAddress?: Uint8Array | undefined
  /** The instance that applied it (on a shared backend). */
  readonly instance?: string | undefined
}
