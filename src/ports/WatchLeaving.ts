/**
 * Why a watch whose scope closes without its sink being ended is leaving:
 * its client went away, unless the transport that relays it says otherwise
 * (an I/O thread that stopped ends all of its watches at once). Read by the
 * core when the watch ends, to count and log it by cause.
 *
 * @since 0.1.0
 */
import { Context } from "effect"
import type { WatchEndCause } from "./ChangeCause.ts"

/**
 * Asked when a watch's scope closes with its sink not ended.
 *
 * @category services
 * @since 0.1.0
 */
export const WatchLeaving: Context.Reference<() => WatchEndCause> = Context.Reference("talos-discovery/WatchLeaving", {
  defaultValue: () => (): WatchEndCause => "client_gone"
})
