/**
 * V8 settings for a long-running server, applied by the executables before
 * the program loads.
 *
 * Allocation-site pretenuring is off: when a phase of light load lets a few
 * per-call objects survive a young-generation collection, V8 starts to
 * allocate every later object of those sites in the old generation, and from
 * then on each young collection copied about 10 MB and paused 11–17 ms
 * (against about 1 ms), with a full collection every second or two; the
 * bench's AffiliateUpdate p99 at 16 callers went from 11–15 ms to 5–6 ms
 * without it.
 *
 * @since 0.1.0
 */
import { setFlagsFromString } from "node:v8"

/**
 * The V8 flags; `scripts/launch.mjs` repeats them for `npm start`.
 *
 * @category tuning
 * @since 0.1.0
 */
export const flags: ReadonlyArray<string> = ["--no-allocation-site-pretenuring"]

/**
 * Applies the settings; call it first thing, before the program's modules
 * are imported.
 *
 * @category tuning
 * @since 0.1.0
 */
export const tuneHeap = (): void => {
  for (const flag of flags) setFlagsFromString(flag)
}
