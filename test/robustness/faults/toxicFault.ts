/**
 * The shape every toxiproxy fault shares: pick a random instance that has a
 * proxy to Redis, add the fault's toxics to that proxy (so only that
 * instance's link suffers), and remove them to heal. A toxic that drops
 * bytes while keeping the connection open (`timeout`) is healed by closing
 * the proxy's connections first: TCP never loses bytes from the middle of a
 * stream that goes on, so a connection that lost some must not carry more.
 */
import type { Toxic } from "../cluster/toxiproxy.ts"
import { type DetailFields, type Fault, pick, recordStep } from "./fault.ts"

/** What a toxic fault does to the link it hits. */
export interface ToxicPlan {
  readonly toxics: ReadonlyArray<Toxic>
  /** Extra fields for the inject record. */
  readonly fields?: DetailFields
  /** Close the proxy's connections before removing the toxics (for toxics that drop bytes). */
  readonly closeConnectionsOnHeal?: boolean
}

/** A fault made of toxics on one instance's link; `plan` chooses them (and their settings) with the run's random. */
export const toxicFault = (name: string, plan: (random: () => number) => ToxicPlan): Fault => ({
  name,
  available: (cluster) => cluster.proxies.size > 0,
  inject: async (context) => {
    const [instance, proxy] = pick(context.random, [...context.cluster.proxies])
    const chosen = plan(context.random)
    const at = context.now()
    for (const toxic of chosen.toxics) await proxy.addToxic(toxic)
    const toxicFields = Object.fromEntries(
      chosen.toxics.flatMap((toxic) => [
        [`${toxic.name}.type`, toxic.type],
        [`${toxic.name}.stream`, toxic.stream],
        ...Object.entries(toxic.attributes).map(([key, value]) => [`${toxic.name}.${key}`, value])
      ])
    )
    recordStep(context, name, "inject", instance, { proxy: proxy.name, ...chosen.fields, ...toxicFields }, at)
    return async () => {
      const close = chosen.closeConnectionsOnHeal ?? false
      if (close) await proxy.setEnabled(false)
      for (const toxic of chosen.toxics) await proxy.removeToxic(toxic.name)
      if (close) await proxy.setEnabled(true)
      recordStep(context, name, "heal", instance, { proxy: proxy.name, connectionsClosed: close })
    }
  }
})
