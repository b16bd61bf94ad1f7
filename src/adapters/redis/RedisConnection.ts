/**
 * The backend's way to Redis, a single server or a Redis Cluster, on
 * node-redis: commands answer bulk strings as Buffers; no command is queued
 * while disconnected (it fails at once, so nothing is acknowledged that Redis
 * has not taken); connections come back by themselves with backoff. Scripts
 * run by EVALSHA, loaded again when Redis forgot them (after a restart).
 * Change notifications use sharded pub/sub (SSUBSCRIBE), which a Redis
 * Cluster routes to the node of each channel's slot, on connections of their
 * own.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import { createClient, createCluster, RESP_TYPES } from "redis"

/**
 * How to reach Redis.
 *
 * @category models
 * @since 0.1.0
 */
export interface RedisOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://` for TLS; for a Redis Cluster, seed nodes separated by commas. */
  readonly url: string
  /** The URL names seed nodes of a Redis Cluster (default false). */
  readonly cluster?: boolean | undefined
  /** Replaces the URL's password (e.g. from an environment variable). */
  readonly password?: string | undefined
  /** Longest wait for a connection, in milliseconds (default 5000). */
  readonly connectTimeoutMillis?: number | undefined
  /** Reconnect after a failure, with backoff (default true); a one-shot tool fails instead. */
  readonly reconnect?: boolean | undefined
}

/**
 * A reply: bulk strings as Buffers, integers as numbers, arrays as arrays,
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

const connectionOptions = (options: RedisOptions, name: string) => ({
  ...(options.password === undefined ? {} : { password: options.password }),
  name,
  RESP: 2 as const,
  disableOfflineQueue: true,
  socket: {
    connectTimeout: options.connectTimeoutMillis ?? 5000,
    reconnectStrategy:
      options.reconnect === false
        ? (false as const)
        : (retries: number) => Math.min(50 * 2 ** Math.min(retries, 6), 2000)
  }
})

const newClient = (options: RedisOptions, name: string) =>
  createClient({ url: options.url, ...connectionOptions(options, name) })

const newCluster = (options: RedisOptions, name: string) => {
  const scheme = options.url.split("://")[0]
  const urls = options.url.split(",").map((part, i) => (i === 0 ? part : `${scheme}://${part}`))
  return createCluster({ rootNodes: urls.map((url) => ({ url })), defaults: connectionOptions(options, name), RESP: 2 })
}

type Client = ReturnType<typeof newClient>
type Cluster = ReturnType<typeof newCluster>

/**
 * Connections to one Redis or one Redis Cluster.
 *
 * @category models
 * @since 0.1.0
 */
export class RedisConnection {
  /** True for a Redis Cluster: keys of different clusters live on different nodes. */
  readonly cluster: boolean
  readonly #client: Client | undefined
  readonly #nodes: Cluster | undefined
  #subscriber: Client | undefined
  readonly #readyListeners: Array<() => void> = []
  readonly #lostListeners: Array<(reason: string) => void> = []

  constructor(options: RedisOptions, name: string) {
    this.cluster = options.cluster === true
    const onError = (error: Error) => {
      for (const listener of this.#lostListeners) listener(error.message)
    }
    if (this.cluster) {
      this.#nodes = newCluster(options, name)
      this.#nodes.on("error", onError)
    } else {
      this.#client = newClient(options, name)
      this.#client.on("error", onError)
    }
  }

  /** True while the connection is up and ready for commands. */
  get ready(): boolean {
    return this.#client?.isReady ?? this.#nodes!.isReady
  }

  /** Connects; the first attempt's failure rejects, later ones retry. */
  connect(): Promise<unknown> {
    return this.#client?.connect() ?? this.#nodes!.connect()
  }

  /** Sends one command; `key` names the node of a Redis Cluster that holds it. */
  send(args: ReadonlyArray<string | Buffer>, key?: string): Promise<Reply> {
    const command = args as Array<string | Buffer>
    if (this.#client !== undefined) return this.#client.sendCommand(command, buffers) as Promise<Reply>
    return this.#nodes!.sendCommand(key, false, command, buffers) as Promise<Reply>
  }

  /** Runs `script` on `keys` (all in one slot under Redis Cluster) with `args`, loading it first when Redis does not know it. */
  async run(script: Script, keys: ReadonlyArray<string>, args: ReadonlyArray<string | Buffer>): Promise<Reply> {
    const tail = [String(keys.length), ...keys, ...args]
    try {
      return await this.send(["EVALSHA", script.sha, ...tail], keys[0])
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith("NOSCRIPT")) throw error
      return await this.send(["EVAL", script.source, ...tail], keys[0])
    }
  }

  /** Every key matching `pattern` (SCAN, on every primary of a Redis Cluster); keys may repeat. */
  async *scan(pattern: string): AsyncGenerator<Buffer> {
    const nodes: Array<Client> =
      this.#nodes === undefined
        ? [this.#client!]
        : await Promise.all(this.#nodes.masters.map((master) => this.#nodes!.nodeClient(master) as Promise<Client>))
    for (const node of nodes) {
      let cursor = "0"
      do {
        const [next, keys] = (await node.sendCommand(["SCAN", cursor, "MATCH", pattern, "COUNT", "1000"], buffers)) as [
          Buffer,
          ReadonlyArray<Buffer>
        ]
        cursor = next.toString()
        yield* keys
      } while (cursor !== "0")
    }
  }

  /** Listens to a sharded channel; messages arrive as Buffers. */
  async subscribe(channel: string, listener: (message: Buffer) => void): Promise<void> {
    if (this.#nodes !== undefined) return this.#nodes.sSubscribe(channel, listener, true)
    return (await this.#subscriberClient()).sSubscribe(channel, listener, true)
  }

  /** Stops `listener` listening to a sharded channel. */
  async unsubscribe(channel: string, listener: (message: Buffer) => void): Promise<void> {
    if (this.#nodes !== undefined) return this.#nodes.sUnsubscribe(channel, listener, true)
    if (this.#subscriber?.isReady) await this.#subscriber.sUnsubscribe(channel, listener, true)
  }

  /** Calls `listener` each time the notifications' connection is ready again after a break (messages may be lost). */
  onNotificationsReady(listener: () => void): void {
    this.#readyListeners.push(listener)
  }

  /** Calls `listener` with the reason whenever a connection fails (notifications may be lost until it is back). */
  onConnectionLost(listener: (reason: string) => void): void {
    this.#lostListeners.push(listener)
  }

  /** Closes every connection at once. */
  close(): void {
    if (this.#subscriber?.isOpen) this.#subscriber.destroy()
    if (this.#client?.isOpen) this.#client.destroy()
    if (this.#nodes?.isOpen) this.#nodes.destroy()
  }

  async #subscriberClient(): Promise<Client> {
    if (this.#subscriber === undefined) {
      const subscriber = this.#client!.duplicate()
      this.#subscriber = subscriber
      subscriber.on("error", (error: Error) => {
        for (const listener of this.#lostListeners) listener(error.message)
      })
      let first = true
      subscriber.on("ready", () => {
        if (first) first = false
        else for (const listener of this.#readyListeners) listener()
      })
      await subscriber.connect()
    }
    return this.#subscriber
  }
}
