/**
 * Pressure on the caps: now and then an update or a watch of a cluster no
 * one used before, or watches of new clusters opened at once on every
 * instance (pushing the count of clusters past `--max-clusters`), or a burst
 * of watches opened at once on one instance (pushing its count past
 * `--max-watches`), held a moment and closed. Every call and watch is
 * recorded like any other, so the validators check that the caps held at
 * every moment and that a refusal changed nothing.
 */
import { digest } from "../history.ts"
import { openRecordedWatch, type RecordedWatch } from "./recordedWatch.ts"
import { bytesOf, intBetween, outcomeOf, pickOf, sleep, type TrafficContext } from "./traffic.ts"
import { WireClient } from "./wireClient.ts"

/** How hard it presses. */
export interface CapPressureOptions {
  readonly name: string
  /** Clusters the burst of watches goes to. */
  readonly clusters: ReadonlyArray<string>
  /** Watches in one burst. */
  readonly burst: number
}

/** Runs the pressure until the traffic stops; every watch it opened is closed when it returns. */
export const runCapPressure = async (context: TrafficContext, options: CapPressureOptions, random: () => number) => {
  const write = context.files.writer(options.name)
  const clients = new Map(
    context.targets.map((target) => [target.name, new WireClient(target.address, context.deadlineMillis)])
  )
  let fresh = 0
  let watches = 0
  const watchOf = (instance: string, cluster: string): RecordedWatch =>
    openRecordedWatch({
      context,
      write,
      client: clients.get(instance)!,
      instance,
      watcher: `${options.name}.w${watches}`,
      id: `${options.name}.w${watches++}`,
      cluster,
      state: { point: undefined, view: new Map() },
      resume: undefined,
      reads: true
    })
  try {
    while (!context.stopped()) {
      await sleep(context, intBetween(random, 500, 2500))
      if (!(await context.control.enter())) break
      const target = pickOf(random, context.targets)
      const roll = random()
      if (roll < 0.4) {
        const cluster = `fresh-${options.name}-${fresh++}`
        const data = bytesOf(random, 16)
        const ttlMillis = intBetween(random, 1000, 4000)
        const start = context.files.now()
        const result = await clients
          .get(target.name)!
          .update({ clusterId: cluster, affiliateId: "only", data, endpoints: [], ttlMillis })
        write({
          type: "call",
          client: options.name,
          instance: target.name,
          op: "update",
          cluster,
          affiliate: "only",
          data: digest(data),
          endpoints: [],
          ttlMillis,
          start,
          end: context.files.now(),
          outcome: outcomeOf(result),
          ...(result.ok ? {} : { code: result.code, message: result.message })
        })
      } else if (roll < 0.55) {
        const watch = watchOf(target.name, `fresh-${options.name}-${fresh++}`)
        await Promise.race([watch.ended, sleep(context, intBetween(random, 500, 3000))])
        watch.cancel()
        await watch.ended
      } else if (roll < 0.7) {
        // watches of new clusters on every instance at once: more than the cap on clusters in all
        const burst = context.targets.flatMap((each) =>
          Array.from({ length: options.burst / 2 }, () => watchOf(each.name, `fresh-${options.name}-${fresh++}`))
        )
        await Promise.race([
          Promise.all(burst.map((watch) => watch.ended)),
          sleep(context, intBetween(random, 500, 2000))
        ])
        for (const watch of burst) watch.cancel()
        await Promise.all(burst.map((watch) => watch.ended))
      } else {
        const cluster = pickOf(random, options.clusters)
        const burst = Array.from({ length: options.burst }, () => watchOf(target.name, cluster))
        await Promise.race([
          Promise.all(burst.map((watch) => watch.ended)),
          sleep(context, intBetween(random, 300, 1500))
        ])
        for (const watch of burst) watch.cancel()
        await Promise.all(burst.map((watch) => watch.ended))
      }
      context.control.leave()
    }
  } finally {
    for (const client of clients.values()) client.close()
  }
}
