/**
 * The backend's way to Redis, a single server or a Redis Cluster, on
 * node-redis: commands answer bulk strings as Buffers; no command is queued
 * while disconnected (it fails at once, so nothing is acknowledged that Redis
 * has not taken); connections come back by themselves with backoff. Scripts
 * run by EVALSHA, loaded again when Redis forgot them (after a restart).
 * Change notifications use sharded pub/sub (SSUBSCRIBE), which a Redis
 * Cluster routes to the node of each channel's slot, on connections of their
 * own. A notifications' connection that fails is dropped with every listener
 * on it (their owners are told the connection was lost): nothing listens
 * again by itself, so nothing is left listening for an owner that is gone.
 * A command that gets no answer within the command timeout fails, so a
 * stalled connection gives errors, not calls that hang.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import { createClient, createCluster, RESP_TYPES } from "redis"
import { keySlot } from "./keys.ts"

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
  /** Longest wait for the answer to a command, in milliseconds (default 5000); 0 waits for ever. */
  readonly commandTimeoutMillis?: number | undefined
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

const commandOptions = (timeout: number) => (timeout > 0 ? { ...buffers, timeout } : buffers)

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
  /** The notifications' connection of a single Redis, and its connecting. */
  #subscriber: { readonly client: Client; readonly connected: Promise<Client> } | undefined
  readonly #options: ReturnType<typeof commandOptions>
  readonly #lostListeners: Array<(reason: string, node: string | undefined) => void> = []
  readonly #channelListeners: Array<(channel: string, reason: string) => void> = []
  /** The last subscribe or unsubscribe asked on each channel, while one is under way. */
  readonly #channelSteps = new Map<string, Promise<void>>()

  constructor(options: RedisOptions, name: string) {
    this.cluster = options.cluster === true
    this.#options = commandOptions(options.commandTimeoutMillis ?? 5000)
    if (this.cluster) {
      this.#nodes = newCluster(options, name)
      this.#nodes.on("error", (error: Error) => this.#lost(error.message, undefined))
      this.#nodes.on("node-error", (error: Error, node: { readonly host: string; readonly port: number }) =>
        this.#lost(error.message, `${node.host}:${node.port}`)
      )
      this.#nodes.on("sharded-channel-moved-error", (error: Error, channel: string) => {
        for (const listener of this.#channelListeners) listener(channel, messageOf(error))
      })
    } else {
      this.#client = newClient(options, name)
      this.#client.on("error", (error: Error) => this.#lost(error.message, undefined))
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
    if (this.#client !== undefined) return this.#client.sendCommand(command, this.#options) as Promise<Reply>
    return this.#nodes!.sendCommand(key, false, command, this.#options) as Promise<Reply>
  }

  /** The address (`host:port`) of the primary that holds `key` now, under Redis Cluster; `undefined` on a single Redis. */
  nodeOf(key: string): string | undefined {
    if (this.#nodes === undefined) return undefined
    return this.#nodes.slots[keySlot(key)]?.master.address
  }

  /**
   * Sends `args` to every primary of a Redis Cluster (the server, on a
   * single Redis), and gives each one's address with its answer.
   */
  async sendToPrimaries(args: ReadonlyArray<string>): Promise<Array<readonly [string, Reply]>> {
    if (this.#client !== undefined) return [["", (await this.send(args)) as Reply]]
    const masters = this.#nodes!.masters
    return Promise.all(
      masters.map(async (master) => {
        const node = (await this.#nodes!.nodeClient(master)) as Client
        return [master.address, (await node.sendCommand([...args], this.#options)) as Reply] as const
      })
    )
  }

  /** The addresses (`host:port`) of the primaries of a Redis Cluster; one empty name for a single Redis. */
  primaries(): Array<string> {
    if (this.#nodes === undefined) return [""]
    return this.#nodes.masters.map((master) => master.address)
  }

  /** A fingerprint of which primary holds which slots (empty on a single Redis): it changes when slots move. */
  get topology(): string {
    if (this.#nodes === undefined) return ""
    const owners: Array<string> = []
    let previous = ""
    this.#nodes.slots.forEach((shard, slot) => {
      const owner = shard?.master.address ?? "-"
      if (owner !== previous) owners.push(`${slot}=${owner}`)
      previous = owner
    })
    return owners.join(",")
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

  /** Listens to a sharded channel; messages arrive as Buffers. Fails at once while Redis is not reached. */
  async subscribe(channel: string, listener: (message: Buffer) => void): Promise<void> {
    if (!this.ready) throw new Error("not connected to Redis")
    return this.#inTurn(channel, async () => {
      if (this.#nodes !== undefined) return this.#nodes.sSubscribe(channel, listener, true)
      return (await this.#subscriberClient()).sSubscribe(channel, listener, true)
    })
  }

  /** Stops `listener` listening to a sharded channel (nothing to do once its connection was dropped). */
  unsubscribe(channel: string, listener: (message: Buffer) => void): Promise<void> {
    return this.#inTurn(channel, async () => {
      if (this.#nodes !== undefined) return this.#nodes.sUnsubscribe(channel, listener, true)
      const subscriber = await this.#subscriber?.connected.catch(() => undefined)
      if (subscriber?.isReady) await subscriber.sUnsubscribe(channel, listener, true)
    })
  }

  /**
   * Runs `step` once the steps asked before it on the same channel are done,
   * so that listening again while the last listener is still going never
   * races its SUNSUBSCRIBE (the channel would end unsubscribed in Redis with
   * a listener waiting here).
   */
  #inTurn(channel: string, step: () => Promise<void>): Promise<void> {
    const previous = this.#channelSteps.get(channel) ?? Promise.resolve()
    const next = previous.then(step, step)
    const settled = next.catch(() => undefined)
    this.#channelSteps.set(channel, settled)
    settled.then(() => {
      if (this.#channelSteps.get(channel) === settled) this.#channelSteps.delete(channel)
    })
    return next
  }

  /**
   * Calls `listener` with the reason whenever a connection fails, and under
   * Redis Cluster the node (`host:port`) it led to (absent: possibly all):
   * the notifications on it are lost and its listeners dropped.
   */
  onConnectionLost(listener: (reason: string, node: string | undefined) => void): void {
    this.#lostListeners.push(listener)
  }

  /** Calls `listener` when a channel's listeners were lost (its slot moved and listening on the new node failed). */
  onChannelLost(listener: (channel: string, reason: string) => void): void {
    this.#channelListeners.push(listener)
  }

  /** Closes every connection at once. */
  close(): void {
    this.#dropSubscriber()
    if (this.#client?.isOpen) this.#client.destroy()
    if (this.#nodes?.isOpen) this.#nodes.destroy()
  }

  #lost(reason: string, node: string | undefined): void {
    for (const listener of this.#lostListeners) listener(reason, node)
  }

  /**
   * The notifications' connection of a single Redis, made when first needed
   * and again after it failed; it never reconnects by itself (its listeners'
   * owners are told it was lost, and listen again on a new one).
   */
  #subscriberClient(): Promise<Client> {
    if (this.#subscriber === undefined) {
      const client = this.#client!.duplicate({ socket: { reconnectStrategy: false } })
      const subscriber = {
        client,
        connected: client.connect().then(
          () => client,
          (error: unknown) => {
            if (this.#subscriber === subscriber) this.#dropSubscriber()
            throw error
          }
        )
      }
      client.on("error", (error: Error) => {
        if (this.#subscriber !== subscriber) return
        this.#dropSubscriber()
        this.#lost(error.message, undefined)
      })
      subscriber.connected.catch(() => undefined)
      this.#subscriber = subscriber
    }
    return this.#subscriber.connected
  }

  /** Drops the notifications' connection with every listener on it, at once. */
  #dropSubscriber(): void {
    const subscriber = this.#subscriber
    this.#subscriber = undefined
    if (subscriber?.client.isOpen) subscriber.client.destroy()
  }
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))
