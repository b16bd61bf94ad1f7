/**
 * The watchers of one instance on the Redis backend. For each cluster it has
 * watchers of, the instance keeps a mirror (the affiliates at a revision)
 * and reads that cluster's change log once, on one connection of its own
 * that blocks in XREAD over every watched log; each change is applied to the
 * mirror and fanned out to the local watchers with the core's rule (a full
 * watcher is cut off). 1000 watchers of a cluster cost one reader, not 1000.
 * A new watcher's snapshot is the mirror as it is, so it sees every later
 * change exactly once. A gap in the revisions (the log was trimmed behind
 * the reader) cuts the cluster's watchers off, as does an epoch that changed
 * (Redis lost the cluster); they reconnect and start from a fresh snapshot.
 * When the connection fails, every watcher ends with UNAVAILABLE.
 *
 * @since 0.1.0
 */
import type { AffiliateView, WatchDelta, WatchSink } from "../../ports/ClusterApi.ts"
import { lostUpdateMessage, SubscriptionLost, Unavailable } from "../../ports/DiscoveryError.ts"
import type { Subscription } from "../../ports/StateBackend.ts"
import { fanOut } from "../../core/server/fanOut.ts"
import type { ClusterKeys } from "./keys.ts"
import { viewOf } from "./record.ts"
import type { RedisConnection, Reply } from "./RedisConnection.ts"

const lostUpdate = new SubscriptionLost({ message: lostUpdateMessage })

/**
 * The longest a read blocks: a new cluster's log joins the read when the
 * reader is woken (CLIENT UNBLOCK), or at the latest after this, should the
 * wake reach Redis before the read it interrupts.
 */
const blockMillis = 1000

/**
 * The snapshot a mirror starts from, as the backend reads it.
 *
 * @category models
 * @since 0.1.0
 */
export interface MirrorStart {
  readonly revision: number
  readonly epoch: string
  readonly affiliates: Map<string, AffiliateView>
}

/** One watched cluster: its affiliates at `revision`, and its watchers on this instance. */
class Mirror {
  revision = 0
  epoch = ""
  affiliates = new Map<string, AffiliateView>()
  readonly sinks = new Set<WatchSink>()
  loaded = false
  readonly ready: Promise<void>
  readonly clusterId: string
  readonly keys: ClusterKeys
  constructor(clusterId: string, keys: ClusterKeys, load: Promise<MirrorStart>) {
    this.clusterId = clusterId
    this.keys = keys
    this.ready = load.then((start) => {
      this.revision = start.revision
      this.epoch = start.epoch
      this.affiliates = start.affiliates
      this.loaded = true
    })
  }
}

const text = (reply: Reply | undefined): string => (Buffer.isBuffer(reply) ? reply.toString("utf8") : String(reply))

/**
 * The instance's watchers over the Redis change logs.
 *
 * @category models
 * @since 0.1.0
 */
export class ChangeFeed {
  readonly #mirrors = new Map<string, Mirror>()
  readonly #byLog = new Map<string, Mirror>()
  readonly #reader: RedisConnection
  readonly #commands: RedisConnection
  readonly #load: (clusterId: string) => Promise<MirrorStart>
  readonly #keysOf: (clusterId: string) => ClusterKeys
  #watches = 0
  #closed = false
  #readerId: number | undefined
  #reading = false
  #wake: (() => void) | undefined
  readonly #release = () => {
    this.#watches--
  }

  constructor(options: {
    readonly reader: RedisConnection
    readonly commands: RedisConnection
    readonly load: (clusterId: string) => Promise<MirrorStart>
    readonly keysOf: (clusterId: string) => ClusterKeys
  }) {
    this.#reader = options.reader
    this.#commands = options.commands
    this.#load = options.load
    this.#keysOf = options.keysOf
  }

  /** Watches open on this instance. */
  get watches(): number {
    return this.#watches
  }

  /** Clusters watched here that have no affiliates (they count as held, as in memory). */
  get emptyWatched(): number {
    let empty = 0
    for (const mirror of this.#mirrors.values()) if (mirror.loaded && mirror.affiliates.size === 0) empty++
    return empty
  }

  /** The clusters this instance watches, with the epoch each mirror started in. */
  watched(): Array<{ readonly clusterId: string; readonly keys: ClusterKeys; readonly epoch: string }> {
    const watched = []
    for (const mirror of this.#mirrors.values()) if (mirror.loaded) watched.push(mirror)
    return watched
  }

  /**
   * Registers `sink` and gives the snapshot it starts from; `undefined`
   * when `signal` was aborted first (nothing is registered then).
   */
  async subscribe(clusterId: string, sink: WatchSink, signal: AbortSignal): Promise<Subscription | undefined> {
    let mirror = this.#mirrors.get(clusterId)
    if (mirror === undefined) {
      mirror = new Mirror(clusterId, this.#keysOf(clusterId), this.#load(clusterId))
      this.#mirrors.set(clusterId, mirror)
      this.#byLog.set(mirror.keys.log, mirror)
      const started = mirror
      mirror.ready.then(
        () => this.#wakeReader(),
        () => this.#forget(started)
      )
    }
    await mirror.ready
    if (signal.aborted || this.#closed || this.#mirrors.get(clusterId) !== mirror) {
      if (mirror.sinks.size === 0) this.#forget(mirror)
      if (signal.aborted) return undefined
      if (this.#closed) throw new Unavailable({ message: "server is shutting down" })
      return this.subscribe(clusterId, sink, signal)
    }
    mirror.sinks.add(sink)
    this.#watches++
    return { revision: mirror.revision, epoch: mirror.epoch, affiliates: [...mirror.affiliates.values()] }
  }

  /** Ends a watch; the mirror goes with its last watcher. */
  unsubscribe(clusterId: string, sink: WatchSink): void {
    const mirror = this.#mirrors.get(clusterId)
    if (mirror === undefined || !mirror.sinks.delete(sink)) return
    this.#watches--
    if (mirror.sinks.size === 0) this.#forget(mirror)
  }

  /** Cuts off the watchers of a cluster whose epoch is no longer `epoch` (Redis lost it). */
  epochSeen(clusterId: string, epoch: string): void {
    const mirror = this.#mirrors.get(clusterId)
    if (mirror?.loaded && mirror.epoch !== epoch) this.#cutOff(mirror, lostUpdate)
  }

  /** Ends every watch with `end`, and every later read (shutdown). */
  close(end: (sink: WatchSink) => void): void {
    this.#closed = true
    for (const mirror of [...this.#mirrors.values()]) {
      this.#forget(mirror)
      for (const sink of mirror.sinks) end(sink)
      this.#watches -= mirror.sinks.size
      mirror.sinks.clear()
    }
    this.#wake?.()
  }

  /** Reads the change logs until `close`; a failed read ends every watch with UNAVAILABLE, then reading goes on. */
  async run(): Promise<void> {
    while (!this.#closed) {
      const mirrors = [...this.#mirrors.values()].filter((mirror) => mirror.loaded)
      if (mirrors.length === 0) {
        await new Promise<void>((resolve) => {
          this.#wake = resolve
        })
        this.#wake = undefined
        continue
      }
      try {
        this.#readerId ??= Number(await this.#reader.send(["CLIENT", "ID"]))
        const args = ["XREAD", "COUNT", "1000", "BLOCK", String(blockMillis), "STREAMS"]
        for (const mirror of mirrors) args.push(mirror.keys.log)
        for (const mirror of mirrors) args.push(`0-${mirror.revision}`)
        this.#reading = true
        const reply = await this.#reader.send(args)
        this.#reading = false
        if (Array.isArray(reply)) this.#apply(reply)
      } catch (error) {
        this.#reading = false
        this.#readerId = undefined
        if (this.#closed) return
        this.#failAll(error)
        await new Promise((resolve) => setTimeout(resolve, 200))
      }
    }
  }

  #apply(streams: ReadonlyArray<Reply>): void {
    for (const stream of streams) {
      const [key, entries] = stream as ReadonlyArray<Reply>
      const mirror = this.#byLog.get(text(key))
      if (mirror === undefined || !Array.isArray(entries)) continue
      for (const entry of entries) {
        const [id, fields] = entry as ReadonlyArray<Reply>
        const revision = Number(text(id).slice(2))
        if (revision <= mirror.revision) continue
        if (revision !== mirror.revision + 1) {
          this.#cutOff(mirror, lostUpdate)
          break
        }
        mirror.revision = revision
        const delta = this.#deltaOf(mirror, revision, fields as ReadonlyArray<Reply>)
        if (mirror.sinks.size > 0) fanOut(mirror.sinks, delta, this.#release)
      }
      if (mirror.sinks.size === 0) this.#forget(mirror)
    }
  }

  #deltaOf(mirror: Mirror, revision: number, fields: ReadonlyArray<Reply>): WatchDelta {
    let affiliateId = ""
    let record: Buffer | undefined
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const name = text(fields[i])
      if (name === "a") affiliateId = text(fields[i + 1])
      else if (name === "r") record = fields[i + 1] as Buffer
    }
    if (record === undefined) {
      mirror.affiliates.delete(affiliateId)
      return { _tag: "Deleted", revision, affiliateId }
    }
    const affiliate = viewOf(affiliateId, record)
    mirror.affiliates.set(affiliateId, affiliate)
    return { _tag: "Updated", revision, affiliate }
  }

  #wakeReader(): void {
    if (this.#wake !== undefined) this.#wake()
    else if (this.#reading && this.#readerId !== undefined) {
      this.#commands.send(["CLIENT", "UNBLOCK", String(this.#readerId)]).catch(() => undefined)
    }
  }

  #cutOff(mirror: Mirror, error: SubscriptionLost | Unavailable): void {
    this.#forget(mirror)
    const sinks = [...mirror.sinks]
    mirror.sinks.clear()
    this.#watches -= sinks.length
    for (const sink of sinks) sink.end(error)
  }

  #failAll(error: unknown): void {
    const reason = error instanceof Error ? error.message : String(error)
    const unavailable = new Unavailable({ message: `state backend unavailable: ${reason}` })
    for (const mirror of [...this.#mirrors.values()]) if (mirror.loaded) this.#cutOff(mirror, unavailable)
  }

  #forget(mirror: Mirror): void {
    if (this.#mirrors.get(mirror.clusterId) === mirror) this.#mirrors.delete(mirror.clusterId)
    if (this.#byLog.get(mirror.keys.log) === mirror) this.#byLog.delete(mirror.keys.log)
  }
}
