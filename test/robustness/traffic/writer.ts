/**
 * A writer: random AffiliateUpdate, AffiliateDelete and List calls over a few
 * clusters, each through a random instance, every call recorded with its
 * start, end and outcome. Updates vary what the protocol lets them vary:
 * new, same or no data (some of the largest size), endpoints from a small
 * pool per affiliate (some of the largest size; now and then about as many
 * as an affiliate may hold), TTLs from a second to the 30-minute limit,
 * mostly short so that expiry runs all the time.
 */
import type { CallRecord } from "../history.ts"
import { digest } from "../history.ts"
import { affiliateRecord, bytesOf, intBetween, outcomeOf, pickOf, sleep, type TrafficContext } from "./traffic.ts"
import { WireClient } from "./wireClient.ts"

/** What a writer works on. */
export interface WriterOptions {
  readonly name: string
  readonly clusters: ReadonlyArray<string>
  /** Affiliates per cluster it picks from. */
  readonly affiliates: number
  /** Pause between two calls, in milliseconds: [low, high]. */
  readonly pauseMillis: readonly [number, number]
}

const ttlChoices = [1000, 2000, 3000, 5000, 8000, 12_000, 20_000, 30_000, 30 * 60_000]

/** Runs one writer until the traffic stops. */
export const runWriter = async (context: TrafficContext, options: WriterOptions, random: () => number) => {
  const write = context.files.writer(options.name)
  const clients = new Map(
    context.targets.map((target) => [target.name, new WireClient(target.address, context.deadlineMillis)])
  )
  /** The `i`-th endpoint blob of an affiliate (16 to 32 bytes; the sixth of each ten at the 32-byte limit). */
  const endpointOf = (affiliate: string, i: number) =>
    new TextEncoder().encode(`${affiliate}/${i}`.padEnd(i % 10 === 5 ? 32 : 16 + (i % 10), ".")).subarray(0, 32)
  /** Endpoint blobs each affiliate draws from, so updates repeat some and add others. */
  const endpointPool = (affiliate: string) => Array.from({ length: 6 }, (_, i) => endpointOf(affiliate, i))
  try {
    while (await context.control.enter()) {
      try {
        write(await oneCall())
      } finally {
        context.control.leave()
      }
      await sleep(context, intBetween(random, options.pauseMillis[0], options.pauseMillis[1]))
    }
  } finally {
    for (const client of clients.values()) client.close()
  }

  async function oneCall(): Promise<CallRecord> {
    const target = pickOf(random, context.targets)
    const client = clients.get(target.name)!
    const cluster = pickOf(random, options.clusters)
    const affiliate = `a${intBetween(random, 0, options.affiliates - 1)}`
    const roll = random()
    const start = context.files.now()
    const base = { type: "call", client: options.name, instance: target.name, cluster, start } as const
    let record: CallRecord
    if (roll < 0.65) {
      const dataRoll = random()
      const data =
        dataRoll < 0.15 ? new Uint8Array(0) : bytesOf(random, dataRoll < 0.2 ? 2048 : intBetween(random, 8, 48))
      const pool = endpointPool(`${cluster}/${affiliate}`)
      // now and then about as many distinct endpoints as an affiliate may hold (64): some pass, some are refused whole
      const endpoints =
        random() < 0.03
          ? Array.from({ length: intBetween(random, 58, 70) }, (_, i) => endpointOf(`${cluster}/${affiliate}`, i))
          : Array.from({ length: intBetween(random, 0, 3) }, () => pickOf(random, pool))
      const ttlMillis = pickOf(random, ttlChoices)
      const result = await client.update({ clusterId: cluster, affiliateId: affiliate, data, endpoints, ttlMillis })
      record = {
        ...base,
        op: "update",
        affiliate,
        data: digest(data),
        endpoints: endpoints.map(digest),
        ttlMillis,
        end: context.files.now(),
        outcome: outcomeOf(result),
        ...(result.ok ? {} : { code: result.code, message: result.message })
      }
    } else if (roll < 0.8) {
      const result = await client.delete(cluster, affiliate)
      record = {
        ...base,
        op: "delete",
        affiliate,
        end: context.files.now(),
        outcome: outcomeOf(result),
        ...(result.ok ? {} : { code: result.code, message: result.message })
      }
    } else {
      const result = await client.list(cluster)
      record = {
        ...base,
        op: "list",
        end: context.files.now(),
        outcome: outcomeOf(result),
        ...(result.ok
          ? { affiliates: result.value.affiliates.map(affiliateRecord) }
          : { code: result.code, message: result.message })
      }
    }
    return record
  }
}
