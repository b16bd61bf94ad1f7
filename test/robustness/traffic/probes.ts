/**
 * The run's probes of each instance: every quarter second `/readyz` and a
 * List with a short deadline (the *alive* validator's evidence), and every
 * second the state gauges of `/metrics` (the *bounded* and *convergent*
 * validators'). A probe that gets no answer is recorded as such.
 */
import type { GaugeRecord } from "../history.ts"
import { sleep, type Target, type TrafficContext } from "./traffic.ts"
import { WireClient } from "./wireClient.ts"

const gaugeNames = {
  clusters: "discovery_state_clusters",
  affiliates: "discovery_state_affiliates",
  endpoints: "discovery_state_endpoints",
  watches: "discovery_state_subscriptions"
} as const

/** The state gauges `/metrics` of `target` shows now, or undefined when it does not answer. */
export const gaugesOf = async (target: Target, at: () => number): Promise<GaugeRecord | undefined> => {
  try {
    const response = await fetch(`http://127.0.0.1:${target.metricsPort}/metrics`, {
      signal: AbortSignal.timeout(2000)
    })
    const text = await response.text()
    const value = (name: string) =>
      Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(text)?.[1] ?? Number.NaN)
    return {
      type: "gauges",
      instance: target.name,
      at: at(),
      clusters: value(gaugeNames.clusters),
      affiliates: value(gaugeNames.affiliates),
      endpoints: value(gaugeNames.endpoints),
      watches: value(gaugeNames.watches)
    }
  } catch {
    return undefined
  }
}

/** Probes every instance until `done()`; the probe's List goes to `cluster`. */
export const runProbes = async (context: TrafficContext, cluster: string, done: () => boolean) => {
  const write = context.files.writer("probes")
  const clients = new Map(context.targets.map((target) => [target.name, new WireClient(target.address, 1000)]))
  let round = 0
  try {
    while (!done()) {
      await Promise.all(
        context.targets.map(async (target) => {
          const [status, listed] = await Promise.all([target.readyz(), clients.get(target.name)!.list(cluster)])
          write({ type: "probe", instance: target.name, at: context.files.now(), readyz: status, answered: listed.ok })
          if (round % 4 === 0) {
            const gauges = await gaugesOf(target, context.files.now)
            if (gauges !== undefined) write(gauges)
          }
        })
      )
      round++
      await sleep({ ...context, stopped: done }, 250)
    }
  } finally {
    for (const client of clients.values()) client.close()
  }
}
