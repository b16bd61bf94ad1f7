/**
 * The live view's source: the frames a viewer of the landing page receives.
 * The instance's main thread samples (`LiveSampler`); an I/O thread serves
 * the same frames by asking the main thread.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import { Context } from "effect"
import type { LiveFrame } from "./LiveSample.ts"

/**
 * Gives the frame of a viewer that has seen the samples up to `since`
 * (milliseconds since the epoch; 0 for a new viewer).
 *
 * @category services
 * @since 0.1.0
 */
export class LiveView extends Context.Service<
  LiveView,
  { readonly frame: (since: number) => Effect.Effect<LiveFrame> }
>()("talos-discovery/http/LiveView") {}
