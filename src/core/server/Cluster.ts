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

/**
 * The mutable state of one cluster, owned by the cluster store.
 *
 * @category models
 * @since 0.1.0
 */
export class Cluster {
  readonly affiliates = new Map<string, Affiliate>()
  readonly watchers = new Set<WatchSink>()
  revision = 0
  readonly id: string
  private readonly release: () => void
  /** `release` is called once for each watcher cut off for falling behind. */
  constructor(id: string, release: () => void) {
    this.id = id
    this.release = release
  }

  /** True when nothing keeps the cluster alive: no affiliate and no watcher. */
  get isEmpty(): boolean {
    return this.affiliates.size === 0 && this.watchers.size === 0
  }

  /** The affiliates as watchers see them. */
  views(): Array<AffiliateView> {
    const views: Array<AffiliateView> = []
    for (const affiliate of this.affiliates.values()) views.push(affiliate.view())
    return views
  }

  /** Publishes the full current state of an affiliate. */
  publishUpdated(affiliate: Affiliate): void {
    if (this.watchers.size === 0) {
      this.revision++
      return
    }
    this.publish({ _tag: "Updated", revision: ++this.revision, affiliate: affiliate.view() })
  }

  /** Publishes the removal of an affiliate. */
  publishDeleted(affiliateId: string): void {
    if (this.watchers.size === 0) {
      this.revision++
      return
    }
    this.publish({ _tag: "Deleted", revision: ++this.revision, affiliateId })
  }

  private publish(event: WatchDelta): void {
    for (const watcher of this.watchers) {
      if (!watcher.offer(event)) {
        this.watchers.delete(watcher)
        this.release()
        watcher.end(lostUpdate)
      }
    }
  }
}
