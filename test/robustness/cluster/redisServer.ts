/**
 * The single Redis of the `redis` shape: one `redis-server` in a folder of
 * the run, on a loopback port fixed for the run, with the persistence the
 * run chose. It can be killed with -9 and started again from its files, and
 * rewound: a checkpoint copies its RDB file aside, and a rewind kills it and
 * starts it from that older file, so that everything written after the
 * checkpoint is lost (as after restoring a backup).
 */
import { copyFileSync, existsSync, mkdirSync, renameSync } from "node:fs"
import { join } from "node:path"
import { launchRedis } from "./redisProcess.ts"
import type { TrackedProcess } from "./processes.ts"
import { reservePort } from "./ports.ts"
import { infoFields, type RespValue, RespError, redisCommand, redisText } from "./resp.ts"
import { sleep, waitFor } from "./wait.ts"

/**
 * How the Redis persists: an append-only file fsynced every second or on
 * every write (each with RDB snapshots beside it), or RDB snapshots only.
 */
export type RedisPersistence = "aof-everysec" | "aof-always" | "rdb"

/** Every persistence mode, for picking one per run. */
export const redisPersistenceModes: ReadonlyArray<RedisPersistence> = ["aof-everysec", "aof-always", "rdb"]

/** Where and how to run the Redis. */
export interface RedisServerOptions {
  /** Its folder (created): data files, `redis.log`, `checkpoints/`. */
  readonly dir: string
  readonly persistence: RedisPersistence
  /** How often an RDB snapshot is written when anything changed, in seconds (default 5 for `rdb`, 60 beside AOF). */
  readonly rdbSaveSeconds?: number
}

/** An RDB file set aside by `checkpoint`. */
export interface Checkpoint {
  readonly file: string
  /** Wall-clock milliseconds just before BGSAVE was asked for: what was acknowledged before is in the file. */
  readonly startedAt: number
  /** Wall-clock milliseconds once BGSAVE had finished: what was written after is not in the file. */
  readonly finishedAt: number
  /** DBSIZE when it was asked for. */
  readonly keys: number
}

/** The single Redis of a run. */
export interface RedisServer {
  readonly name: string
  readonly port: number
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string
  readonly dir: string
  readonly persistence: RedisPersistence
  /** Whether the server process is up. */
  readonly running: () => boolean
  readonly pid: () => number | undefined
  /** Starts it from its files (after `kill`); resolves once it answers PING. */
  readonly start: () => Promise<void>
  /** kill -9 by PID; resolves once it has exited. */
  readonly kill: () => Promise<void>
  /** BGSAVE, waits for it to finish, copies the RDB file aside and makes it the one `restore` uses. */
  readonly checkpoint: () => Promise<Checkpoint>
  /** The last checkpoint taken, if any. */
  readonly lastCheckpoint: () => Checkpoint | undefined
  /**
   * Starts the (killed) server from the last checkpoint's RDB file, with the
   * append-only file set aside, then turns AOF back on (a rewrite of what it
   * loaded) when the run uses AOF. Resolves with the number of keys it loaded.
   */
  readonly restore: () => Promise<number>
  /** kill -9, then `restore`. */
  readonly rewind: () => Promise<number>
  /** FLUSHALL SYNC. */
  readonly flushAll: () => Promise<void>
  /** Sends one command to it. */
  readonly command: (args: ReadonlyArray<string | Buffer | number>) => Promise<RespValue>
  /** kill -9 at the end of a run; the files stay. */
  readonly stop: () => Promise<void>
}

const persistenceFlags = (options: RedisServerOptions, appendOnly: boolean): ReadonlyArray<string> => {
  const aof = options.persistence !== "rdb"
  const saveSeconds = options.rdbSaveSeconds ?? (aof ? 60 : 5)
  return [
    "--dbfilename",
    "dump.rdb",
    "--appenddirname",
    "appendonlydir",
    "--save",
    `${saveSeconds} 1`,
    "--appendonly",
    aof && appendOnly ? "yes" : "no",
    "--appendfsync",
    options.persistence === "aof-always" ? "always" : "everysec"
  ]
}

const persistenceInfo = async (port: number) => infoFields(await redisText(port, ["INFO", "persistence"]))

const numberField = (fields: ReadonlyMap<string, string>, name: string): number => Number(fields.get(name) ?? "NaN")

/** Starts a Redis in `options.dir` on a port reserved for the run. */
export const startRedisServer = async (options: RedisServerOptions, name = "redis"): Promise<RedisServer> => {
  mkdirSync(join(options.dir, "checkpoints"), { recursive: true })
  const port = await reservePort()
  let server: TrackedProcess | undefined
  let last: Checkpoint | undefined
  let rewinds = 0

  const launch = async (appendOnly: boolean) => {
    if (server?.running()) throw new Error(`${name} is already running`)
    server = await launchRedis(name, port, options.dir, persistenceFlags(options, appendOnly))
  }

  const kill = async () => {
    await server?.kill()
  }

  const bgsave = async () => {
    for (;;) {
      try {
        await redisCommand(port, ["BGSAVE", "SCHEDULE"])
        return
      } catch (error) {
        if (!(error instanceof RespError && error.message.includes("already in progress"))) throw error
        await sleep(20)
      }
    }
  }

  const checkpoint = async (): Promise<Checkpoint> => {
    const startedAt = Date.now()
    const keys = Number(await redisCommand(port, ["DBSIZE"]))
    const savesBefore = numberField(await persistenceInfo(port), "rdb_saves")
    await bgsave()
    await waitFor(`${name}: BGSAVE to finish`, async () => {
      const fields = await persistenceInfo(port)
      return numberField(fields, "rdb_saves") > savesBefore && fields.get("rdb_bgsave_in_progress") === "0"
        ? fields
        : undefined
    }).then((fields) => {
      if (fields.get("rdb_last_bgsave_status") !== "ok") throw new Error(`${name}: BGSAVE failed`)
    })
    const finishedAt = Date.now()
    const file = join(options.dir, "checkpoints", `checkpoint-${finishedAt}.rdb`)
    copyFileSync(join(options.dir, "dump.rdb"), file)
    last = { file, startedAt, finishedAt, keys }
    return last
  }

  const restore = async (): Promise<number> => {
    if (last === undefined) throw new Error(`${name}: no checkpoint to restore`)
    if (server?.running()) throw new Error(`${name}: kill it before restoring a checkpoint`)
    rewinds++
    const aofDir = join(options.dir, "appendonlydir")
    if (existsSync(aofDir)) renameSync(aofDir, join(options.dir, `appendonlydir.before-rewind-${rewinds}`))
    copyFileSync(last.file, join(options.dir, "dump.rdb"))
    await launch(false)
    const loaded = numberField(await persistenceInfo(port), "rdb_last_load_keys_loaded")
    if (options.persistence !== "rdb") {
      await redisCommand(port, ["CONFIG", "SET", "appendonly", "yes"])
      await waitFor(`${name}: the AOF rewrite after a rewind`, async () => {
        const fields = await persistenceInfo(port)
        return numberField(fields, "aof_rewrites") >= 1 &&
          fields.get("aof_rewrite_in_progress") === "0" &&
          fields.get("aof_rewrite_scheduled") === "0"
          ? true
          : undefined
      })
    }
    return loaded
  }

  await launch(true)
  return {
    name,
    port,
    url: `redis://127.0.0.1:${port}`,
    dir: options.dir,
    persistence: options.persistence,
    running: () => server?.running() ?? false,
    pid: () => (server?.running() ? server.pid : undefined),
    start: () => launch(true),
    kill,
    checkpoint,
    lastCheckpoint: () => last,
    restore,
    rewind: async () => {
      await kill()
      return restore()
    },
    flushAll: async () => {
      await redisCommand(port, ["FLUSHALL", "SYNC"])
    },
    command: (args) => redisCommand(port, args),
    stop: kill
  }
}
