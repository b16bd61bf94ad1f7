/**
 * The synchronous engine behind the cluster state: every operation runs to
 * completion in one step, so a change and its notifications are atomic and
 * ordered without locks. Operations either succeed whole or change nothing.
 *
 * @since 0.1.0
 */
import { Duration } from "effect"
import type {
  AffiliateDeleteRequest,
  AffiliateUpdateRequest,
  AffiliateView,
  ResumePoint,
  WatchSink
} from "../../ports/ClusterApi.ts"
import type { ChangeRecord } from "../../ports/ChangeCause.ts"
import { ResourceExhausted } from "../../ports/DiscoveryError.ts"
import type { GcReport, StateCaps, StoreStats, Subscription } from "../../ports/StateBackend.ts"
import { Affiliate, type AffiliateEntry, mergedData } from "./Affiliate.ts"
import { Cluster } from "./Cluster.ts"
import { LimitMessages, Limits } from "./limits.ts"
import type { PackedAffiliates } from "./snapshotFormat.ts"

const isPacked = (affiliates: Iterable<AffiliateEntry> | PackedAffiliates): affiliates is PackedAffiliates =>
  typeof (affiliates as Partial<PackedAffiliates>).unpack === "function"

export type { GcReport, StoreStats, Subscription } from "../../ports/StateBackend.ts"

/**
 * The global caps (see `StateCaps`).
 *
 * @category models
 * @since 0.1.0
 */
export type StoreCaps = StateCaps

/**
 * The default caps: one million clusters, one hundred thousand watches.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultCaps: StoreCaps = { maxClusters: 1_000_000, maxWatches: 100_000 }

/**
 * Changes kept per watched cluster in memory for resuming watches, unless
 * the caps say otherwise.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultWatchLogLength = 64

/**
 * Most changes a cluster's history gives (the inspect page shows them), on
 * every backend.
 *
 * @category models
 * @since 0.1.0
 */
export const historyLength = 64

/**
 * How long a cluster keeps its log of changes after its last watcher left:
 * long enough for its watchers to come back from a restart or a move, after
 * which they get a snapshot and the memory is freed.
 *
 * @category models
 * @since 0.1.0
 */
export const watchLogQuietMillis = 10 * 60_000

/** A name for this store's sequences of revisions that no other process will pick. */
const newEpochBase = (): string => {
  const bytes = globalThis.crypto.getRandomValues(new Uint8Array(9))
  let text = ""
  for (const byte of bytes) text += byte.toString(36).padStart(2, "0")
  return text
}

/**
 * What `restore` put back: what was kept, and what had already expired and
 * was dropped.
 *
 * @category models
 * @since 0.1.0
 */
export interface RestoreReport {
  readonly affiliates: number
  readonly endpoints: number
  readonly expiredAffiliates: number
  readonly expiredEndpoints: number
}

const tooManyAffiliates = () => new ResourceExhausted({ message: LimitMessages.tooManyAffiliates })
const tooManyEndpoints = () => new ResourceExhausted({ message: LimitMessages.tooManyEndpoints })
const tooManyClusters = () => new ResourceExhausted({ message: LimitMessages.tooManyClusters })
const tooManyWatches = () => new ResourceExhausted({ message: LimitMessages.tooManyWatches })

/**
 * All clusters of the service, with the merge, delete, watch and expiry rules.
 * Inputs must already be validated; times are milliseconds since the epoch.
 *
 * @category models
 * @since 0.1.0
 */
export class ClusterStore {
  readonly clusters = new Map<string, Cluster>()
  /** How many clusters were ever created; each gets the next number as its serial. */
  private created = 0
  private watches = 0
  private readonly releaseWatch = () => {
    this.watches--
  }
  readonly caps: StoreCaps
  private readonly logLength: number
  private readonly epochBase = newEpochBase()
  constructor(caps: StoreCaps = defaultCaps) {
    this.caps = caps
    this.logLength = caps.watchLogLength ?? defaultWatchLogLength
  }

  /**
   * The epoch of a cluster's revisions: this store's, and the cluster's
   * creation number, since a cluster removed and created again counts from 0.
   */
  private epochOf(cluster: Cluster): string {
    return `${this.epochBase}.${cluster.serial.toString(36)}`
  }

  /**
   * Applies an AffiliateUpdate expiring at `expiresAt` (its TTL from now), and
   * says why it changed what it did; or fails having changed nothing.
   */
  update(request: AffiliateUpdateRequest, expiresAt: number): ChangeRecord | ResourceExhausted {
    const now = expiresAt - Duration.toMillis(request.ttl)
    let cluster = this.clusters.get(request.clusterId)
    let affiliate = cluster?.affiliates.get(request.affiliateId)
    if (affiliate === undefined) {
      if (cluster === undefined && this.clusters.size >= this.caps.maxClusters) return tooManyClusters()
      if (cluster !== undefined && cluster.affiliates.size >= Limits.clusterAffiliatesMax) return tooManyAffiliates()
      affiliate = new Affiliate(request.affiliateId)
      if (affiliate.wouldExceed(request.endpoints, Limits.affiliateEndpointsMax)) return tooManyEndpoints()
      if (cluster === undefined) cluster = this.add(new Cluster(request.clusterId, this.releaseWatch))
      cluster.affiliates.set(affiliate.id, affiliate)
      affiliate.merge(request.data, request.endpoints, expiresAt)
      const count = affiliate.endpointCount
      const created = updateRecord(
        request,
        "created",
        cluster.revision + 1,
        now,
        expiresAt,
        affiliate,
        undefined,
        count
      )
      cluster.publishUpdated(affiliate, created)
      return created
    }
    if (affiliate.wouldExceed(request.endpoints, Limits.affiliateEndpointsMax)) return tooManyEndpoints()
    const left = affiliate.expiresAt - now
    const endpoints = affiliate.endpointCount
    const merged = affiliate.merge(request.data, request.endpoints, expiresAt)
    if (merged === 0) return updateRecord(request, "ttl_refreshed", undefined, now, expiresAt, affiliate, left, 0)
    const record = updateRecord(
      request,
      (merged & mergedData) !== 0 ? "data_changed" : "endpoints_added",
      cluster!.revision + 1,
      now,
      expiresAt,
      affiliate,
      left,
      affiliate.endpointCount - endpoints
    )
    cluster!.publishUpdated(affiliate, record)
    return record
  }

  /** Removes an affiliate if it exists (deleting a missing one is not an error), and says what it removed. */
  delete(request: AffiliateDeleteRequest, now: number): ReadonlyArray<ChangeRecord> {
    const cluster = this.clusters.get(request.clusterId)
    const affiliate = cluster?.affiliates.get(request.affiliateId)
    if (cluster === undefined || affiliate === undefined) return []
    cluster.affiliates.delete(request.affiliateId)
    const deleted: ChangeRecord = {
      clusterId: request.clusterId,
      affiliateId: request.affiliateId,
      cause: "deleted",
      revision: cluster.revision + 1,
      at: now,
      expiresAt: affiliate.expiresAt,
      leftMillis: affiliate.expiresAt - now,
      clientAddress: request.clientAddress
    }
    cluster.publishDeleted(request.affiliateId, deleted)
    return this.dropIfEmpty(cluster) ? [deleted, dropped(cluster.id, now)] : [deleted]
  }

  /**
   * The records of a cluster's last changes, newest first, at most
   * `historyLength` (none while it keeps no log: never watched).
   */
  history(clusterId: string): ReadonlyArray<ChangeRecord> {
    return this.clusters.get(clusterId)?.log?.history(historyLength) ?? []
  }

  /** Every affiliate of a cluster (none for an unknown cluster, which is not created). */
  list(clusterId: string): Array<AffiliateView> {
    return this.clusters.get(clusterId)?.views() ?? []
  }

  /**
   * Registers a watcher and, in the same step, gives it what it starts from:
   * the changes after `resume` when the cluster's log still holds them all in
   * that epoch, else a snapshot.
   */
  subscribe(clusterId: string, sink: WatchSink, resume?: ResumePoint): Subscription | ResourceExhausted {
    if (this.watches >= this.caps.maxWatches) return tooManyWatches()
    let cluster = this.clusters.get(clusterId)
    if (cluster === undefined) {
      if (this.clusters.size >= this.caps.maxClusters) return tooManyClusters()
      cluster = this.add(new Cluster(clusterId, this.releaseWatch))
    }
    cluster.addWatcher(sink, this.logLength)
    this.watches++
    const epoch = this.epochOf(cluster)
    if (resume !== undefined && resume.epoch === epoch) {
      const missed = cluster.log?.since(resume.revision, cluster.revision)
      if (missed !== undefined) return { _tag: "Resumed", revision: resume.revision, epoch, missed }
    }
    return { _tag: "Snapshot", revision: cluster.revision, epoch, affiliates: cluster.snapshotViews() }
  }

  /**
   * Ends a watch registered by `subscribe` (its slot may already be free if it
   * was cut off) at `now`; a cluster it leaves with no affiliate and no
   * watcher is dropped, and its record is given.
   */
  unsubscribe(clusterId: string, sink: WatchSink, now: number): ChangeRecord | undefined {
    const cluster = this.clusters.get(clusterId)
    if (cluster === undefined || !cluster.removeWatcher(sink)) return undefined
    this.watches--
    return this.dropIfEmpty(cluster) ? dropped(clusterId, now) : undefined
  }

  /** Removes what has expired at `now`, notifies watchers of each change and says why each was made. */
  collectGarbage(now: number): GcReport {
    let removedClusters = 0
    let removedAffiliates = 0
    let trimmedAffiliates = 0
    const changes: Array<ChangeRecord> = []
    for (const cluster of this.clusters.values()) {
      const packed = cluster.packed
      if (packed !== undefined && packed.earliestExpiry > now) continue
      for (const affiliate of cluster.affiliates.values()) {
        const endpoints = affiliate.endpointCount
        const lastEndpointExpiry = affiliate.lastEndpointExpiryBy(now)
        switch (affiliate.expire(now)) {
          case "expired": {
            cluster.affiliates.delete(affiliate.id)
            const record = expiry(cluster, affiliate, "affiliate_expired", now, affiliate.expiresAt, endpoints)
            cluster.publishDeleted(affiliate.id, record)
            changes.push(record)
            removedAffiliates++
            break
          }
          case "trimmed": {
            const gone = endpoints - affiliate.endpointCount
            const record = expiry(cluster, affiliate, "endpoint_expired", now, lastEndpointExpiry, gone)
            cluster.publishUpdated(affiliate, record)
            changes.push(record)
            trimmedAffiliates++
            break
          }
        }
      }
      if (cluster.isEmpty) {
        this.clusters.delete(cluster.id)
        changes.push(dropped(cluster.id, now))
        removedClusters++
      } else if (cluster.log !== undefined && cluster.watcherCount === 0) {
        cluster.quietSince ??= now
        if (now - cluster.quietSince >= watchLogQuietMillis) {
          cluster.log = undefined
          cluster.quietSince = undefined
        }
      }
    }
    return { removedClusters, removedAffiliates, trimmedAffiliates, changes }
  }

  /** Counts what the store holds. */
  stats(): StoreStats {
    let affiliates = 0
    let endpoints = 0
    for (const cluster of this.clusters.values()) {
      affiliates += cluster.affiliateCount
      endpoints += cluster.endpointCount
    }
    return { clusters: this.clusters.size, affiliates, endpoints, watches: this.watches }
  }

  /**
   * Adds a cluster read back from a snapshot, without notifying anyone (no one
   * watches yet). What has expired at `now` is dropped by GC's rules. A cluster
   * already held is left alone and `undefined` is returned. Entries that are
   * {@link Affiliate} instances (as the snapshot decoder returns them) are
   * taken over, not copied: the caller hands them to the store. A `Map` of
   * affiliates by ID (as the decoder returns it) is taken over too and
   * becomes the cluster's own. Packed affiliates (as the decoder keeps most
   * clusters) stay packed until first used, unless something in them
   * expires by `now`.
   */
  restore(
    clusterId: string,
    affiliates: Iterable<AffiliateEntry> | Map<string, Affiliate> | PackedAffiliates,
    now: number
  ): RestoreReport | undefined {
    if (this.clusters.has(clusterId)) return undefined
    if (affiliates instanceof Map) return this.adopt(clusterId, affiliates, now)
    if (isPacked(affiliates)) {
      if (affiliates.earliestExpiry <= now) return this.adopt(clusterId, affiliates.unpack(), now)
      this.add(new Cluster(clusterId, this.releaseWatch, affiliates))
      return {
        affiliates: affiliates.affiliates,
        endpoints: affiliates.endpoints,
        expiredAffiliates: 0,
        expiredEndpoints: 0
      }
    }
    const cluster = new Cluster(clusterId, this.releaseWatch)
    let kept = 0
    let endpoints = 0
    let expiredAffiliates = 0
    let expiredEndpoints = 0
    for (const entry of affiliates) {
      const affiliate = entry instanceof Affiliate ? entry : Affiliate.fromEntry(entry)
      const stored = affiliate.endpointCount
      if (affiliate.expire(now) === "expired") {
        expiredAffiliates++
        expiredEndpoints += stored
        continue
      }
      expiredEndpoints += stored - affiliate.endpointCount
      cluster.affiliates.set(affiliate.id, affiliate)
      kept++
      endpoints += affiliate.endpointCount
    }
    this.add(cluster)
    return { affiliates: kept, endpoints, expiredAffiliates, expiredEndpoints }
  }

  /** `restore` of a map the store takes over: only expired affiliates are removed from it. */
  private adopt(clusterId: string, affiliates: Map<string, Affiliate>, now: number): RestoreReport {
    let endpoints = 0
    let expiredAffiliates = 0
    let expiredEndpoints = 0
    for (const [id, affiliate] of affiliates) {
      const stored = affiliate.endpointCount
      if (affiliate.expire(now) === "expired") {
        affiliates.delete(id)
        expiredAffiliates++
        expiredEndpoints += stored
        continue
      }
      expiredEndpoints += stored - affiliate.endpointCount
      endpoints += affiliate.endpointCount
    }
    this.add(new Cluster(clusterId, this.releaseWatch, affiliates))
    return { affiliates: affiliates.size, endpoints, expiredAffiliates, expiredEndpoints }
  }

  /**
   * The clusters a snapshot writes, each as it is when the encoder reaches
   * it: those held when the snapshot starts. The encoder may pause between
   * clusters (see `SnapshotCodec.encodePieces`); a cluster created during a
   * pause is left to the next snapshot, so one deleted and created again is
   * never written twice.
   */
  *snapshotEntries(): Generator<Cluster, void, undefined> {
    const last = this.created
    for (const cluster of this.clusters.values()) if (cluster.serial <= last) yield cluster
  }

  /** Ends every open watch with the given failure, as on shutdown. */
  closeWatches(end: (sink: WatchSink) => void): void {
    for (const cluster of this.clusters.values()) {
      for (const watcher of cluster.watchers) end(watcher)
    }
  }

  private add(cluster: Cluster): Cluster {
    cluster.serial = ++this.created
    this.clusters.set(cluster.id, cluster)
    return cluster
  }

  /** Drops a cluster with no affiliate and no watcher; true when it did. */
  private dropIfEmpty(cluster: Cluster): boolean {
    if (!cluster.isEmpty) return false
    this.clusters.delete(cluster.id)
    return true
  }
}

/**
 * The record of an update of `cause` that asked for an expiry at `asked`,
 * leaving `affiliate` as it is now: how long its previous expiry still had
 * to run (`left`, none for a new one) and the endpoints it added.
 */
const updateRecord = (
  request: AffiliateUpdateRequest,
  cause: ChangeRecord["cause"],
  revision: number | undefined,
  now: number,
  asked: number,
  affiliate: Affiliate,
  left: number | undefined,
  added: number
): ChangeRecord => ({
  clusterId: request.clusterId,
  affiliateId: request.affiliateId,
  cause,
  revision,
  at: now,
  ttlMillis: asked - now,
  expiresAt: affiliate.expiresAt,
  leftMillis: left,
  endpoints: added > 0 ? added : undefined,
  clientAddress: request.clientAddress
})

/** The record of what GC removed from `affiliate` at `now`: the expiry reached and the endpoints that went with it. */
const expiry = (
  cluster: Cluster,
  affiliate: Affiliate,
  cause: "affiliate_expired" | "endpoint_expired",
  now: number,
  expiresAt: number | undefined,
  endpoints: number
): ChangeRecord => ({
  clusterId: cluster.id,
  affiliateId: affiliate.id,
  cause,
  revision: cluster.revision + 1,
  at: now,
  expiresAt,
  endpoints: endpoints > 0 ? endpoints : undefined
})

/** The record of a cluster dropped at `now`: no affiliate and no watcher left. */
const dropped = (clusterId: string, now: number): ChangeRecord => ({ clusterId, cause: "cluster_dropped", at: now })
