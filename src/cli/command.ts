/**
 * The `discovery-service` command line: the original service's flag names for
 * what exists, the new caps, and a clear refusal for flags whose feature is not
 * built yet.
 *
 * @since 0.1.0
 */
import { availableParallelism } from "node:os"
import { Config, Duration, Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { defaultConnectionLimits } from "../adapters/grpc/http2/ConnectionGuard.ts"
import { defaultMaxConcurrentStreams, defaultMaxSessionMemoryMiB } from "../adapters/grpc/http2/Http2Server.ts"
import { defaultRequestBudgetBytes } from "../adapters/grpc/http2/RequestBudget.ts"
import { FileSnapshotStore } from "../adapters/storage/index.ts"
import { defaultCaps, defaultWatchLogLength } from "../core/server/ClusterStore.ts"
import { formatByteSize, parseByteSize } from "./byteSize.ts"
import { parseGoDuration } from "./goDuration.ts"
import type { ServiceConfig } from "./ServiceConfig.ts"
import { statePassword, stateFlags } from "./stateFlags.ts"

/** The longest delay a Node timer takes (about 24.8 days, 596 hours); a longer one would fire at once. */
const maxTimerMillis = 2 ** 31 - 1

/**
 * A flag holding a Go-style duration (`30s`, `1m`, `1h30m`), positive (or
 * not negative with `allowZero`) and no longer than a Node timer takes.
 *
 * @category flags
 * @since 0.1.0
 */
export const goDuration = (name: string, fallback: string, allowZero = false) =>
  Flag.String(name).pipe(
    Flag.withDefault(fallback),
    Flag.filterMap(
      (text) =>
        Option.filter(
          Option.fromUndefinedOr(parseGoDuration(text)),
          (d) =>
            (allowZero ? !Duration.isNegative(d) : Duration.isGreaterThan(d, Duration.zero)) &&
            Duration.toMillis(d) <= maxTimerMillis
        ),
      (text) =>
        `--${name}: ${JSON.stringify(text)} is not a ${allowZero ? "non-negative" : "positive"} duration of at most 596h (examples: 30s, 1m, 1h30m)`
    )
  )

const nonNegative = (name: string, fallback: number) =>
  Flag.Finite(name).pipe(
    Flag.withDefault(fallback),
    Flag.filter(
      (n) => n >= 0,
      (n) => `--${name} must not be negative, got ${n}`
    )
  )

/** A byte size, or `auto` (`undefined`: the library's default). */
const byteSize = (name: string) =>
  Flag.String(name).pipe(
    Flag.withDefault("auto"),
    Flag.filterMap(
      (text) =>
        text.toLowerCase() === "auto"
          ? Option.some(undefined)
          : Option.filter(Option.fromUndefinedOr(parseByteSize(text)), (bytes) => bytes > 0),
      (text) => `--${name}: ${JSON.stringify(text)} is not a positive size (examples: 64MiB, 1GiB, 1048576) or auto`
    )
  )

/** Milliseconds as a Go duration flag value: `10s`, `2m`. */
const seconds = (millis: number) => (millis % 60_000 === 0 ? `${millis / 60_000}m` : `${millis / 1000}s`)

const positiveInt = (name: string, fallback: number) =>
  Flag.Int(name).pipe(
    Flag.withDefault(fallback),
    Flag.filter(
      (n) => n > 0,
      (n) => `--${name} must be positive, got ${n}`
    )
  )

/** Node shares a port between sockets (SO_REUSEPORT) on Linux only. */
const reusePortSupported = process.platform === "linux"

/**
 * Most I/O threads the default gives: beyond it the thread that holds the
 * state, which every call crosses, is the limit.
 *
 * @category models
 * @since 0.1.0
 */
export const maxDefaultIoThreads = 8

/**
 * The most threads `--io-threads auto` uses: the cores available (at most
 * `maxDefaultIoThreads`) where the port can be shared, else 1.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultIoThreads = (): number =>
  reusePortSupported ? Math.max(1, Math.min(availableParallelism(), maxDefaultIoThreads)) : 1

/** A string flag with a default. */
const text = (name: string, fallback: string, description: string) =>
  Flag.String(name).pipe(Flag.withDescription(description), Flag.withDefault(fallback))

/**
 * The flags this build implements, with their help text.
 *
 * @category flags
 * @since 0.1.0
 */
export const flags = {
  state: Flag.String("state").pipe(
    Flag.withDescription(
      "where the cluster state lives: memory (this process, saved to the snapshot file) or redis://[user:password@]host:port[/db] (rediss:// for TLS), shared by every instance started with the same URL; snapshot files are then off (default memory)"
    ),
    Flag.withDefault("memory"),
    Flag.filter(
      (value) => value === "memory" || /^rediss?:\/\/./.test(value),
      (value) => `--state must be memory or a redis:// or rediss:// URL, got ${JSON.stringify(value)}`
    )
  ),
  ...stateFlags,
  reusePort: Flag.Boolean("reuse-port").pipe(
    Flag.withDescription(
      "share the gRPC port with other instances started the same way on this host (SO_REUSEPORT, Linux): the kernel spreads connections over them, so one machine's cores can all serve; needs a shared --state (default false)"
    ),
    Flag.withDefault(false)
  ),
  ioThreads: Flag.String("io-threads").pipe(
    Flag.withDescription(
      `threads that serve the gRPC port (SO_REUSEPORT, Linux), each taking its share of connections: the main thread, which also holds the state and applies every change in order, and worker threads that reach it. Most of a call's work is HTTP/2 and the socket, which the threads share out; a call served by a worker thread also crosses to the main thread and back, which costs more CPU than it saves unless the main thread is the bottleneck and cores are free. auto serves the port on the main thread alone and adds worker threads (up to the cores available, at most ${maxDefaultIoThreads}; here ${defaultIoThreads()}) only while the main thread is busy nearly all the time and the host has a core to spare, and takes them away one at a time once the whole process has used at most 0.3 of a core for a minute; a number fixes the threads (1: the main thread alone, the only choice off Linux) (default auto)`
    ),
    Flag.withDefault("auto"),
    Flag.filter(
      (value) => value === "auto" || (/^[0-9]+$/.test(value) && Number(value) > 0),
      (value) => `--io-threads must be auto or a positive number, got ${JSON.stringify(value)}`
    )
  ),
  addr: Flag.String("addr").pipe(
    Flag.withDescription("gRPC listen address (host:port); an empty host listens on every interface (default :3000)"),
    Flag.withDefault(":3000")
  ),
  gcInterval: goDuration("gc-interval", "1m").pipe(
    Flag.withDescription(
      "how often expired affiliates and endpoints are removed, as a Go duration such as 30s (default 1m)"
    )
  ),
  redirectEndpoint: Flag.String("redirect-endpoint").pipe(
    Flag.withDescription("send every client to this endpoint (host:port) in Hello; empty means no redirect"),
    Flag.withDefault("")
  ),
  trustXRealIp: Flag.Boolean("trust-x-real-ip").pipe(
    Flag.withDescription("take the client address from X-Real-IP; only behind a proxy that sets it (default false)"),
    Flag.withDefault(false)
  ),
  trustFirstXForwardedFor: Flag.Boolean("trust-first-x-forwarded-for").pipe(
    Flag.withDescription(
      "take the client address from the first X-Forwarded-For entry; only behind a proxy (default false)"
    ),
    Flag.withDefault(false)
  ),
  disableClientIpReporting: Flag.Boolean("disable-client-ip-reporting").pipe(
    Flag.withDescription("do not report the client's public address in Hello"),
    Flag.withDefault(false)
  ),
  maxClusters: positiveInt("max-clusters", defaultCaps.maxClusters).pipe(
    Flag.withDescription(
      `most clusters held at once; beyond it new clusters get RESOURCE_EXHAUSTED (default ${defaultCaps.maxClusters})`
    )
  ),
  maxWatches: positiveInt("max-watches", defaultCaps.maxWatches).pipe(
    Flag.withDescription(
      `most Watch streams open at once; beyond it new watches get RESOURCE_EXHAUSTED (default ${defaultCaps.maxWatches})`
    )
  ),
  watchLogLength: Flag.Int("watch-log-length").pipe(
    Flag.withDescription(
      `changes kept per watched cluster, so that a watcher that reconnects is sent only what it missed rather than the whole cluster; 0 keeps none (every reconnect gets a snapshot). In memory (default ${defaultWatchLogLength}) each kept change holds the changed affiliate's data and endpoints about three times (the change and its encoded messages) plus about 150 bytes: about 90 KB per cluster once ${defaultWatchLogLength} changes of typical Talos affiliates are held, freed 10 minutes after the cluster's last watcher left; on Redis (default 1000, at least 100) the log is a stream trimmed approximately, which also feeds the instances' watchers`
    ),
    Flag.filter(
      (n) => n >= 0,
      (n) => `--watch-log-length must not be negative, got ${n}`
    ),
    Flag.optional
  ),
  landingAddr: Flag.String("landing-addr").pipe(
    Flag.withDescription("listen address of the landing page, /inspect and /stats; empty disables it (default :3001)"),
    Flag.withDefault(":3001")
  ),
  metricsAddr: Flag.String("metrics-addr").pipe(
    Flag.withDescription("listen address of /metrics, /healthz and /readyz; empty disables it (default :2122)"),
    Flag.withDefault(":2122")
  ),
  statsCacheTtl: goDuration("stats-cache-ttl", "1h", true).pipe(
    Flag.withDescription("how long /stats reuses its count, as a Go duration; 0 recounts on every request (default 1h)")
  ),
  snapshotsEnabled: Flag.Boolean("snapshots-enabled").pipe(
    Flag.withDescription("load the state at start, save it periodically and at shutdown (default true)"),
    Flag.withDefault(true)
  ),
  snapshotPath: Flag.String("snapshot-path").pipe(
    Flag.withDescription(`snapshot file (default ${FileSnapshotStore.defaultPath()})`),
    Flag.withDefault(FileSnapshotStore.defaultPath())
  ),
  snapshotInterval: goDuration("snapshot-interval", "10m").pipe(
    Flag.withDescription("period between snapshot saves, as a Go duration (default 10m)")
  ),
  certificatePath: text(
    "certificate-path",
    "",
    "PEM certificate for TLS, reloaded when it changes; needs --key-path (default: plaintext h2c)"
  ),
  keyPath: text("key-path", "", "PEM private key for TLS, reloaded when it changes; needs --certificate-path"),
  rateLimitRps: Flag.Finite("rate-limit-rps").pipe(
    Flag.withDescription("requests per second each client address may make; 0 turns rate limiting off (default 15)"),
    Flag.withDefault(15),
    Flag.filter(
      (n) => n >= 0,
      (n) => `--rate-limit-rps must not be negative, got ${n}`
    )
  ),
  rateLimitBurst: positiveInt("rate-limit-burst", 60).pipe(
    Flag.withDescription("requests a client address may make at once before the rate applies (default 60)")
  ),
  rateLimitMaxWait: goDuration("rate-limit-max-wait", "10s").pipe(
    Flag.withDescription("longest a call waits for its turn before RESOURCE_EXHAUSTED, as a Go duration (default 10s)")
  ),
  rateLimitMaxClients: positiveInt("rate-limit-max-clients", 1_000_000).pipe(
    Flag.withDescription(
      "most client addresses tracked at once; beyond it new addresses share one bucket until idle ones are dropped (default 1000000)"
    )
  ),
  maxConcurrentStreams: positiveInt("max-concurrent-streams", defaultMaxConcurrentStreams).pipe(
    Flag.withDescription(
      `HTTP/2 streams one connection may have open at once; clients have more refused (REFUSED_STREAM) and retry them (default ${defaultMaxConcurrentStreams})`
    )
  ),
  maxSessionMemory: positiveInt("max-session-memory", defaultMaxSessionMemoryMiB).pipe(
    Flag.withDescription(
      `MiB one HTTP/2 connection may hold (streams, header tables, data queued to send); past it its new streams are refused (ENHANCE_YOUR_CALM) until it drops (default ${defaultMaxSessionMemoryMiB})`
    )
  ),
  requestMemoryBudget: byteSize("request-memory-budget").pipe(
    Flag.withDescription(
      `bytes of request messages held at once for all clients while they wait for the rest of their bytes or for their client to end the request, e.g. 128MiB; one that does not fit ends its call with UNAVAILABLE, which clients retry. auto is 1/8 of the V8 heap limit, at most 256MiB (${formatByteSize(defaultRequestBudgetBytes())} here) (default auto)`
    )
  ),
  maxConnections: positiveInt("max-connections", defaultConnectionLimits.maxConnections).pipe(
    Flag.withDescription(
      `connections open at once; more are closed as soon as they are accepted (default ${defaultConnectionLimits.maxConnections})`
    )
  ),
  maxConnectionsPerAddress: positiveInt(
    "max-connections-per-address",
    defaultConnectionLimits.maxConnectionsPerAddress
  ).pipe(
    Flag.withDescription(
      `connections open at once from one client address (a Talos node holds one); more are closed as soon as they are accepted (default ${defaultConnectionLimits.maxConnectionsPerAddress})`
    )
  ),
  handshakeTimeout: goDuration("handshake-timeout", seconds(defaultConnectionLimits.handshakeTimeoutMillis), true).pipe(
    Flag.withDescription(
      `longest from accepting a connection to the client's HTTP/2 SETTINGS (TLS handshake included); then the connection is closed; 0 waits forever (default ${seconds(defaultConnectionLimits.handshakeTimeoutMillis)})`
    )
  ),
  idleTimeout: goDuration("idle-timeout", seconds(defaultConnectionLimits.idleTimeoutMillis), true).pipe(
    Flag.withDescription(
      `a connection with no open call for this long gets a graceful GOAWAY, and its client reconnects when it next calls; 0 keeps it (default ${seconds(defaultConnectionLimits.idleTimeoutMillis)})`
    )
  ),
  keepaliveMinTime: goDuration("keepalive-min-time", "10s", true).pipe(
    Flag.withDescription(
      "shortest welcome interval between a client's pings; after a third ping sooner than that with no data sent to it in between, the client gets GOAWAY ENHANCE_YOUR_CALM too_many_pings, as grpc-go does; 0 answers every ping (default 10s)"
    )
  ),
  failureLogRate: nonNegative("failure-log-rate", 1).pipe(
    Flag.withDescription(
      "log lines per second of failed calls per client address, in bursts of ten times that; the lines left out are counted in discovery_server_log_lines_suppressed_total and summed up in one line a minute; success lines are always written; 0 logs every failure (default 1)"
    )
  ),
  failureLogTotalRate: Flag.Finite("failure-log-total-rate").pipe(
    Flag.withDefault(100),
    Flag.filter(
      (n) => n > 0,
      (n) => `--failure-log-total-rate must be positive, got ${n}`
    ),
    Flag.withDescription(
      "log lines per second of failed calls for all client addresses together, in bursts of ten times that (default 100)"
    )
  ),
  debug: Flag.Boolean("debug").pipe(
    Flag.withDescription("human-readable logs at debug level instead of JSON lines; MODE=dev does the same"),
    Flag.withFallbackConfig(Config.String("MODE").pipe(Config.map((mode) => mode === "dev"))),
    Flag.withDefault(false)
  ),
  logLevel: Flag.ChoiceWithValue("log-level", [
    ["debug", "Debug" as const],
    ["info", "Info" as const],
    ["warn", "Warn" as const],
    ["error", "Error" as const]
  ]).pipe(
    Flag.withDescription(
      "the least severe log lines written (default info, debug with --debug); debug adds one line per change to a cluster with its cause (created, data_changed, endpoints_added, ttl_refreshed, endpoint_expired, affiliate_expired, deleted, cluster_dropped) and one per watch that ends"
    ),
    Flag.optional
  )
}

/**
 * Flags of the original service whose feature this build does not have yet. A
 * value that asks for the feature is refused; a value that turns it off is
 * accepted, since that is what this build does.
 *
 * @category flags
 * @since 0.1.0
 */
export const pendingFlags = {
  debugAddr: Flag.String("debug-addr").pipe(
    Flag.withDescription("not available (pprof server of Go debug builds); only an empty value is accepted"),
    Flag.optional
  )
}

/**
 * The values given for the pending flags.
 *
 * @category models
 * @since 0.1.0
 */
export interface Pending {
  readonly debugAddr: Option.Option<string>
}

/**
 * The reasons to refuse the given pending flags, one line each; empty when
 * every value given only turns a missing feature off.
 *
 * @category flags
 * @since 0.1.0
 */
export const refusals = (pending: Pending): Array<string> => {
  const problems: Array<string> = []
  const emptyOnly = (name: string, value: Option.Option<string>, feature: string) => {
    if (Option.isSome(value) && value.value !== "") {
      problems.push(`--${name}: ${feature} is not available in this build yet; only --${name}="" is accepted`)
    }
  }
  emptyOnly("debug-addr", pending.debugAddr, "the debug server")
  return problems
}

/**
 * Builds the command; `serve` runs the service with the parsed settings.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <E, R>(serve: (config: ServiceConfig) => Effect.Effect<void, E, R>) =>
  Command.make("discovery-service", { ...flags, ...pendingFlags }, (parsed): Effect.Effect<void, E | Error, R> => {
    const problems = refusals(parsed)
    if (problems.length > 0) return Effect.fail(new Error(problems.join("\n")))
    const ioThreadsAuto = parsed.ioThreads === "auto"
    const ioThreads = ioThreadsAuto ? defaultIoThreads() : Number(parsed.ioThreads)
    if (ioThreads > 1 && !reusePortSupported) {
      return Effect.fail(new Error(`--io-threads ${ioThreads}: several threads on one port need SO_REUSEPORT (Linux)`))
    }
    if (parsed.reusePort && parsed.state === "memory") {
      return Effect.fail(new Error("--reuse-port: instances on one port need a shared --state (redis://…)"))
    }
    const password = statePassword(parsed.statePasswordEnv)
    if (password instanceof Error) return Effect.fail(password)
    return serve({
      state:
        parsed.state === "memory"
          ? { _tag: "Memory" }
          : {
              _tag: "Redis",
              url: parsed.state,
              cluster: parsed.stateCluster,
              password,
              keyPrefix: parsed.stateKeyPrefix
            },
      addr: parsed.addr,
      ioThreads,
      ioThreadsAuto: ioThreadsAuto && ioThreads > 1,
      gcInterval: parsed.gcInterval,
      redirectEndpoint: parsed.redirectEndpoint,
      trustXRealIp: parsed.trustXRealIp,
      trustFirstXForwardedFor: parsed.trustFirstXForwardedFor,
      disableClientIpReporting: parsed.disableClientIpReporting,
      maxClusters: parsed.maxClusters,
      maxWatches: parsed.maxWatches,
      watchLogLength: Option.getOrUndefined(parsed.watchLogLength),
      debug: parsed.debug,
      logLevel: Option.getOrUndefined(parsed.logLevel),
      landingAddr: parsed.landingAddr,
      metricsAddr: parsed.metricsAddr,
      statsCacheTtl: parsed.statsCacheTtl,
      snapshotsEnabled: parsed.snapshotsEnabled,
      snapshotPath: parsed.snapshotPath,
      snapshotInterval: parsed.snapshotInterval,
      certificatePath: parsed.certificatePath,
      keyPath: parsed.keyPath,
      transport: {
        maxConcurrentStreams: parsed.maxConcurrentStreams,
        maxSessionMemoryMiB: parsed.maxSessionMemory,
        requestBudgetBytes: parsed.requestMemoryBudget,
        maxConnections: parsed.maxConnections,
        maxConnectionsPerAddress: parsed.maxConnectionsPerAddress,
        handshakeTimeout: parsed.handshakeTimeout,
        idleTimeout: parsed.idleTimeout,
        keepaliveMinTime: parsed.keepaliveMinTime,
        reusePort: parsed.reusePort
      },
      failureLog:
        parsed.failureLogRate === 0
          ? false
          : { perAddressRate: parsed.failureLogRate, totalRate: parsed.failureLogTotalRate },
      rateLimit:
        parsed.rateLimitRps === 0
          ? false
          : {
              rate: parsed.rateLimitRps,
              burst: parsed.rateLimitBurst,
              maxWait: parsed.rateLimitMaxWait,
              maxBuckets: parsed.rateLimitMaxClients
            }
    })
  }).pipe(
    Command.withDescription(
      "Talos-compatible cluster discovery service: nodes of a cluster publish encrypted data about themselves " +
        "and watch the other members. State is held in memory with the TTLs the clients give, and saved to a " +
        "snapshot file. `discovery-service conformance <host:port>` checks any discovery server against the " +
        "protocol instead (see `discovery-service conformance --help`)."
    )
  )

/**
 * Rewrites Go-style single-dash long flags (`-addr=:3000`, `-debug`) into the
 * double-dash form; single-letter short flags (`-h`) are left alone.
 *
 * @category parsing
 * @since 0.1.0
 */
export const normalizeArgs = (args: ReadonlyArray<string>): Array<string> =>
  args.map((arg) => (/^-[a-z][a-z0-9-]+(=.*)?$/.test(arg) ? `-${arg}` : arg))
