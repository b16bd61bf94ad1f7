/**
 * The watchers of one instance on the Redis backend. For each cluster it has
 * watchers of, the instance keeps a mirror (the affiliates at a revision),
 * listens to the cluster's change channel (sharded pub/sub, in the cluster's
 * slot: each change script announces its revision and epoch there) and, when
 * it hears of a revision it lacks, reads the cluster's change log from its
 * mirror's revision on (XRANGE), applies each change in order and fans it
 * out to the local watchers with the core's rule (a full watcher is cut
 * off). 1000 watchers of a cluster cost one listener and one read per
 * change, not 1000. A new watcher's snapshot is the mirror as it is, so it
 * sees every later change exactly once.
 *
 * A gap in the revisions (the log was trimmed behind the mirror) or an epoch
 * that changed (Redis lost the cluster, restarted, failed over or was
 * flushed) cuts the cluster's watchers off; they reconnect and start from a
 * fresh snapshot, or resume in the new epoch. When a connection to Redis
 * fails, every watcher of the clusters it served ends with UNAVAILABLE and
 * their mirrors are forgotten, listeners included. What no announcement
 * tells (a flush, a failover of a quiet cluster, a channel moved with its
 * slot) is found by `catchUp`, which the backend runs when its probe sees
 * Redis change.
 *
 * A watch is counted when it is asked for, before anything is awaited, so
 * watches that arrive together cannot all pass the cap; the clusters they
 * hold are counted by Redis (the held set, see scripts.ts), which this
 * instance renews while it watches an empty cluster and lets go of after.
 *
 * @since 0.1.0
 */
import { ChangeLog } from "../../core/server/ChangeLog.ts"
import { fanOut } from "../../core/server/fanOut.ts"
import type { AffiliateView, ResumePoint, WatchDelta, WatchSink } from "../../ports/ClusterApi.ts"
import { sequenceLost, type SubscriptionLost, Unavailable } from "../../ports/DiscoveryError.ts"
import type { Subscription } from "../../ports/StateBackend.ts"
import type { ClusterKeys } from "./keys.ts"
import { viewOf } from "./record.ts"
import { type RedisConnection, type Reply, script } from "./RedisConnection.ts"
import { readLog } from "./scripts.ts"

const readLogScript = script(readLog)

/** Changes read from a log at a time. */
const readBatch = 1000

/** Changes a mirror keeps in memory, so most resumed watches need no read of the log. */
const mirrorLogLength = 100

/** How many times a resumed watch reads the changes it missed while its mirror moves on, before it takes a snapshot. */
const resumeReads = 5

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
  /** Loaded and without affiliates: held in Redis while this instance watches it. */
  countedEmpty = false
  /** When its hold (an empty cluster's place, meta and log) was last renewed, in milliseconds. */
  renewedAt = 0
  /** The highest revision announced on its channel (or that it was loaded at). */
  heard = 0
  /** When `verify` last looked at it, and a revision the log held that the channel had not announced. */
  verifiedAt = 0
  suspect: number | undefined
  /** Watchers on their way in (reading what they missed): the mirror stays while there are any. */
  joining = 0
  /** Reads of the cluster's log under way for watchers that come back, by the revision they come back from. */
  readonly reads = new Map<
    number,
    Promise<{ readonly missed: ReadonlyArray<WatchDelta>; readonly end: number } | undefined>
  >()
  /** The changes applied since it was loaded (the last ones). */
  readonly log = new ChangeLog(mirrorLogLength)
  loaded = false
  /** A read of the log is under way; `again` asks for one more once it ends. */
  reading = false
  again = false
  ready: Promise<void> = Promise.resolve()
  /** What the mirror's channel calls with each announcement. */
  listener: (message: Buffer) => void = () => undefined
  readonly clusterId: string
  readonly keys: ClusterKeys
  constructor(clusterId: string, keys: ClusterKeys) {
    this.clusterId = clusterId
    this.keys = keys
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
  readonly #redis: RedisConnection
  readonly #load: (clusterId: string) => Promise<MirrorStart>
  readonly #keysOf: (clusterId: string) => ClusterKeys
  readonly #released: (clusterId: string) => Promise<void>
  /** Watches open or on their way in (reserved before anything is awaited). */
  #watches = 0
  #closed = false
  /** Mirrors forgotten whose channel is being let go (and their hold after it). */
  readonly #releasing = new Set<Promise<void>>()
  readonly #release = () => {
    this.#watches--
  }

  constructor(options: {
    readonly redis: RedisConnection
    readonly load: (clusterId: string) => Promise<MirrorStart>
    readonly keysOf: (clusterId: string) => ClusterKeys
    /** Called once the instance stopped listening to a cluster it loaded (it may let go of its hold). */
    readonly released?: ((clusterId: string) => Promise<void>) | undefined
  }) {
    this.#redis = options.redis
    this.#load = options.load
    this.#keysOf = options.keysOf
    this.#released = options.released ?? (async () => undefined)
    this.#redis.onConnectionLost((reason, node) => this.#failAll(reason, node))
    this.#redis.onChannelLost((channel, reason) => this.#channelLost(channel, reason))
  }

  /** Watches open on this instance, with those on their way in. */
  get watches(): number {
    return this.#watches
  }

  /**
   * Takes a watch's slot if fewer than `max` are taken, before anything is
   * awaited; `subscribe` keeps it or gives it back.
   */
  reserveWatch(max: number): boolean {
    if (this.#watches >= max) return false
    this.#watches++
    return true
  }

  /** Whether this instance watches `clusterId` (its mirror is loaded). */
  watching(clusterId: string): boolean {
    return this.#mirrors.get(clusterId)?.loaded === true
  }

  /**
   * Resolves once every watched cluster's mirror has applied every change
   * its log held when asked, and handed it to the watchers, and every
   * cluster no longer watched was let go (tests use it to know that
   * deliveries are done).
   */
  async drained(): Promise<void> {
    await Promise.all([...this.#releasing])
    for (const mirror of [...this.#mirrors.values()]) {
      await mirror.ready.catch(() => undefined)
      if (!mirror.loaded || this.#mirrors.get(mirror.clusterId) !== mirror) continue
      const latest = Number(text(await this.#redis.send(["HGET", mirror.keys.meta, "rev"], mirror.keys.meta)))
      this.#read(mirror)
      for (let waited = 0; this.#mirrors.get(mirror.clusterId) === mirror && mirror.revision < latest; waited++) {
        if (waited === 5000) throw new Error(`cluster ${mirror.clusterId} stayed behind revision ${latest}`)
        await new Promise((resolve) => setTimeout(resolve, 1))
      }
    }
  }

  /**
   * Registers `sink` in the slot `reserveWatch` took and gives what it
   * starts from: the changes after `resume` when its epoch is the cluster's
   * and the log still holds them, else the snapshot; `undefined` when
   * `signal` was aborted first. Nothing is registered, and the slot is given
   * back, when it fails or is aborted.
   */
  async subscribe(
    clusterId: string,
    sink: WatchSink,
    signal: AbortSignal,
    resume?: ResumePoint
  ): Promise<Subscription | undefined> {
    let registered = false
    try {
      const subscription = await this.#join(clusterId, sink, signal, resume)
      registered = subscription !== undefined
      return subscription
    } finally {
      if (!registered) this.#watches--
    }
  }

  async #join(
    clusterId: string,
    sink: WatchSink,
    signal: AbortSignal,
    resume: ResumePoint | undefined
  ): Promise<Subscription | undefined> {
    let mirror = this.#mirrors.get(clusterId)
    if (mirror === undefined) {
      const created = new Mirror(clusterId, this.#keysOf(clusterId))
      this.#mirrors.set(clusterId, created)
      created.ready = this.#start(created)
      created.ready.catch(() => this.#forget(created))
      mirror = created
    }
    let missed: ReadonlyArray<WatchDelta> | undefined
    mirror.joining++
    try {
      await mirror.ready
      // a failed read of what was missed costs the watcher a snapshot, not its watch
      if (resume?.epoch === mirror.epoch)
        missed = await this.#missedSince(mirror, resume.revision).catch(() => undefined)
    } finally {
      mirror.joining--
    }
    if (signal.aborted || this.#closed || this.#mirrors.get(clusterId) !== mirror) {
      if (mirror.sinks.size === 0 && mirror.joining === 0) this.#forget(mirror)
      if (signal.aborted) return undefined
      if (this.#closed) throw new Unavailable({ message: "server is shutting down" })
      return this.#join(clusterId, sink, signal, resume)
    }
    if (missed !== undefined && (missed.at(-1)?.revision ?? resume!.revision) !== mirror.revision) {
      // the mirror applied more changes before this ran: its log has them, or the watcher starts afresh
      missed = mirror.log.since(resume!.revision, mirror.revision)
    }
    mirror.sinks.add(sink)
    if (missed !== undefined) return { _tag: "Resumed", revision: resume!.revision, epoch: mirror.epoch, missed }
    return {
      _tag: "Snapshot",
      revision: mirror.revision,
      epoch: mirror.epoch,
      affiliates: [...mirror.affiliates.values()]
    }
  }

  /**
   * The changes after `revision` up to the mirror's revision when this
   * returns (so the sink registered right after gets every later one): from
   * the mirror's own log, else read from the cluster's log in Redis;
   * `undefined` when they are not all held any more, or `revision` is ahead
   * of the cluster.
   */
  async #missedSince(mirror: Mirror, revision: number): Promise<ReadonlyArray<WatchDelta> | undefined> {
    if (revision > mirror.revision) {
      // the watcher may come from an instance that was ahead of this mirror: let it catch up a little
      this.#read(mirror)
      for (let i = 0; i < 20 && revision > mirror.revision; i++) await new Promise((resolve) => setTimeout(resolve, 5))
      if (revision > mirror.revision) return undefined
    }
    const held = mirror.log.since(revision, mirror.revision)
    if (held !== undefined) return held
    // watchers that come back together from one point share one read
    let reading = mirror.reads.get(revision)
    if (reading === undefined) {
      const started = this.#readMissed(mirror, revision)
      reading = started
      mirror.reads.set(revision, started)
      started.then(
        () => mirror.reads.delete(revision),
        () => mirror.reads.delete(revision)
      )
    }
    const read = await reading
    // the mirror may have moved on since the read ended: its log then holds the rest, or the read was the last word
    return mirror.log.since(revision, mirror.revision) ?? (read?.end === mirror.revision ? read.missed : undefined)
  }

  /** Reads the changes after `revision` from the cluster's log in Redis, up to where the mirror is once it ends. */
  async #readMissed(
    mirror: Mirror,
    revision: number
  ): Promise<{ readonly missed: ReadonlyArray<WatchDelta>; readonly end: number } | undefined> {
    const missed: Array<WatchDelta> = []
    let after = revision
    for (let reads = 0; reads < resumeReads && after < mirror.revision; reads++) {
      const until = mirror.revision
      const [epoch, entries] = await this.#readLog(mirror, after + 1, `0-${until}`, until - after)
      if (epoch !== mirror.epoch) return undefined
      for (const entry of entries) {
        const [id, fields] = entry as ReadonlyArray<Reply>
        const next = Number(text(id).slice(2))
        if (next !== after + 1) return undefined
        missed.push(deltaOf(next, fields as ReadonlyArray<Reply>))
        after = next
      }
      if (after !== until) return undefined
    }
    if (after !== mirror.revision) return undefined
    // a new mirror's log starts empty: what was read serves the next watchers that come back from there
    if (mirror.log.size === 0) for (const delta of missed) mirror.log.push(delta)
    return { missed, end: after }
  }

  /** Ends a watch; the mirror goes with its last watcher. */
  unsubscribe(clusterId: string, sink: WatchSink): void {
    const mirror = this.#mirrors.get(clusterId)
    if (mirror === undefined || !mirror.sinks.delete(sink)) return
    this.#watches--
    if (mirror.sinks.size === 0 && mirror.joining === 0) this.#forget(mirror)
  }

  /**
   * Reads every watched log from its mirror's revision on: what
   * announcements were missed arrives now, and a mirror whose epoch Redis no
   * longer holds (flushed, restarted, failed over, moved) is cut off.
   */
  catchUp(): void {
    for (const mirror of this.#mirrors.values()) if (mirror.loaded) this.#read(mirror)
  }

  /**
   * The watched clusters without affiliates whose hold was last renewed
   * `every` milliseconds or more before `now` (or never since they emptied),
   * marked renewed at `now` (see `renewFailed`).
   */
  leasesDue(now: number, every: number): Array<string> {
    const due: Array<string> = []
    for (const mirror of this.#mirrors.values()) {
      if (mirror.countedEmpty && now - mirror.renewedAt >= every) {
        mirror.renewedAt = now
        due.push(mirror.clusterId)
      }
    }
    return due
  }

  /**
   * Checks that the channels still carry the announcements (a listener lost
   * without an error, as when node-redis moves a failed node's listeners,
   * would leave its watchers silent for good): each mirror not checked for
   * `every` milliseconds asks its
   * cluster's revision; one the channel had not announced is read now, and if
   * at the next check it was still not announced, the channel is lost and the
   * watchers start again (on a new mirror that listens again).
   */
  verify(now: number, every: number): void {
    for (const mirror of [...this.#mirrors.values()]) {
      if (!mirror.loaded || now - mirror.verifiedAt < every) continue
      mirror.verifiedAt = now
      if (mirror.suspect !== undefined && mirror.heard < mirror.suspect) {
        this.#cutOff(mirror, sequenceLost)
        continue
      }
      mirror.suspect = undefined
      this.#redis
        .send(["HGET", mirror.keys.meta, "rev"], mirror.keys.meta)
        .then((reply) => {
          const revision = Number(text(reply))
          if (this.#mirrors.get(mirror.clusterId) !== mirror || !(revision > mirror.heard)) return
          mirror.suspect = revision
          this.#read(mirror)
        })
        .catch(() => undefined)
    }
  }

  /** A renewal `leasesDue` handed out failed: the next one asks again. */
  renewFailed(clusterId: string): void {
    const mirror = this.#mirrors.get(clusterId)
    if (mirror !== undefined) mirror.renewedAt = 0
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
  }

  /** Listens to the cluster's channel first, so no change after the snapshot goes unheard, then takes the snapshot. */
  async #start(mirror: Mirror): Promise<void> {
    mirror.listener = (message) => this.#heard(mirror, message.toString("latin1"))
    await this.#redis.subscribe(mirror.keys.channel, mirror.listener)
    const start = await this.#load(mirror.clusterId)
    // a connection that failed meanwhile took the listener with it: the joiners start again, and
    // what the snapshot held is let go unless some instance listens again
    if (this.#mirrors.get(mirror.clusterId) !== mirror) {
      this.#released(mirror.clusterId).catch(() => undefined)
      return
    }
    mirror.revision = start.revision
    mirror.epoch = start.epoch
    mirror.affiliates = start.affiliates
    mirror.loaded = true
    mirror.heard = start.revision
    // the snapshot script held it if it was empty
    mirror.renewedAt = Date.now()
    mirror.verifiedAt = Date.now()
    this.#settle(mirror)
    this.#read(mirror)
  }

  /** Marks `mirror` empty or not, as its affiliates are now. */
  #settle(mirror: Mirror): void {
    const held = this.#mirrors.get(mirror.clusterId) === mirror
    const empty = held && mirror.loaded && mirror.affiliates.size === 0
    if (mirror.countedEmpty !== empty) {
      mirror.countedEmpty = empty
      // the change that emptied it held it, for the lease
      if (empty) mirror.renewedAt = Date.now()
    }
  }

  /** An announcement `<revision> <epoch>` of a change of the mirror's cluster. */
  #heard(mirror: Mirror, message: string): void {
    if (this.#mirrors.get(mirror.clusterId) !== mirror) {
      // a listener that outlived its mirror (moved with its node's other listeners): let it go
      this.#redis.unsubscribe(mirror.keys.channel, mirror.listener).catch(() => undefined)
      return
    }
    if (!mirror.loaded) return
    const space = message.indexOf(" ")
    const revision = Number(message.slice(0, space))
    if (revision > mirror.heard) mirror.heard = revision
    if (message.slice(space + 1) !== mirror.epoch) {
      this.#cutOff(mirror, sequenceLost)
      return
    }
    if (revision > mirror.revision) this.#read(mirror)
  }

  /** Reads the mirror's log from its revision on and applies what it finds, one read at a time. */
  #read(mirror: Mirror): void {
    if (mirror.reading) {
      mirror.again = true
      return
    }
    mirror.reading = true
    const next = async (): Promise<void> => {
      try {
        do {
          mirror.again = false
          const [epoch, entries] = await this.#readLog(mirror, mirror.revision + 1, "+", readBatch)
          if (this.#mirrors.get(mirror.clusterId) !== mirror) return
          if (epoch !== mirror.epoch) {
            this.#cutOff(mirror, sequenceLost)
            return
          }
          this.#apply(mirror, entries)
          if (entries.length === readBatch) mirror.again = true
        } while (mirror.again && this.#mirrors.get(mirror.clusterId) === mirror)
      } finally {
        // cleared in the step that made the last check, so a wake-up after it starts a read of its own
        mirror.reading = false
      }
    }
    next().catch((error: unknown) => this.#cutOff(mirror, unavailable(error)))
  }

  /** Entries of the mirror's log from revision `from` to `to` (an entry ID or `+`), with the epoch they belong to. */
  async #readLog(
    mirror: Mirror,
    from: number,
    to: string,
    count: number
  ): Promise<readonly [string, ReadonlyArray<Reply>]> {
    const reply = (await this.#redis.run(
      readLogScript,
      [mirror.keys.meta, mirror.keys.log],
      [`0-${from}`, to, String(count)]
    )) as ReadonlyArray<Reply>
    return [text(reply[0]), reply[1] as ReadonlyArray<Reply>]
  }

  #apply(mirror: Mirror, entries: ReadonlyArray<Reply>): void {
    for (const entry of entries) {
      const [id, fields] = entry as ReadonlyArray<Reply>
      const revision = Number(text(id).slice(2))
      if (revision <= mirror.revision) continue
      if (revision !== mirror.revision + 1) {
        this.#cutOff(mirror, sequenceLost)
        return
      }
      mirror.revision = revision
      const delta = deltaOf(revision, fields as ReadonlyArray<Reply>)
      if (delta._tag === "Updated") mirror.affiliates.set(delta.affiliate.id, delta.affiliate)
      else mirror.affiliates.delete(delta.affiliateId)
      mirror.log.push(delta)
      if (mirror.sinks.size > 0) fanOut(mirror.sinks, delta, this.#release)
    }
    this.#settle(mirror)
    if (mirror.sinks.size === 0 && mirror.joining === 0 && mirror.loaded) this.#forget(mirror)
  }

  #cutOff(mirror: Mirror, error: SubscriptionLost | Unavailable): void {
    this.#forget(mirror)
    const sinks = [...mirror.sinks]
    mirror.sinks.clear()
    this.#watches -= sinks.length
    for (const sink of sinks) sink.end(error)
  }

  /**
   * A connection failed (under Redis Cluster, the one to `node`): the
   * watchers of the clusters it served end with UNAVAILABLE, and mirrors
   * still loading are dropped, so their joiners start again on a connection
   * that works.
   */
  #failAll(reason: string, node: string | undefined): void {
    const error = unavailable(new Error(reason))
    for (const mirror of [...this.#mirrors.values()]) {
      if (node !== undefined && this.#redis.nodeOf(mirror.keys.channel) !== node) continue
      if (mirror.loaded) this.#cutOff(mirror, error)
      else this.#forget(mirror)
    }
  }

  /** A channel's listener was lost (its slot moved and listening again failed): its watchers start again. */
  #channelLost(channel: string, reason: string): void {
    for (const mirror of [...this.#mirrors.values()]) {
      if (mirror.keys.channel !== channel) continue
      if (mirror.loaded) this.#cutOff(mirror, unavailable(new Error(reason)))
      else this.#forget(mirror)
    }
  }

  #forget(mirror: Mirror): void {
    if (this.#mirrors.get(mirror.clusterId) !== mirror) return
    this.#mirrors.delete(mirror.clusterId)
    this.#settle(mirror)
    const releasing: Promise<void> = this.#redis
      .unsubscribe(mirror.keys.channel, mirror.listener)
      .then(() => {
        if (mirror.loaded && !this.#closed) return this.#released(mirror.clusterId)
      })
      .catch(() => undefined)
      .finally(() => this.#releasing.delete(releasing))
    this.#releasing.add(releasing)
  }
}

/** The change a log entry (`a` the affiliate ID, `r` its record, absent for a removal) stands for. */
const deltaOf = (revision: number, fields: ReadonlyArray<Reply>): WatchDelta => {
  let affiliateId = ""
  let record: Buffer | undefined
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = text(fields[i])
    if (name === "a") affiliateId = text(fields[i + 1])
    else if (name === "r") record = fields[i + 1] as Buffer
  }
  return record === undefined
    ? { _tag: "Deleted", revision, affiliateId }
    : { _tag: "Updated", revision, affiliate: viewOf(affiliateId, record) }
}

const unavailable = (error: unknown): Unavailable =>
  new Unavailable({ message: `state backend unavailable: ${error instanceof Error ? error.message : String(error)}` })
