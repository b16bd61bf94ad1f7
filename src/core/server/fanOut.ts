/**
 * The watch hub's rule, shared by every backend: a change is offered to each
 * watcher of its cluster without waiting, and a watcher whose buffer is full
 * is cut off with a lost-update error (it reconnects and gets a fresh
 * snapshot) instead of slowing the others or the writer.
 *
 * @since 0.1.0
 */
import type { WatchDelta, WatchSink } from "../../ports/ClusterApi.ts"
import { lostUpdateMessage, SubscriptionLost } from "../../ports/DiscoveryError.ts"

const lostUpdate = new SubscriptionLost({ message: lostUpdateMessage })

/**
 * Offers `delta` to every sink of `sinks`; a sink that refuses it is removed
 * from `sinks`, `release` is called for it, and it is ended.
 *
 * @category constructors
 * @since 0.1.0
 */
export const fanOut = (sinks: Set<WatchSink>, delta: WatchDelta, release: () => void): void => {
  for (const watcher of sinks) {
    if (!watcher.offer(delta)) {
      sinks.delete(watcher)
      release()
      watcher.end(lostUpdate)
    }
  }
}
