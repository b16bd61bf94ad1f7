/**
 * One cluster: its affiliates, its watchers and its revision counter. Every
 * change gets the next revision and is offered to each watcher's sink
 * without waiting; a watcher whose sink is full is cut off.
 *
 * @since 0.1.0
 */
import type { AffiliateView, WatchDelta, WatchSink } from "../../ports/ClusterApi.ts"
import { lostUpdateMessage, SubscriptionLost } from "../../ports/DiscoveryError.ts"
import type { Affiliate } from "./Affiliate.ts"

const lostUpdate = new SubscriptionLost({ message: lostUpdateMessage })
const noSinks: ReadonlyArray<WatchSink> = []

/**
 * The mutable state of one cluster, owned by the cluster store.
 *
 * @category models
 * @since 0.1.0
 */
export class Cluster {
  readonly affiliates: Map<string, Affiliate>
  /** Created with the first watcher: most clusters never have one, and an empty Set costs ~100 bytes. */
  private sinks: Set<WatchSink> | undefined = undefined
  revision = 0
  readonly id: string
  private readonly release: () => void
  /**
   * `release` is called once for each watcher cut off for falling behind;
   * `affiliates`, when given, becomes the cluster's own map.
   */
  constructor(id: string, release: () => void, affiliates = new Map<string, Affiliate>()) {
    this.id = id
    this.release = release
    this.affiliates = affiliates
  }

  /** True when nothing keeps the cluster alive: no affiliate and no watcher. */
  get isEmpty(): boolean {
    return this.affiliates.size === 0 && this.watcherCount === 0
  }

  /** How many watchers the cluster has. */
  get watcherCount(): number {
    return this.sinks?.size ?? 0
  }

  /** The watchers, in the order they came. */
  get watchers(): Iterable<WatchSink> {
    return this.sinks ?? noSinks
  }

  /** Adds a watcher. */
  addWatcher(sink: WatchSink): void {
    if (this.sinks === undefined) this.sinks = new Set()
    this.sinks.add(sink)
  }

  /** Removes a watcher; false when it was not there. */
  removeWatcher(sink: WatchSink): boolean {
    return this.sinks?.delete(sink) ?? false
  }

  /** The affiliates as watchers see them. */
  views(): Array<AffiliateView> {
    const views: Array<AffiliateView> = []
    for (const affiliate of this.affiliates.values()) views.push(affiliate.view())
    return views
  }

  /** Publishes the full current state of an affiliate. */
  publishUpdated(affiliate: Affiliate): void {
    if (this.watcherCount === 0) {
      this.revision++
      return
    }
    this.publish({ _tag: "Updated", revision: ++this.revision, affiliate: affiliate.view() })
  }

  /** Publishes the removal of an affiliate. */
  publishDeleted(affiliateId: string): void {
    if (this.watcherCount === 0) {
      this.revision++
      return
    }
    this.publish({ _tag: "Deleted", revision: ++this.revision, affiliateId })
  }

  private publish(event: WatchDelta): void {
    const sinks = this.sinks!
    for (const watcher of sinks) {
      if (!watcher.offer(event)) {
        sinks.delete(watcher)
        this.release()
        watcher.end(lostUpdate)
      }
    }
  }
}
