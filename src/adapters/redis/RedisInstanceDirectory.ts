/**
 * The instances' directory on Redis: one hash (`<prefix>instances`) whose
 * fields are instance names and whose values are their announcements as JSON
 * with the time each expires. The hash itself expires with the last
 * renewal, and each reader skips (and the next announcement removes) what has
 * expired, so a killed instance drops out within its TTL. One key: it works
 * the same on a single Redis and on Redis Cluster. It uses a connection of
 * its own, so the state's commands never wait behind it.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Layer } from "effect"
import { Unavailable } from "../../ports/DiscoveryError.ts"
import type { InstanceAnnouncement } from "../../ports/InstanceDirectory.ts"
import { InstanceDirectory } from "../../ports/InstanceDirectory.ts"
import { keyspace } from "./keys.ts"
import type { Reply } from "./RedisConnection.ts"
import { RedisConnection, type RedisOptions } from "./RedisConnection.ts"

/**
 * Where the directory lives.
 *
 * @category models
 * @since 0.1.0
 */
export interface RedisInstanceDirectoryOptions extends RedisOptions {
  /** Prefix of the key, the same as the state's (default `discovery:`). */
  readonly keyPrefix?: string | undefined
}

interface Stored {
  readonly announcement: InstanceAnnouncement
  readonly expiresAt: number
}

const parse = (value: Reply | undefined): Stored | undefined => {
  if (!Buffer.isBuffer(value)) return undefined
  try {
    const stored = JSON.parse(value.toString("utf8")) as Stored
    return typeof stored.expiresAt === "number" && typeof stored.announcement?.name === "string" ? stored : undefined
  } catch {
    return undefined
  }
}

const unavailable = (error: unknown) =>
  new Unavailable({
    message: `instance directory unavailable: ${error instanceof Error ? error.message : String(error)}`
  })

/**
 * The directory on the Redis of `options`, connected while the scope is open.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = Effect.fnUntraced(function* (options: RedisInstanceDirectoryOptions) {
  const key = keyspace(options.keyPrefix ?? "discovery:").instances
  const redis = new RedisConnection(options, "discovery-instances")
  // waits for the first connection up to the connect timeout; calls fail with UNAVAILABLE until Redis answers
  yield* Effect.acquireRelease(
    Effect.promise(() =>
      Promise.race([
        redis.connect().catch(() => undefined),
        new Promise((resolve) => setTimeout(resolve, options.connectTimeoutMillis ?? 5000).unref())
      ])
    ),
    () => Effect.sync(() => redis.close())
  )
  const send = (args: ReadonlyArray<string>) =>
    Effect.tryPromise({ try: () => redis.send(args, key), catch: unavailable })
  /** Every field with what it holds (`undefined` when unreadable). */
  const readAll = Effect.map(send(["HGETALL", key]), (reply) => {
    const fields = Array.isArray(reply) ? reply : []
    const entries: Array<readonly [string, Stored | undefined]> = []
    for (let at = 0; at + 1 < fields.length; at += 2) entries.push([String(fields[at]), parse(fields[at + 1])])
    return entries
  })
  return InstanceDirectory.of({
    announce: (announcement, ttlMillis) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const stale = (yield* readAll).filter(([, stored]) => stored === undefined || stored.expiresAt <= now)
        const value = JSON.stringify({ announcement, expiresAt: now + ttlMillis } satisfies Stored)
        yield* send(["HSET", key, announcement.name, value])
        // GT keeps the latest expiry of all instances; a hash without one (just made) takes NX
        const extended = yield* send(["PEXPIRE", key, String(ttlMillis), "GT"])
        if (extended === 0) yield* send(["PEXPIRE", key, String(ttlMillis), "NX"])
        const gone = stale.map(([name]) => name).filter((name) => name !== announcement.name)
        if (gone.length > 0) yield* send(["HDEL", key, ...gone])
      }),
    list: Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      return (yield* readAll)
        .flatMap(([, stored]) => (stored !== undefined && stored.expiresAt > now ? [stored.announcement] : []))
        .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    }),
    withdraw: (name) => Effect.asVoid(send(["HDEL", key, name]))
  })
})

/**
 * The directory as a layer.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: RedisInstanceDirectoryOptions): Layer.Layer<InstanceDirectory> =>
  Layer.effect(InstanceDirectory, make(options))
