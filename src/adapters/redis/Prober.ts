/**
 * What an instance on Redis checks every second, whether or not anything
 * changes: whether Redis is still the one its mirrors were loaded from, the
 * counts behind the state gauges, and the holds of the empty clusters it
 * watches. Redis is "still the one" while each primary keeps its incarnation
 * (its run_id and replication ID: a restart from any file, a failover and a
 * resync change them), its marker key (a flush removes it) and its slots;
 * when any of them changes, every mirror is checked against Redis
 * (`ChangeFeed.catchUp`), so watchers of a quiet cluster learn of a flush or
 * a failover within a probe, not at its next change. Each probe is one
 * script per primary, whatever the number of watched clusters, plus one per
 * empty watched cluster whose hold is due (a third of the lease after the
 * last renewal); and each mirror checks every 5 s that its channel still
 * carries the announcements (`ChangeFeed.verify`: one HGET per watched
 * cluster every 5 s).
 *
 * @since 0.1.0
 */
import { randomBytes } from "node:crypto"
import type { ChangeFeed } from "./ChangeFeed.ts"
import type { Keyspace } from "./keys.ts"
import { type RedisConnection, type Reply, script } from "./RedisConnection.ts"
import * as Scripts from "./scripts.ts"

const probeScript = script(Scripts.probe)

/**
 * The counts a probe read: clusters with affiliates, affiliates, endpoints.
 *
 * @category models
 * @since 0.1.0
 */
export interface ProbedCounts {
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
}

/** How often each mirror checks that its channel still carries the announcements. */
const verifyEveryMillis = 5000

/** A marker no probe wrote before: one written after a flush differs from the one the flush removed. */
const newMarker = (): string => randomBytes(9).toString("base64url")

const text = (reply: Reply | undefined): string => (Buffer.isBuffer(reply) ? reply.toString("utf8") : String(reply))

/**
 * The periodic probe of one instance's Redis.
 *
 * @category models
 * @since 0.1.0
 */
export class Prober {
  readonly #redis: RedisConnection
  readonly #keys: Keyspace
  readonly #feed: ChangeFeed
  readonly #renewHeld: () => Promise<void>
  readonly #counted: (counts: ProbedCounts) => void
  readonly #changed: () => void
  /** What Redis was at the last probe that answered. */
  #identity: string | undefined
  /** The marker key found for each primary (while it holds that key's slot). */
  readonly #markers = new Map<string, string>()
  #timer: ReturnType<typeof setInterval> | undefined
  #running = false

  constructor(options: {
    readonly redis: RedisConnection
    readonly keys: Keyspace
    readonly feed: ChangeFeed
    /** Holds the watched empty clusters whose hold is due. */
    readonly renewHeld: () => Promise<void>
    readonly counted: (counts: ProbedCounts) => void
    /** Called when Redis changed (after every mirror was asked to check itself). */
    readonly changed: () => void
  }) {
    this.#redis = options.redis
    this.#keys = options.keys
    this.#feed = options.feed
    this.#renewHeld = options.renewHeld
    this.#counted = options.counted
    this.#changed = options.changed
  }

  /** Probes once now (a failure is left to the next one), then every `intervalMillis`. */
  async start(intervalMillis: number): Promise<void> {
    await this.probe()
    this.#timer = setInterval(() => void this.probe(), intervalMillis)
    this.#timer.unref()
  }

  /** Stops probing. */
  stop(): void {
    clearInterval(this.#timer)
  }

  /** One probe; one that is still running when the next is due makes that one a no-op. */
  async probe(): Promise<void> {
    if (this.#running || !this.#redis.ready) return
    this.#running = true
    try {
      this.#feed.verify(Date.now(), verifyEveryMillis)
      await Promise.all([this.#check(), this.#renewHeld()])
    } catch {
      // Redis unreachable or failing over: the connection's own failure handling ends what it must
    } finally {
      this.#running = false
    }
  }

  /** Redis's `maxmemory-policy` (`undefined` when Redis does not say, e.g. CONFIG is disabled). */
  async evictionPolicy(): Promise<string | undefined> {
    try {
      const [[, reply]] = (await this.#redis.sendToPrimaries(["CONFIG", "GET", "maxmemory-policy"])) as [
        readonly [string, Reply]
      ]
      const pair = reply as ReadonlyArray<Reply>
      return pair.length === 2 ? text(pair[1]) : undefined
    } catch {
      return undefined
    }
  }

  async #check(): Promise<void> {
    const redis = this.#redis
    if (!redis.cluster) {
      const reply = (await redis.run(
        probeScript,
        [this.#keys.marker, this.#keys.index, this.#keys.counts, this.#keys.held],
        [newMarker()]
      )) as ReadonlyArray<Reply>
      this.#seen(`${text(reply[0])}/${text(reply[1])}`)
      this.#counted({
        clusters: Number(reply[2]),
        affiliates: Number(text(reply[3])),
        endpoints: Number(text(reply[4]))
      })
      return
    }
    const primaries = redis.primaries()
    const identities = await Promise.all(
      primaries.map(async (address) => {
        const reply = (await redis.run(probeScript, [this.#markerOn(address)], [newMarker()])) as ReadonlyArray<Reply>
        return `${address}=${text(reply[0])}/${text(reply[1])}`
      })
    )
    this.#seen(`${identities.sort().join(",")}|${redis.topology}`)
    await redis.send(["ZREMRANGEBYSCORE", this.#keys.held, "-inf", String(Date.now())], this.#keys.held)
    const [indexed, held, counts] = (await Promise.all([
      redis.send(["ZCARD", this.#keys.index], this.#keys.index),
      redis.send(["ZCARD", this.#keys.held], this.#keys.held),
      redis.send(["HMGET", this.#keys.counts, "affiliates", "endpoints"], this.#keys.counts)
    ])) as [number, number, ReadonlyArray<Reply>]
    const clusters = indexed + held
    this.#counted({
      clusters,
      affiliates: Number(text(counts[0]) || 0),
      endpoints: Number(text(counts[1]) || 0)
    })
  }

  #seen(identity: string): void {
    const previous = this.#identity
    this.#identity = identity
    if (previous === undefined || previous === identity) return
    this.#feed.catchUp()
    this.#changed()
  }

  /** A marker key that lives on the primary at `address` (under Redis Cluster each primary has its own). */
  #markerOn(address: string): string {
    const known = this.#markers.get(address)
    if (known !== undefined && this.#redis.nodeOf(known) === address) return known
    for (let i = 0; i < 100_000; i++) {
      const key = this.#keys.markerOf(`m${i}`)
      if (this.#redis.nodeOf(key) === address) {
        this.#markers.set(address, key)
        return key
      }
    }
    return this.#keys.markerOf("m0")
  }
}
