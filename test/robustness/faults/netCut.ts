/**
 * `net-cut`: one instance loses its link to Redis: its proxy is disabled,
 * which closes the open connections and refuses new ones, so the instance
 * answers UNAVAILABLE and `/readyz` 503 while the others carry on; healed
 * by enabling the proxy again.
 */
import { type Fault, pick, recordStep } from "./fault.ts"

const name = "net-cut"

/** One instance's proxy disabled; heal = enable it. */
export const netCut: Fault = {
  name,
  available: (cluster) => cluster.proxies.size > 0,
  inject: async (context) => {
    const [instance, proxy] = pick(context.random, [...context.cluster.proxies])
    const at = context.now()
    await proxy.setEnabled(false)
    recordStep(context, name, "inject", instance, { proxy: proxy.name, enabled: false }, at)
    return async () => {
      await proxy.setEnabled(true)
      recordStep(context, name, "heal", instance, { proxy: proxy.name, enabled: true })
    }
  }
}
