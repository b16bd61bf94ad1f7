/**
 * `net-stall`: one instance's link to Redis stops carrying data in one
 * direction while its connections stay open, as in a partition, until
 * healed. In `hold` mode the bytes are held (a latency toxic of an hour) and
 * delivered in order at the heal, as when a partition heals before TCP
 * gives up: upstream, Redis runs the held commands only then, after the
 * instance may have given up on them. In `drop` mode (toxiproxy's `timeout`
 * toxic with timeout 0) the bytes are dropped and the heal closes the
 * connections, as when TCP gives up: downstream, Redis has run commands
 * whose replies never came.
 */
import { type Fault, pick } from "./fault.ts"
import { toxicFault } from "./toxicFault.ts"

/** A stalled link in a random direction, its bytes held or dropped; heal = remove the toxic (closing the connections after a drop). */
export const netStall: Fault = toxicFault("net-stall", (random) => {
  const mode = pick(random, ["hold", "drop"] as const)
  const stream = pick(random, ["upstream", "downstream"] as const)
  return mode === "hold"
    ? {
        toxics: [{ name: "stall", type: "latency", stream, attributes: { latency: 3_600_000, jitter: 0 } }],
        fields: { mode }
      }
    : {
        toxics: [{ name: "stall", type: "timeout", stream, attributes: { timeout: 0 } }],
        fields: { mode },
        closeConnectionsOnHeal: true
      }
})
