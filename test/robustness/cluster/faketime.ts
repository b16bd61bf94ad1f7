/**
 * An instance's clock offset, by Debian's libfaketime preloaded into its
 * process: the wall clock (Date.now, log timestamps) runs `millis` ahead or
 * behind, while the monotonic clock stays real so that timers and
 * performance.now keep working. Node runs under it (checked by the faults
 * test through the instance's log timestamps).
 */
import { existsSync } from "node:fs"

/** Where Debian's `faketime` package puts the library. */
export const libfaketimePath = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

/** The environment that offsets a process's wall clock by `millis` (positive: ahead). */
export const faketimeEnv = (millis: number): Record<string, string> => {
  if (!existsSync(libfaketimePath)) throw new Error(`clock offset needs libfaketime at ${libfaketimePath}`)
  const seconds = (Math.abs(millis) / 1000).toFixed(3)
  return {
    LD_PRELOAD: libfaketimePath,
    FAKETIME: `${millis < 0 ? "-" : "+"}${seconds}`,
    FAKETIME_DONT_FAKE_MONOTONIC: "1"
  }
}
