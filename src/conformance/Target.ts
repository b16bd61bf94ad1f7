/**
 * What the conformance cases need to know about one implementation of the
 * `ClusterApi` port (in process, or a server reached over gRPC): how to build it, whether it is this project's server, and
 * which optional capabilities (time control, cluster counting, small caps,
 * slow-watcher bounds) it offers. A missing capability skips the cases that need
 * it, with the reason in the test name.
 *
 * @since 0.1.0
 */
import type { Duration, Effect, Layer } from "effect"
import type { ClusterApi } from "../ports/ClusterApi.ts"

/**
 * Time driven by `TestClock`: the target's server reads the clock of the test
 * fiber, and garbage collection runs only when the suite asks. Works in process
 * and for our gRPC server running in the same process as the test.
 *
 * @category models
 * @since 0.1.0
 */
export interface TestClockControl<R> {
  readonly _tag: "TestClock"
  /** Moves the server's clock forward. */
  readonly advance: (duration: Duration.Input) => Effect.Effect<void, never, R>
  /** Runs one garbage collection pass at the current time; its notifications are published when it returns. */
  readonly runGc: Effect.Effect<void, never, R>
}

/**
 * How the suite controls the target's time. Only `TestClock` exists today; a
 * real-time variant (waits against a server with a 1 s GC interval) can join the
 * union later, and cases that need an exact instant keep asking for `TestClock`.
 *
 * @category models
 * @since 0.1.0
 */
export type TimeControl<R> = TestClockControl<R>

/**
 * What Hello reports as `client_ip` on this target.
 *
 * - `Peer`: the address the transport sees for this process (over loopback,
 *   127.0.0.1 gives `7F 00 00 01`); a `clientAddress` in the request is ignored.
 * - `FromRequest`: in process there is no transport, so the server reports
 *   exactly the request's `clientAddress`, and nothing without one.
 * - `Off`: the server is configured not to report addresses (T47).
 * - `Any`: some 4- or 16-byte address, value unknown (a remote server behind NAT).
 *
 * @category models
 * @since 0.1.0
 */
export type ClientIpExpectation =
  | { readonly _tag: "Peer"; readonly bytes: Uint8Array }
  | { readonly _tag: "FromRequest" }
  | { readonly _tag: "Off" }
  | { readonly _tag: "Any" }

/**
 * A variant of the target configured with small global caps, used only by the
 * cases that test those caps (the caps would get in the way of every other case).
 *
 * @category models
 * @since 0.1.0
 */
export interface CapsVariant<R> {
  /** The same kind of target, built with these caps. */
  readonly layer: Layer.Layer<ClusterApi | R, unknown>
  /** The cap on clusters held at once; at least 2. */
  readonly maxClusters: number
  /** The cap on watches open at once; at least 2. */
  readonly maxWatches: number
}

/**
 * How a watcher that never reads is cut off on this target.
 *
 * @category models
 * @since 0.1.0
 */
export interface SlowWatcherBound {
  /**
   * Changes after which a watcher that never reads has surely been cut off:
   * 33 in process (32 buffered plus one); more over a transport whose buffers
   * hold messages between the server's queue and the caller.
   */
  readonly overflowAfter: number
  /** True when nothing buffers between the server's 32-slot queue and the caller, so 32 is an exact bound. */
  readonly exact: boolean
}

/**
 * One implementation of `ClusterApi` for the contract suite.
 *
 * @category models
 * @since 0.1.0
 */
export interface ContractTarget<R = never> {
  /** Names the target in the test report, e.g. "in-process" or "grpc loopback". */
  readonly name: string
  /** Builds the service under test. Each case builds its own, so cases never share state (they also use random cluster IDs). */
  readonly layer: Layer.Layer<ClusterApi | R, unknown>
  /** True for this project's server: the cases for our deliberate improvements over the original run only then. */
  readonly ours: boolean
  /** Time control; absent skips the time-dependent cases. */
  readonly time?: TimeControl<R> | undefined
  /** What Hello reports as the client's address. */
  readonly clientIp: ClientIpExpectation
  /** The redirect endpoint the server was configured with; absent means Hello must carry none. */
  readonly redirectEndpoint?: string | undefined
  /** How many clusters the server holds right now; absent skips the cluster-lifecycle cases. */
  readonly clusterCount?: Effect.Effect<number, never, R> | undefined
  /** A small-caps variant; absent skips the cap cases. */
  readonly caps?: CapsVariant<R> | undefined
  /** The slow-watcher bound; absent skips the slow-watcher cases. */
  readonly slowWatcher?: SlowWatcherBound | undefined
  /**
   * True when strings reach the server exactly as passed (in process), so a lone
   * surrogate arrives malformed. False over protobuf, which encodes it as U+FFFD.
   */
  readonly rawStrings: boolean
  /**
   * Expiry on the server's real clock: how soon after an affiliate's TTL
   * passes the server has surely removed it (its GC interval and a margin).
   * Absent skips the real-time expiry cases (a server on `TestClock` never
   * expires anything in real time).
   */
  readonly realTimeExpiry?: { readonly gcWithinMillis: number } | undefined
  /**
   * Stops the server under test (gracefully, as SIGTERM does), and how soon
   * after that its open watches must have ended, in milliseconds. Absent
   * skips the shutdown case; present, that case must run last, since the
   * server is gone after it.
   */
  readonly stop?: { readonly run: Effect.Effect<void, unknown, R>; readonly withinMillis: number } | undefined
  /** Per-case timeout in milliseconds (vitest's default when absent); remote targets may need more. */
  readonly timeout?: number | undefined
}
