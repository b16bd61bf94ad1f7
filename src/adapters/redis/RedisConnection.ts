/**
 * The backend's way to Redis: a node-redis client that answers bulk strings
 * as Buffers, never queues a command while it is disconnected (a command
 * then fails at once, so nothing is acknowledged that Redis has not taken),
 * and reconnects by itself with backoff. Scripts run by EVALSHA, loaded again
 * when Redis forgot them (after a restart).
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import { createClient, RESP_TYPES } from "redis"

/**
 * How to reach Redis.
 *
 * @category models
 * @since 0.1.0
 */
export interface RedisOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://` for TLS. */
  readonly url: string
  /** Replaces the URL's password (e.g. from an environment variable). */
  readonly password?: string | undefined
  /** Longest wait for a connection, in milliseconds (default 5000). */
  readonly connectTimeoutMillis?: number | undefined
  /** Reconnect after a failure, with backoff (default true); a one-shot tool fails instead. */
  readonly reconnect?: boolean | undefined
}

/**
 * A reply bulk string, as Buffers; integers as numbers; arrays as arrays;
 * nil as null.
 *
 * @category models
 * @since 0.1.0
 */
export type Reply = Buffer | number | null | ReadonlyArray<Reply>

/**
 * A Lua script and its SHA-1, as EVALSHA names it.
 *
 * @category models
 * @since 0.1.0
 */
export interface Script {
  readonly source: string
  readonly sha: string
}

/**
 * A script from its source.
 *
 * @category constructors
 * @since 0.1.0
 */
export const script = (source: string): Script => ({ source, sha: createHash("sha1").update(source).digest("hex") })

const buffers = { typeMapping: { [RESP_TYPES.BLOB_STRING]: Buffer } } as const

/**
 * One connection to Redis.
 *
 * @category models
 * @since 0.1.0
 */
export class RedisConnection {
  readonly #client: ReturnType<typeof createClient>
  #lastError: string | undefined

  constructor(options: RedisOptions, name: string) {
    this.#client = createClient({
      url: options.url,
      ...(options.password === undefined ? {} : { password: options.password }),
      name,
      RESP: 2,
      disableOfflineQueue: true,
      socket: {
        connectTimeout: options.connectTimeoutMillis ?? 5000,
        reconnectStrategy:
          options.reconnect === false ? false : (retries: number) => Math.min(50 * 2 ** Math.min(retries, 6), 2000)
      }
    })
    this.#client.on("error", (error: Error) => {
      this.#lastError = error.message
    })
    this.#client.on("ready", () => {
      this.#lastError = undefined
    })
  }

  /** True while the connection is up and ready for commands. */
  get ready(): boolean {
    return this.#client.isReady
  }

  /** What went wrong last, while the connection is down. */
  get lastError(): string | undefined {
    return this.#lastError
  }

  /** Starts connecting; resolves once connected (the first attempt's failure rejects, later ones retry). */
  connect(): Promise<unknown> {
    return this.#client.connect()
  }

  /** Sends one command. */
  send(args: ReadonlyArray<string | Buffer>): Promise<Reply> {
    return this.#client.sendCommand(args as Array<string | Buffer>, buffers) as Promise<Reply>
  }

  /** Runs `script` on `keys` with `args`, loading it first when Redis does not know it. */
  async run(script: Script, keys: ReadonlyArray<string>, args: ReadonlyArray<string | Buffer>): Promise<Reply> {
    const tail = [String(keys.length), ...keys, ...args]
    try {
      return await this.send(["EVALSHA", script.sha, ...tail])
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error
      return await this.send(["EVAL", script.source, ...tail])
    }
  }

  /** Closes the connection at once. */
  close(): void {
    if (this.#client.isOpen) this.#client.destroy()
  }
}
