/**
 * The settings of the `discovery-service` command once its flags are parsed:
 * everything needed to build the service's layers.
 *
 * @since 0.1.0
 */
import type { Duration } from "effect"

/**
 * What the command runs with; defaults are the flags' defaults.
 *
 * @category models
 * @since 0.1.0
 */
export interface ServiceConfig {
  /** Where the cluster state lives: in this process, or shared on Redis/Valkey by several instances. */
  readonly state: StateConfig
  /** gRPC listen address as `host:port`; an empty host listens on every interface. */
  readonly addr: string
  /** Threads serving the gRPC port (with `ioThreadsAuto`, the most); 1 serves it on the thread that holds the state. */
  readonly ioThreads: number
  /** Start with the main thread alone and add threads only while it is the bottleneck (`ThreadScaler`). */
  readonly ioThreadsAuto: boolean
  readonly gcInterval: Duration.Duration
  readonly redirectEndpoint: string
  readonly trustXRealIp: boolean
  readonly trustFirstXForwardedFor: boolean
  readonly disableClientIpReporting: boolean
  readonly maxClusters: number
  readonly maxWatches: number
  /** Changes kept per watched cluster for resuming watches; undefined takes the backend's default. */
  readonly watchLogLength: number | undefined
  readonly debug: boolean
  /** The least severe log lines written (`--log-level`); undefined: Debug with `debug`, else Info. */
  readonly logLevel?: "Debug" | "Info" | "Warn" | "Error" | undefined
  /** Landing page, /inspect, /stats listener; empty disables it. */
  readonly landingAddr: string
  /** /metrics, /healthz, /readyz listener; empty disables it. */
  readonly metricsAddr: string
  readonly statsCacheTtl: Duration.Duration
  readonly snapshotsEnabled: boolean
  readonly snapshotPath: string
  readonly snapshotInterval: Duration.Duration
  /** TLS key pair; both empty means plaintext h2c. */
  readonly certificatePath: string
  readonly keyPath: string
  /** The http2 transport's limits. */
  readonly transport: {
    readonly maxConcurrentStreams: number
    readonly maxSessionMemoryMiB: number
    /** `undefined`: the default budget. */
    readonly requestBudgetBytes: number | undefined
    readonly maxConnections: number
    readonly maxConnectionsPerAddress: number
    /** Zero turns a deadline or the ping policy off. */
    readonly handshakeTimeout: Duration.Duration
    readonly idleTimeout: Duration.Duration
    readonly keepaliveMinTime: Duration.Duration
    /** Share the gRPC port with other processes (SO_REUSEPORT). */
    readonly reusePort: boolean
  }
  /** Failure lines per second per client address and in total, or false to log every one. */
  readonly failureLog: { readonly perAddressRate: number; readonly totalRate: number } | false
  /** Per-client-address token bucket, or false for none. */
  readonly rateLimit:
    | {
        readonly rate: number
        readonly burst: number
        readonly maxWait: Duration.Duration
        readonly maxBuckets: number
      }
    | false
}

/**
 * Where the cluster state lives.
 *
 * @category models
 * @since 0.1.0
 */
export type StateConfig =
  | { readonly _tag: "Memory" }
  | {
      readonly _tag: "Redis"
      /** `redis://` or `rediss://` URL; seed nodes separated by commas for a Redis Cluster. */
      readonly url: string
      /** The URL names seed nodes of a Redis Cluster. */
      readonly cluster: boolean
      /** The password, when it comes from an environment variable rather than the URL. */
      readonly password: string | undefined
      /** Prefix of every key. */
      readonly keyPrefix: string
    }
