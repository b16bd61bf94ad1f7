/**
 * `net-slow`: one instance's link to Redis gets a few KB/s of bandwidth in
 * each direction, so large replies (snapshots, log reads) take seconds
 * while small commands still pass.
 */
import { between, type Fault } from "./fault.ts"
import { toxicFault } from "./toxicFault.ts"

/** 2-8 KB/s each way on one instance's link; heal = remove the toxics. */
export const netSlow: Fault = toxicFault("net-slow", (random) => {
  const rate = between(random, 2, 8)
  return {
    toxics: [
      { name: "slow-down", type: "bandwidth", stream: "downstream", attributes: { rate } },
      { name: "slow-up", type: "bandwidth", stream: "upstream", attributes: { rate } }
    ]
  }
})
