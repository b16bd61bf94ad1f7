/**
 * One cluster: its affiliates, its watchers and its revision counter. Every
 * change gets the next revision and is offered to each watcher's sink
 * without waiting; a watcher whose sink is full is cut off. From its first
 * watcher on, a cluster also keeps its last changes in a `ChangeLog`, so a
 * watcher that comes back gets only what it missed.
 *
 * @since 0.1.0
 */
import type { ChangeRecord } from "../../ports/ChangeCause.ts"
import type { AffiliateView, WatchDelta, WatchSink } from "../../ports/ClusterApi.ts"
import type { Affiliate } from "./Affiliate.ts"
import { ChangeLog } from "./ChangeLog.ts"
import { fanOut } from "./fanOut.ts"
import type { ClusterEntry, PackedAffiliates } from "./snapshotFormat.ts"

const noSinks: ReadonlyArray<WatchSink> = []

/**
 * The mutable state of one cluster, owned by the cluster store.
 *
 * @category models
 * @since 0.1.0
 */
export class Cluster implements ClusterEntry {
  private map: Map<string, Affiliate> | undefined
  private packedAffiliates: PackedAffiliates | undefined
  /** Created with the first watcher: most clusters never have one, and an empty Set costs ~100 bytes. */
  private sinks: Set<WatchSink> | undefined = undefined
  revision = 0
  #snapshot: ReadonlyArray<AffiliateView> | undefined
  #snapshotAt = -1
  /** The store's creation number of this cluster (see `ClusterStore.snapshotEntries`). */
  serial = 0
  /** The last changes, kept from the first watcher on (a cluster never watched needs none). */
  log: ChangeLog | undefined = undefined
  /** Since when (ms) the cluster has had no watcher, while it keeps a log; GC drops a log quiet for long. */
  quietSince: number | undefined = undefined
  readonly id: string
  private readonly release: () => void
  /**
   * `release` is called once for each watcher cut off for falling behind;
   * `affiliates`, when given, becomes the cluster's own: a map as it is, or
   * packed affiliates, unpacked on first use.
   */
  constructor(id: string, release: () => void, affiliates: Map<string, Affiliate> | PackedAffiliates = new Map()) {
    this.id = id
    this.release = release
    if (affiliates instanceof Map) this.map = affiliates
    else this.packedAffiliates = affiliates
  }

  /** The affiliates by ID, for reading and changing; packed ones are unpacked first, once. */
  get affiliates(): Map<string, Affiliate> {
    if (this.map !== undefined) return this.map
    const map = this.packedAffiliates!.unpack()
    this.map = map
    this.packedAffiliates = undefined
    return map
  }

  /** The affiliates while they are still packed (never used since they were read), else `undefined`. */
  get packed(): PackedAffiliates | undefined {
    return this.packedAffiliates
  }

  /** How many affiliates the cluster has, without unpacking them. */
  get affiliateCount(): number {
    return this.map !== undefined ? this.map.size : this.packedAffiliates!.affiliates
  }

  /** How many endpoints its affiliates hold in all, without unpacking them. */
  get endpointCount(): number {
    if (this.map === undefined) return this.packedAffiliates!.endpoints
    let endpoints = 0
    for (const affiliate of this.map.values()) endpoints += affiliate.endpointCount
    return endpoints
  }

  /** True when nothing keeps the cluster alive: no affiliate and no watcher. */
  get isEmpty(): boolean {
    return this.affiliateCount === 0 && this.watcherCount === 0
  }

  /** How many watchers the cluster has. */
  get watcherCount(): number {
    return this.sinks?.size ?? 0
  }

  /** The watchers, in the order they came. */
  get watchers(): Iterable<WatchSink> {
    return this.sinks ?? noSinks
  }

  /** Adds a watcher; the first one starts the log of `logLength` changes (none when 0). */
  addWatcher(sink: WatchSink, logLength: number): void {
    if (this.sinks === undefined) this.sinks = new Set()
    if (this.log === undefined && logLength > 0) this.log = new ChangeLog(logLength)
    this.quietSince = undefined
    this.sinks.add(sink)
  }

  /** Removes a watcher; false when it was not there. */
  removeWatcher(sink: WatchSink): boolean {
    const removed = this.sinks?.delete(sink) ?? false
    if (this.watcherCount === 0) this.#snapshot = undefined
    return removed
  }

  /** The affiliates as watchers see them. */
  views(): Array<AffiliateView> {
    const views: Array<AffiliateView> = []
    for (const affiliate of this.affiliates.values()) views.push(affiliate.view())
    return views
  }

  /**
   * The affiliates a new watcher starts from: made once per revision while
   * the cluster has watchers, so watchers that come back together (a
   * reconnect storm) share one set of views; every visible change drops
   * them, and so does the last watcher to leave.
   */
  snapshotViews(): ReadonlyArray<AffiliateView> {
    if (this.#snapshotAt !== this.revision || this.#snapshot === undefined) {
      this.#snapshot = this.views()
      this.#snapshotAt = this.revision
    }
    return this.#snapshot
  }

  /** Publishes the full current state of an affiliate, `record` saying why (its revision is the next one). */
  publishUpdated(affiliate: Affiliate, record: ChangeRecord): void {
    this.#snapshot = undefined
    if (this.watcherCount === 0 && this.log === undefined) {
      this.revision++
      return
    }
    this.publish({ _tag: "Updated", revision: ++this.revision, affiliate: affiliate.view() }, record)
  }

  /** Publishes the removal of an affiliate, `record` saying why (its revision is the next one). */
  publishDeleted(affiliateId: string, record: ChangeRecord): void {
    this.#snapshot = undefined
    if (this.watcherCount === 0 && this.log === undefined) {
      this.revision++
      return
    }
    this.publish({ _tag: "Deleted", revision: ++this.revision, affiliateId }, record)
  }

  private publish(event: WatchDelta, record: ChangeRecord): void {
    this.log?.push(event, record)
    if (this.watcherCount > 0) fanOut(this.sinks!, event, this.release)
  }
}
