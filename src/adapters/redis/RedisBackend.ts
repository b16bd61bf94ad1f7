/**
 * The Redis backend: the `StateBackend` port over Redis 7.0 (or Valkey), so
 * several instances share one state. Each change is one Lua script
 * (`scripts.ts`); watches are served by the instance's `ChangeFeed`; expiry
 * is a sweep any instance may run, announced once whoever runs it. Every
 * failure to reach Redis is `Unavailable` with a message that says so.
 *
 * On a single Redis the scripts also keep the instance-wide index of
 * clusters (by next due time) and the counts; under Redis Cluster those live
 * in other slots, so the instance applies what each script reports right
 * after it, and the cap on clusters is checked against the count it last
 * saw (it may be passed by what instances create between two probes).
 *
 * Every second the instance probes Redis: its incarnation (run_id) and a
 * marker key show a restart, a failover or a flush, after which every
 * mirror is checked against Redis (see `ChangeFeed.catchUp`); the counts
 * behind the gauges are read; and the watched clusters without affiliates
 * are held again (see `renewHeld` in scripts.ts).
 *
 * @since 0.1.0
 */
import { randomBytes } from "node:crypto"
import { hostname } from "node:os"
import type { Scope } from "effect"
import { Duration, Effect, Layer } from "effect"
import type { ChangeCause, ChangeRecord } from "../../ports/ChangeCause.ts"
import { changeCauses } from "../../ports/ChangeCause.ts"
import { historyLength } from "../../core/server/ClusterStore.ts"
import { LimitMessages, Limits } from "../../core/server/limits.ts"
import type { AffiliateView } from "../../ports/ClusterApi.ts"
import { ResourceExhausted, Unavailable } from "../../ports/DiscoveryError.ts"
import type { GcReport, StateCaps, StateBackendShape, StoreStats } from "../../ports/StateBackend.ts"
import { StateBackend } from "../../ports/StateBackend.ts"
import { ChangeFeed, type MirrorStart } from "./ChangeFeed.ts"
import { Prober } from "./Prober.ts"
import { scriptKeys, settled, withPlace } from "./bookkeeping.ts"
import { keyspace } from "./keys.ts"
import { viewOf } from "./record.ts"
import type { RedisOptions, Reply } from "./RedisConnection.ts"
import { RedisConnection, script } from "./RedisConnection.ts"
import * as Scripts from "./scripts.ts"

/**
 * How the backend keeps the state.
 *
 * @category models
 * @since 0.1.0
 */
export interface RedisBackendOptions extends RedisOptions {
  /** Prefix of every key (default `discovery:`), so several services can share one Redis. */
  readonly keyPrefix?: string | undefined
  /** Caps on clusters (all instances) and watches (this instance). */
  readonly caps: StateCaps
  /** Changes kept in each cluster's log (default 1000; trimmed approximately, never below this). */
  readonly logLength?: number | undefined
  /** How long a cluster without affiliates keeps its revisions, in milliseconds (default 1 hour). */
  readonly emptyRetentionMillis?: number | undefined
  /**
   * How long a watched cluster without affiliates stays held (its place under
   * the cap on clusters, and its meta: a cluster that only ever had watchers
   * keeps its epoch that long) after the instances watching it last renewed
   * it, in milliseconds (default 30 s; they renew it every third of that).
   */
  readonly watchLeaseMillis?: number | undefined
  /** Period of the probe of Redis (incarnation, flush, counts, holds), in milliseconds (default 1000). */
  readonly probeIntervalMillis?: number | undefined
  /** How this instance is named in the causes of the changes it applies (default `<host name>/<process ID>`). */
  readonly instanceName?: string | undefined
}

/**
 * The port, plus what an operator or a test asks of the Redis backend.
 *
 * @category models
 * @since 0.1.0
 */
export interface RedisStateBackend extends StateBackendShape {
  /** Clusters held now, asked of Redis: those with affiliates, and the empty ones some instance watches. */
  readonly clusterCount: Effect.Effect<number, Unavailable>
  /** Reads the counts `stats` answers with now, rather than at the next GC pass. */
  readonly refreshStats: Effect.Effect<void, Unavailable>
  /** Waits until this instance's watchers were handed every change Redis holds now. */
  readonly drained: Effect.Effect<void, Unavailable>
}

const scripts = {
  update: script(Scripts.update),
  remove: script(Scripts.remove),
  snapshot: script(Scripts.snapshot),
  sweep: script(Scripts.sweep),
  probe: script(Scripts.probe),
  readHistory: script(Scripts.readHistory),
  renewHeld: script(Scripts.renewHeld),
  release: script(Scripts.release),
  countClusters: script(Scripts.countClusters)
}

/** Affiliates one sweep script looks at, at most. */
const sweepBatch = 128

/**
 * Under Redis Cluster, every how many GC passes the index of clusters and the
 * counts are checked against the clusters' keys (the first pass included);
 * the probe also asks for it when a primary fails over, a slot moves or a
 * node is flushed.
 */
const reconcileEvery = 10

/** Clusters one GC pass asks the index for at a time. */
const indexBatch = 1000

const limitErrors: Record<string, ResourceExhausted> = {
  "LIMIT clusters": new ResourceExhausted({ message: LimitMessages.tooManyClusters }),
  "LIMIT affiliates": new ResourceExhausted({ message: LimitMessages.tooManyAffiliates }),
  "LIMIT endpoints": new ResourceExhausted({ message: LimitMessages.tooManyEndpoints })
}
const tooManyWatches = new ResourceExhausted({ message: LimitMessages.tooManyWatches })

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/**
 * The error a failed Redis call becomes: a limit a script refused, or
 * UNAVAILABLE naming what went wrong.
 *
 * @category constructors
 * @since 0.1.0
 */
export const failureOf = (error: unknown): ResourceExhausted | Unavailable => {
  if (error instanceof ResourceExhausted || error instanceof Unavailable) return error
  const message = messageOf(error)
  return limitErrors[message] ?? new Unavailable({ message: `state backend unavailable: ${message}` })
}

const attempt = <A>(run: () => Promise<A>): Effect.Effect<A, ResourceExhausted | Unavailable> =>
  Effect.tryPromise({ try: run, catch: failureOf })

const unavailableOnly = <A>(run: () => Promise<A>): Effect.Effect<A, Unavailable> =>
  Effect.tryPromise({
    try: run,
    catch: (error) => {
      const failure = failureOf(error)
      return failure instanceof Unavailable ? failure : new Unavailable({ message: failure.message })
    }
  })

const hexOf = (address: Uint8Array | undefined): string =>
  address === undefined ? "" : Buffer.from(address.buffer, address.byteOffset, address.length).toString("hex")

/** Facts as the scripts write them (see `scripts.ts`). */
interface LoggedFacts {
  readonly at?: number
  readonly ttl?: number
  readonly exp?: number
  readonly left?: number
  readonly n?: number
  readonly ip?: string
  readonly i?: string
}

/** A change of a cluster's log as a record; `undefined` for an entry written before causes were logged. */
const historyEntryOf = (clusterId: string, entry: Reply): ChangeRecord | undefined => {
  const [id, fields] = entry as [Buffer, ReadonlyArray<Buffer>]
  let affiliateId: string | undefined
  let cause: string | undefined
  let facts: LoggedFacts = {}
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const name = fields[i]!.toString()
    if (name === "a") affiliateId = fields[i + 1]!.toString("utf8")
    else if (name === "c") cause = fields[i + 1]!.toString()
    else if (name === "f") facts = JSON.parse(fields[i + 1]!.toString()) as LoggedFacts
  }
  if (cause === undefined || !changeCauses.includes(cause as ChangeCause)) return undefined
  return {
    clusterId,
    affiliateId,
    cause: cause as ChangeCause,
    revision: Number(id.toString().slice(2)),
    at: facts.at ?? 0,
    ttlMillis: facts.ttl,
    expiresAt: facts.exp,
    leftMillis: facts.left,
    endpoints: facts.n,
    clientAddress: facts.ip === undefined ? undefined : new Uint8Array(Buffer.from(facts.ip, "hex")),
    instance: facts.i
  }
}

const affiliatesOf = (pairs: Reply): Map<string, AffiliateView> => {
  const affiliates = new Map<string, AffiliateView>()
  const list = pairs as ReadonlyArray<Buffer>
  for (let i = 0; i + 1 < list.length; i += 2) {
    const id = list[i]!.toString("utf8")
    affiliates.set(id, viewOf(id, list[i + 1]!))
  }
  return affiliates
}

/**
 * The backend on Redis, connected for the scope's life (commands, and the
 * change notifications on connections of their own). It waits for them up to
 * the connect timeout, then starts whether or not Redis answers: calls fail
 * with UNAVAILABLE until it does.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (options: RedisBackendOptions): Effect.Effect<RedisStateBackend, never, Scope.Scope> =>
  Effect.gen(function* () {
    const keys = keyspace(options.keyPrefix ?? "discovery:")
    const logLength = String(options.logLength ?? 1000)
    const retention = String(options.emptyRetentionMillis ?? 3_600_000)
    const leaseMillis = options.watchLeaseMillis ?? 30_000
    const lease = String(leaseMillis)
    const epoch = randomBytes(6).toString("base64url")
    const instance = options.instanceName ?? `${hostname()}/${process.pid}`
    /**
     * Clusters dropped when this instance let go of their last watch, and
     * the changes of a GC pass that failed part way: reported by the next pass.
     */
    let droppedSince: Array<ChangeRecord> = []
    const redis = new RedisConnection(options, "discovery")
    const keysOf = (clusterId: string) => scriptKeys(redis, keys, clusterId)
    const settle = (clusterId: string, reply: Reply) => settled(redis, keys, clusterId, reply, undefined, leaseMillis)
    const place = { maxClusters: options.caps.maxClusters, leaseMillis }
    /** Holds an empty cluster in the held set (under Redis Cluster, where the scripts cannot). */
    const holdApart = (clusterId: string, millis: number) =>
      redis.send(["ZADD", keys.held, "GT", String(Date.now() + millis), clusterId], keys.held)
    const load = async (clusterId: string): Promise<MirrorStart> => {
      const reply = (await withPlace(redis, keys, clusterId, place, (reserved) =>
        redis.run(scripts.snapshot, keysOf(clusterId), [
          epoch,
          lease,
          clusterId,
          String(options.caps.maxClusters),
          reserved
        ])
      )) as ReadonlyArray<Reply>
      const affiliates = affiliatesOf(reply[2]!)
      return { revision: Number(String(reply[0])), epoch: String(reply[1]), affiliates }
    }
    /** Holds the watched empty clusters whose hold is due, now (the probe also does, every second). */
    const renewHeld = async (): Promise<void> => {
      const due = feed.leasesDue(Date.now(), leaseMillis / 3)
      await Promise.all(
        due.map(async (clusterId) => {
          try {
            const held = await redis.run(scripts.renewHeld, keysOf(clusterId), [clusterId, lease])
            if (redis.cluster && held === 1) await holdApart(clusterId, leaseMillis)
          } catch (error) {
            feed.renewFailed(clusterId)
            throw error
          }
        })
      )
    }
    /** Lets go of a cluster this instance stopped watching (see `release` in scripts.ts). */
    const release = async (clusterId: string): Promise<void> => {
      const released = await redis.run(scripts.release, keysOf(clusterId), [clusterId])
      if (released === 1) droppedSince.push({ clusterId, cause: "cluster_dropped", at: Date.now(), instance })
      if (redis.cluster && released === 1) await redis.send(["ZREM", keys.held, clusterId], keys.held)
    }
    const feed = new ChangeFeed({
      redis,
      load,
      keysOf: keys.cluster,
      released: release
    })

    let stats: StoreStats = { clusters: 0, affiliates: 0, endpoints: 0, watches: 0 }
    /** What to do when the probe sees Redis change (set once the reconciliation below exists). */
    let changed = () => {}
    const prober = new Prober({
      redis,
      keys,
      feed,
      renewHeld,
      counted: (counts) => {
        stats = { ...counts, watches: 0 }
      },
      changed: () => changed()
    })
    yield* Effect.acquireRelease(
      Effect.promise(() => {
        const connected = redis.connect().catch(() => undefined)
        const waited = options.connectTimeoutMillis ?? 5000
        return Promise.race([connected, new Promise((resolve) => setTimeout(resolve, waited).unref())])
      }),
      () =>
        Effect.sync(() => {
          prober.stop()
          feed.close(() => undefined)
          redis.close()
        })
    )
    yield* Effect.promise(() => prober.start(options.probeIntervalMillis ?? 1000))
    const policy = yield* Effect.promise(() => prober.evictionPolicy())
    if (policy !== undefined && policy !== "noeviction") {
      yield* Effect.logWarning(
        "Redis may evict keys: set maxmemory-policy noeviction, or evicted affiliates vanish and clusters restart their revisions"
      ).pipe(Effect.annotateLogs({ maxmemory_policy: policy }))
    }

    /** The clusters held now: with affiliates (the index) and without (the held set, less what has lapsed). */
    const countClusters = async (): Promise<number> => {
      if (!redis.cluster) return Number(await redis.run(scripts.countClusters, [keys.index, keys.held], []))
      await redis.send(["ZREMRANGEBYSCORE", keys.held, "-inf", String(Date.now())], keys.held)
      const [indexed, held] = await Promise.all([
        redis.send(["ZCARD", keys.index], keys.index),
        redis.send(["ZCARD", keys.held], keys.held)
      ])
      return Number(indexed) + Number(held)
    }

    const refreshStats = async (): Promise<void> => {
      const [clusters, counts] = (await Promise.all([
        countClusters(),
        redis.send(["HMGET", keys.counts, "affiliates", "endpoints"], keys.counts)
      ])) as [number, ReadonlyArray<Buffer | null>]
      stats = {
        clusters,
        affiliates: Number(counts[0]?.toString() ?? 0),
        endpoints: Number(counts[1]?.toString() ?? 0),
        watches: 0
      }
    }

    const sweepCluster = async (
      clusterId: string,
      now: number,
      changes: Array<ChangeRecord>
    ): Promise<[number, number, boolean]> => {
      let removed = 0
      let trimmed = 0
      let emptied = false
      for (;;) {
        const reply = (await settle(
          clusterId,
          await redis.run(scripts.sweep, keysOf(clusterId), [
            clusterId,
            String(now),
            String(sweepBatch),
            epoch,
            logLength,
            retention,
            lease,
            instance
          ])
        )) as [number, number, number, number, ReadonlyArray<Reply>]
        removed += reply[0]
        trimmed += reply[1]
        emptied ||= reply[3] === 1
        const made = reply[4]
        for (let i = 0; i + 4 < made.length; i += 5) {
          const removedEndpoints = Number(made[i + 4])
          changes.push({
            clusterId,
            affiliateId: String(made[i]),
            cause: String(made[i + 1]) as ChangeCause,
            revision: Number(made[i + 2]),
            at: now,
            expiresAt: Number(made[i + 3]),
            endpoints: removedEndpoints > 0 ? removedEndpoints : undefined,
            instance
          })
        }
        if (reply[2] !== 1) return [removed, trimmed, emptied]
      }
    }

    /**
     * Under Redis Cluster, puts back in the index every cluster with
     * something due (found by SCAN on every primary), which an instance that
     * died between a script and its bookkeeping left out, and sets the counts
     * to what the clusters' keys hold (each cluster's affiliates, and the
     * endpoints its meta counts), as a failover that lost writes, a flush or
     * that instance left them; entries of clusters whose keys are gone leave
     * the index. Counts changed while it runs may be off until the next one.
     */
    let passes = 0
    let reconciling: Promise<void> | undefined
    const reconcile = (): Promise<void> => {
      reconciling ??= (async () => {
        let affiliates = 0
        let endpoints = 0
        const names = new Set<string>()
        for await (const key of redis.scan(keys.dueTimesPattern)) names.add(key.toString("utf8"))
        const found = new Set<string>()
        for (const name of names) {
          const clusterId = keys.clusterOfDueTimes(name)
          found.add(clusterId)
          const own = keys.cluster(clusterId)
          const [first, held, counted] = (await Promise.all([
            redis.send(["ZRANGE", name, "0", "0", "WITHSCORES"], name),
            redis.send(["HLEN", own.affiliates], own.affiliates),
            redis.send(["HGET", own.meta, "e"], own.meta)
          ])) as [ReadonlyArray<Buffer>, number, Buffer | null]
          affiliates += held
          endpoints += Number(counted?.toString() ?? 0)
          if (first.length < 2) continue
          await redis.send(["ZADD", keys.index, first[1]!.toString(), clusterId], keys.index)
        }
        // clusters whose keys are gone (a failover or a flush lost them) leave the index now, not when due
        const indexed = (await redis.send(["ZRANGE", keys.index, "0", "-1"], keys.index)) as ReadonlyArray<Buffer>
        const gone = indexed.map((id) => id.toString("utf8")).filter((clusterId) => !found.has(clusterId))
        for (const clusterId of gone) {
          const own = keys.cluster(clusterId)
          // one created since the scan has its due times now
          if (Number(await redis.send(["EXISTS", own.dueTimes], own.dueTimes)) === 0) {
            await redis.send(["ZREM", keys.index, clusterId], keys.index)
          }
        }
        await redis.send(
          ["HSET", keys.counts, "affiliates", String(affiliates), "endpoints", String(endpoints)],
          keys.counts
        )
      })().finally(() => {
        reconciling = undefined
      })
      return reconciling
    }

    if (redis.cluster) {
      changed = () => {
        reconcile().catch(() => undefined)
      }
    }

    const collectGarbage = async (now: number): Promise<GcReport> => {
      if (redis.cluster && passes++ % reconcileEvery === 0) await reconcile()
      let removedClusters = 0
      let removedAffiliates = 0
      let trimmedAffiliates = 0
      const changes = droppedSince
      droppedSince = []
      try {
        for (;;) {
          const due = (await redis.send(
            ["ZRANGE", keys.index, "-inf", String(now), "BYSCORE", "LIMIT", "0", String(indexBatch)],
            keys.index
          )) as ReadonlyArray<Buffer>
          for (const id of due) {
            const clusterId = id.toString("utf8")
            const [removed, trimmed, emptied] = await sweepCluster(clusterId, now, changes)
            removedAffiliates += removed
            trimmedAffiliates += trimmed
            // a cluster watched here stays held, as in memory
            if (emptied && !feed.watching(clusterId)) {
              removedClusters++
              changes.push({ clusterId, cause: "cluster_dropped", at: now, instance })
            }
          }
          if (due.length < indexBatch) break
        }
        await refreshStats()
      } catch (error) {
        // what the pass already applied is reported by the next one
        droppedSince = [...changes, ...droppedSince]
        throw error
      }
      return { removedClusters, removedAffiliates, trimmedAffiliates, changes }
    }

    return {
      available: () => redis.ready,
      clusterCount: unavailableOnly(countClusters),
      update: (request, expiresAt) =>
        attempt(async (): Promise<ChangeRecord> => {
          const now = expiresAt - Duration.toMillis(request.ttl)
          const reply = await withPlace(redis, keys, request.clusterId, place, (reserved) =>
            redis.run(scripts.update, keysOf(request.clusterId), [
              request.clusterId,
              request.affiliateId,
              String(expiresAt),
              request.data !== undefined && request.data.length > 0 ? "1" : "0",
              request.data === undefined
                ? ""
                : Buffer.from(request.data.buffer, request.data.byteOffset, request.data.length),
              String(Limits.clusterAffiliatesMax),
              String(Limits.affiliateEndpointsMax),
              String(options.caps.maxClusters),
              epoch,
              logLength,
              retention,
              reserved,
              hexOf(request.clientAddress),
              instance,
              String(now),
              ...request.endpoints.map((blob) => Buffer.from(blob.buffer, blob.byteOffset, blob.length))
            ])
          )
          const [revision, cause, left, added, expiry] = (await settle(request.clusterId, reply)) as [
            number,
            Buffer,
            number,
            number,
            number
          ]
          const known = cause.toString() as ChangeCause
          return {
            clusterId: request.clusterId,
            affiliateId: request.affiliateId,
            cause: known,
            revision: revision === 0 ? undefined : revision,
            at: now,
            ttlMillis: expiresAt - now,
            expiresAt: expiry,
            leftMillis: known === "created" ? undefined : left,
            endpoints: added > 0 ? added : undefined,
            clientAddress: request.clientAddress,
            instance
          }
        }),
      delete: (request, now) =>
        unavailableOnly(async (): Promise<ReadonlyArray<ChangeRecord>> => {
          const reply = await redis.run(scripts.remove, keysOf(request.clusterId), [
            request.clusterId,
            request.affiliateId,
            epoch,
            logLength,
            retention,
            lease,
            hexOf(request.clientAddress),
            instance,
            String(now)
          ])
          const [revision, expiry, dropped] = (await settle(request.clusterId, reply)) as [number, number, number]
          if (revision === 0) return []
          const deleted: ChangeRecord = {
            clusterId: request.clusterId,
            affiliateId: request.affiliateId,
            cause: "deleted",
            revision,
            at: now,
            expiresAt: expiry,
            leftMillis: expiry - now,
            clientAddress: request.clientAddress,
            instance
          }
          return dropped === 1 && !feed.watching(request.clusterId)
            ? [deleted, { clusterId: request.clusterId, cause: "cluster_dropped", at: now, instance }]
            : [deleted]
        }),
      history: (clusterId) =>
        unavailableOnly(async () => {
          const own = keys.cluster(clusterId)
          const [, entries] = (await redis.run(scripts.readHistory, [own.meta, own.log], [String(historyLength)])) as [
            Buffer,
            ReadonlyArray<Reply>
          ]
          const records: Array<ChangeRecord> = []
          for (const entry of entries) {
            const record = historyEntryOf(clusterId, entry)
            if (record !== undefined) records.push(record)
          }
          return records
        }),
      list: (clusterId) =>
        unavailableOnly(async () => [
          ...affiliatesOf(
            await redis.send(["HGETALL", keys.cluster(clusterId).affiliates], keys.cluster(clusterId).affiliates)
          ).values()
        ]),
      subscribe: (clusterId, sink, resume) =>
        Effect.flatMap(
          Effect.tryPromise({
            try: (signal) =>
              feed.reserveWatch(options.caps.maxWatches)
                ? feed.subscribe(clusterId, sink, signal, resume)
                : Promise.reject(tooManyWatches),
            catch: failureOf
          }),
          (subscription) => (subscription === undefined ? Effect.interrupt : Effect.succeed(subscription))
        ),
      unsubscribe: (clusterId, sink) =>
        Effect.sync(() => {
          feed.unsubscribe(clusterId, sink)
          return undefined
        }),
      collectGarbage: (now) => unavailableOnly(() => collectGarbage(now)),
      refreshStats: unavailableOnly(refreshStats),
      drained: unavailableOnly(() => feed.drained()),
      stats: Effect.sync(() => ({ ...stats, watches: feed.watches })),
      closeWatches: (end) => feed.close(end)
    }
  })

/**
 * The backend as a layer of `StateBackend`.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: RedisBackendOptions): Layer.Layer<StateBackend> =>
  Layer.effect(StateBackend, make(options))
