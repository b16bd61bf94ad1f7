/**
 * `net-latency`: one instance's link to Redis gets slow: every reply from
 * Redis is delayed by 100 to 1000 ms (with jitter of a fifth of that), so
 * that instance's calls slow down and some pass their deadlines.
 */
import { between, type Fault } from "./fault.ts"
import { toxicFault } from "./toxicFault.ts"

/** Latency on Redis's replies to one instance; heal = remove it. */
export const netLatency: Fault = toxicFault("net-latency", (random) => {
  const latency = between(random, 100, 1000)
  return {
    toxics: [
      {
        name: "latency",
        type: "latency",
        stream: "downstream",
        attributes: { latency, jitter: Math.round(latency / 5) }
      }
    ]
  }
})
