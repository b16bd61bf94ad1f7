/**
 * `net-reset`: one instance's connections to Redis are reset (TCP RST)
 * 0 to 500 ms after the toxic reaches them, the open ones and every new one,
 * until healed; commands in flight end with ECONNRESET and the instance
 * keeps reconnecting.
 */
import { between, type Fault } from "./fault.ts"
import { toxicFault } from "./toxicFault.ts"

/** Resets on one instance's link; heal = remove the toxic. */
export const netReset: Fault = toxicFault("net-reset", (random) => ({
  toxics: [{ name: "reset", type: "reset_peer", stream: "upstream", attributes: { timeout: between(random, 0, 500) } }]
}))
