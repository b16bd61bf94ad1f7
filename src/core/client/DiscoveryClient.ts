/**
 * The discovery client: publishes this node (sealed with the cluster key),
 * keeps it alive on the service, and keeps the list of the other nodes of the
 * cluster up to date from a watch. It runs over the `ClusterApi` port, reached
 * through a `ClusterConnector` (gRPC, or a service in the same process), and
 * is wire-compatible with the Go client that Talos nodes run
 * (PROTOCOL.md §5).
 *
 * The run loop: Hello (follow a redirect) → Watch → AffiliateUpdate at once,
 * then every TTL/2 and after each local change. Any failure ends the session
 * and a new one starts after an exponential backoff with jitter; the backoff
 * starts over once a session has both its snapshot and a successful refresh.
 * Differences from the Go client (quirk Q18): the first connection does not
 * wait; a failed refresh reconnects after the backoff instead of waiting for
 * the next TTL/2 tick; at most `maxRedirects` redirects in a row are followed
 * at once, after which each one waits a backoff; a deletion is sent until it
 * succeeds once, then never again; each new watch resumes where the last one
 * left off (a service that cannot, or the original, sends a snapshot); a TTL under 2 ns (or over the service's
 * 30 minutes) is refused when the client is built. Time comes only from
 * Effect's `Clock`, so `TestClock` drives the whole loop.
 *
 * @since 0.1.0
 */
import type { Scope, Stream as StreamT } from "effect"
import {
  Clock,
  Context,
  Duration,
  Effect,
  Layer,
  Option,
  Queue,
  Random,
  Ref,
  Result,
  Schedule,
  Schema,
  Stream,
  SubscriptionRef
} from "effect"
import type { ClusterApi, ResumePoint, WatchEvent } from "../../ports/ClusterApi.ts"
import { Unavailable } from "../../ports/DiscoveryError.ts"
import { utf8Length } from "../utf8.ts"
import { ClusterConnector } from "./ClusterConnector.ts"
import type { AffiliateInfoInit, EndpointInit } from "./payload.ts"
import type { DiscoveredAffiliate, Discovered, Reconciler } from "./reconcile.ts"
import { reconcile, toAffiliates } from "./reconcile.ts"
import { continues, nextResumePoint } from "./resumePoint.ts"
import type { ClusterKey } from "./sealing.ts"
import { makeKey, openAffiliate, openEndpoint, sealAffiliate, sealEndpoint } from "./sealing.ts"

/**
 * How the client identifies itself and where it connects.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClientOptions {
  /** The cluster secret: 16, 24 or 32 bytes (Talos uses 32, AES-256). */
  readonly key: Uint8Array
  /** The service's `host:port`; a redirect from the service replaces it for good. */
  readonly endpoint: string
  /** The cluster to join (1 to 256 bytes). */
  readonly clusterId: string
  /** This node's ID in the cluster (1 to 256 bytes); its own entries are never listed. */
  readonly affiliateId: string
  /** Sent in Hello (default empty). */
  readonly clientVersion?: string | undefined
  /** How long the service keeps what this client publishes; refreshed every TTL/2. From 2 ns to 30 minutes. */
  readonly ttl: Duration.Input
  /** Redirects followed in a row at once; each further one waits a backoff (default 5). */
  readonly maxRedirects?: number | undefined
}

/**
 * What this node publishes about itself: its affiliate data and endpoints.
 *
 * @category models
 * @since 0.1.0
 */
export interface LocalAffiliate {
  readonly affiliate: AffiliateInfoInit
  readonly endpoints?: ReadonlyArray<EndpointInit> | undefined
}

/**
 * Endpoints this node observed for another member of the cluster; they are
 * published under that member's ID, without data.
 *
 * @category models
 * @since 0.1.0
 */
export interface PeerEndpoints {
  readonly affiliateId: string
  readonly endpoints: ReadonlyArray<EndpointInit>
}

/**
 * The client options are unusable (key size, TTL, IDs).
 *
 * @category errors
 * @since 0.1.0
 */
export class InvalidClientOptions extends Schema.TaggedError<InvalidClientOptions>()("InvalidClientOptions", {
  message: Schema.String
}) {}

/**
 * The local data cannot be published (too big for the service, bad port or
 * peer ID); nothing was changed.
 *
 * @category errors
 * @since 0.1.0
 */
export class InvalidLocalData extends Schema.TaggedError<InvalidLocalData>()("InvalidLocalData", {
  message: Schema.String
}) {}

/**
 * The discovery client of one node.
 *
 * @category services
 * @since 0.1.0
 */
export class DiscoveryClient extends Context.Service<
  DiscoveryClient,
  {
    /**
     * Seals and stores what this node publishes, then triggers a refresh.
     * Everything is sealed before anything is committed.
     */
    readonly setLocalData: (
      local: LocalAffiliate,
      otherEndpoints?: ReadonlyArray<PeerEndpoints>
    ) => Effect.Effect<void, InvalidLocalData>
    /** Stops publishing and deletes this node from the service (sent until it succeeds once). */
    readonly deleteLocalAffiliate: Effect.Effect<void>
    /** The other members of the cluster, as copies. */
    readonly affiliates: Effect.Effect<ReadonlyArray<DiscoveredAffiliate>>
    /** This node's address as the service saw it in the last Hello (4 or 16 bytes), if reported. */
    readonly publicIp: Effect.Effect<Uint8Array | undefined>
    /** The current members, then the new list after every change. */
    readonly changes: StreamT.Stream<ReadonlyArray<DiscoveredAffiliate>>
    /** The endpoint in use: the configured one, or where the service redirected. */
    readonly endpoint: Effect.Effect<string>
  }
>()("talos-discovery/DiscoveryClient") {}

/**
 * Deadline of Hello, as in the Go client.
 *
 * @category constants
 * @since 0.1.0
 */
export const helloTimeout: Duration.Duration = Duration.seconds(10)

/**
 * Deadline of one refresh (all its updates), as in the Go client.
 *
 * @category constants
 * @since 0.1.0
 */
export const refreshTimeout: Duration.Duration = Duration.seconds(30)

/**
 * The longest TTL the service accepts.
 *
 * @category constants
 * @since 0.1.0
 */
export const maxTtl: Duration.Duration = Duration.minutes(30)

const maxBackoffInterval = 60_000

/**
 * The reconnection backoff of the Go client: 500 ms, ×1.5 per attempt, the
 * interval capped at 60 s, each delay randomised by ±50 % (so a capped delay
 * is 30 to 90 s), never giving up. Jitter comes from Effect's `Random`.
 *
 * @category constants
 * @since 0.1.0
 */
export const backoff: Schedule.Schedule<Duration.Duration> = Schedule.exponential("500 millis", 1.5).pipe(
  Schedule.modifyDelay(({ duration }) =>
    Effect.map(Random.next, (random) =>
      Duration.millis(Math.min(Duration.toMillis(duration), maxBackoffInterval) * (0.5 + random))
    )
  )
)

/**
 * The keepalive ping interval a transport should use for a client with this
 * TTL: `max(10 s, TTL/10)`, as in the Go client (pass it to
 * `GrpcClient.make({ keepaliveTime })`).
 *
 * @category constants
 * @since 0.1.0
 */
export const keepaliveTime = (ttl: Duration.Input): Duration.Duration =>
  Duration.max(Duration.seconds(10), Duration.divideUnsafe(Duration.fromInputUnsafe(ttl), 10))

type LocalState =
  | { readonly _tag: "Empty" }
  | {
      readonly _tag: "Publishing"
      readonly data: Uint8Array
      readonly endpoints: ReadonlyArray<Uint8Array>
      readonly peers: ReadonlyArray<{ readonly affiliateId: string; readonly endpoints: ReadonlyArray<Uint8Array> }>
    }
  | { readonly _tag: "Deleting" }
  | { readonly _tag: "Deleted" }

interface Config {
  readonly key: ClusterKey
  readonly ttl: Duration.Duration
  readonly refreshInterval: Duration.Duration
  readonly maxRedirects: number
}

const checkId = (what: string, id: string): string | undefined => {
  if (id === "") return `${what} can't be empty`
  if (!id.isWellFormed()) return `${what} is not valid UTF-8`
  if (utf8Length(id) > 256) return `${what} is longer than 256 bytes`
  return undefined
}

const validate = (options: ClientOptions): Result.Result<Config, string> => {
  const key = makeKey(options.key)
  if (Result.isFailure(key)) return Result.fail(key.failure)
  const idProblem = checkId("the cluster ID", options.clusterId) ?? checkId("the affiliate ID", options.affiliateId)
  if (idProblem !== undefined) return Result.fail(idProblem)
  if (options.endpoint === "") return Result.fail("the endpoint can't be empty")
  const ttlNanos = Option.flatMap(Duration.fromInput(options.ttl), Duration.toNanos)
  if (Option.isNone(ttlNanos)) return Result.fail("the TTL must be a finite duration")
  if (ttlNanos.value < 2n) return Result.fail("the TTL must be at least 2 ns (it is refreshed every TTL/2)")
  if (ttlNanos.value > Duration.toNanosUnsafe(maxTtl)) return Result.fail("the TTL must be at most 30 minutes")
  const maxRedirects = options.maxRedirects ?? 5
  if (!Number.isInteger(maxRedirects) || maxRedirects < 0) {
    return Result.fail("maxRedirects must be a non-negative integer")
  }
  return Result.succeed({
    key: key.success,
    ttl: Duration.nanos(ttlNanos.value),
    refreshInterval: Duration.nanos(ttlNanos.value / 2n),
    maxRedirects
  })
}

const sealEndpoints = (
  key: ClusterKey,
  owner: string,
  endpoints: ReadonlyArray<EndpointInit>
): Result.Result<Array<Uint8Array>, string> => {
  const sealed: Array<Uint8Array> = []
  for (const endpoint of endpoints) {
    const port = endpoint.port ?? 0
    if (!Number.isInteger(port) || port < 0 || port > 0xffffffff) {
      return Result.fail(`endpoint port ${port} of ${owner} is not a uint32`)
    }
    const blob = sealEndpoint(key, endpoint)
    if (Result.isFailure(blob)) return Result.fail(`${blob.failure} (${owner})`)
    sealed.push(blob.success)
  }
  return Result.succeed(sealed)
}

const seal = (
  config: Config,
  local: LocalAffiliate,
  others: ReadonlyArray<PeerEndpoints>
): Result.Result<LocalState, string> => {
  const data = sealAffiliate(config.key, local.affiliate)
  if (Result.isFailure(data)) return Result.fail(data.failure)
  const endpoints = sealEndpoints(config.key, "this node", local.endpoints ?? [])
  if (Result.isFailure(endpoints)) return Result.fail(endpoints.failure)
  const peers: Array<{ affiliateId: string; endpoints: ReadonlyArray<Uint8Array> }> = []
  for (const peer of others) {
    const problem = checkId(`the peer affiliate ID ${JSON.stringify(peer.affiliateId)}`, peer.affiliateId)
    if (problem !== undefined) return Result.fail(problem)
    const sealed = sealEndpoints(config.key, `peer ${peer.affiliateId}`, peer.endpoints)
    if (Result.isFailure(sealed)) return Result.fail(sealed.failure)
    peers.push({ affiliateId: peer.affiliateId, endpoints: sealed.success })
  }
  return Result.succeed({ _tag: "Publishing", data: data.success, endpoints: endpoints.success, peers })
}

/**
 * Builds a client and starts its run loop, which stops when the scope closes
 * (without deleting this node: its entry then expires on the service).
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (
  options: ClientOptions
): Effect.Effect<DiscoveryClient["Service"], InvalidClientOptions, ClusterConnector | Scope.Scope> =>
  Effect.gen(function* () {
    const validated = validate(options)
    if (Result.isFailure(validated)) return yield* new InvalidClientOptions({ message: validated.failure })
    const config = validated.success
    const connector = yield* ClusterConnector
    const { clusterId, affiliateId } = options
    const clientVersion = options.clientVersion ?? ""

    const local = yield* Ref.make<LocalState>({ _tag: "Empty" })
    const localChanged = yield* Queue.sliding<void>(1)
    const discovered = yield* SubscriptionRef.make<Discovered>(new Map())
    const publicIp = yield* Ref.make<Uint8Array | undefined>(undefined)
    const endpoint = yield* Ref.make(options.endpoint)

    const reconciler: Reconciler = {
      selfId: affiliateId,
      openAffiliate: (blob) => openAffiliate(config.key, blob),
      openEndpoint: (blob) => openEndpoint(config.key, blob)
    }

    const applyEvent = (event: WatchEvent) =>
      Effect.gen(function* () {
        const current = yield* SubscriptionRef.get(discovered)
        const { discovered: next, problems } = reconcile(reconciler, current, event)
        for (const problem of problems) {
          yield* Effect.logWarning(
            problem.kind === "data"
              ? "dropped an affiliate whose data cannot be read"
              : "skipped a malformed endpoint blob"
          ).pipe(Effect.annotateLogs({ peer: problem.affiliateId, reason: problem.reason }))
        }
        if (next !== current) yield* SubscriptionRef.set(discovered, next)
      })

    const refresh = (api: ClusterApi["Service"]) =>
      Effect.gen(function* () {
        const state = yield* Ref.get(local)
        switch (state._tag) {
          case "Empty":
          case "Deleted":
            return
          case "Deleting":
            yield* api.affiliateDelete({ clusterId, affiliateId })
            // a setLocalData in the meantime wins
            yield* Ref.update(local, (s): LocalState => (s === state ? { _tag: "Deleted" } : s))
            yield* Effect.logInfo("deleted this affiliate from the discovery service")
            return
          case "Publishing":
            yield* api.affiliateUpdate({
              clusterId,
              affiliateId,
              data: state.data,
              endpoints: state.endpoints,
              ttl: config.ttl
            })
            for (const peer of state.peers) {
              yield* api.affiliateUpdate({
                clusterId,
                affiliateId: peer.affiliateId,
                endpoints: peer.endpoints,
                ttl: config.ttl
              })
            }
        }
      })

    // Where the next watch resumes: the last event applied, in its epoch (none from a service without epochs).
    let resumeFrom: ResumePoint | undefined

    // Backoff state, shared by the loops below.
    let step = yield* Schedule.toStep(backoff)
    let waitBeforeHello = false
    let redirectsInARow = 0

    const pause = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const delay = yield* step(now, undefined).pipe(
        Effect.map(([, delay]) => delay),
        Effect.catch(() => Effect.succeed(Duration.millis(maxBackoffInterval)))
      )
      yield* Effect.logDebug("waiting before the next discovery attempt").pipe(
        Effect.annotateLogs({ delay: Duration.format(delay) })
      )
      yield* Effect.sleep(delay)
    })

    const healthy = Effect.gen(function* () {
      step = yield* Schedule.toStep(backoff)
      redirectsInARow = 0
    })

    // One Hello-to-failure session on a connection: the watch and the refresh
    // loop run side by side; the first failure ends both.
    const session = (api: ClusterApi["Service"]) =>
      Effect.gen(function* () {
        let snapshotSeen = false
        let refreshed = false
        const markHealthy = Effect.suspend(() => (snapshotSeen && refreshed ? healthy : Effect.void))
        yield* Queue.clear(localChanged)

        const watchLoop = api.watch({ clusterId, resume: resumeFrom }).pipe(
          Stream.runForEach((event) =>
            // applied and remembered together, so a resume never asks for what was applied already
            Effect.uninterruptible(
              Effect.suspend(() => {
                if (!continues(resumeFrom, event)) {
                  resumeFrom = undefined
                  return Effect.fail(
                    new Unavailable({ message: "the watch skipped a revision; watching from a snapshot" })
                  )
                }
                return Effect.andThen(applyEvent(event), () => {
                  resumeFrom = nextResumePoint(resumeFrom, event)
                  if (snapshotSeen || (event._tag !== "Snapshot" && event._tag !== "Resumed")) return Effect.void
                  snapshotSeen = true
                  return markHealthy
                })
              })
            )
          ),
          Effect.andThen(Effect.fail(new Unavailable({ message: "the watch ended" })))
        )

        const refreshLoop = Effect.gen(function* () {
          for (;;) {
            yield* refresh(api).pipe(Effect.timeout(refreshTimeout))
            if (!refreshed) {
              refreshed = true
              yield* markHealthy
            }
            yield* Effect.raceFirst(Effect.sleep(config.refreshInterval), Queue.take(localChanged))
          }
        })

        yield* Effect.all([watchLoop, refreshLoop], { concurrency: "unbounded", discard: true })
      })

    // Sessions over one connection; returns the endpoint the service redirects to.
    const connection = (target: string) =>
      Effect.scoped(
        Effect.gen(function* () {
          const api = yield* connector.connect(target)
          for (;;) {
            if (waitBeforeHello) yield* pause
            waitBeforeHello = true
            const hello = yield* api.hello({ clusterId, clientVersion }).pipe(Effect.timeout(helloTimeout))
            yield* Ref.set(publicIp, hello.clientIp?.length ? hello.clientIp.slice() : undefined)
            if (hello.redirect) return hello.redirect
            const failure = yield* Effect.result(session(api))
            if (Result.isFailure(failure)) {
              yield* Effect.logWarning("discovery session failed; reconnecting").pipe(
                Effect.annotateLogs({ error: String(failure.failure) })
              )
            }
          }
        })
      )

    const run = Effect.gen(function* () {
      for (;;) {
        const target = yield* Ref.get(endpoint)
        const outcome = yield* Effect.result(connection(target))
        if (Result.isFailure(outcome)) {
          // connect or Hello failed: the connection is rebuilt, as the Go client
          // does to reload TLS settings
          yield* Effect.logWarning("connecting to the discovery service failed").pipe(
            Effect.annotateLogs({ endpoint: target, error: String(outcome.failure) })
          )
          waitBeforeHello = true
          continue
        }
        redirectsInARow++
        yield* Ref.set(endpoint, outcome.success)
        if (redirectsInARow > config.maxRedirects) {
          yield* Effect.logWarning("too many redirects in a row; backing off").pipe(
            Effect.annotateLogs({ from: target, to: outcome.success })
          )
          waitBeforeHello = true
        } else {
          yield* Effect.logInfo("redirected").pipe(Effect.annotateLogs({ from: target, to: outcome.success }))
          waitBeforeHello = false
        }
      }
    })

    yield* run.pipe(Effect.annotateLogs({ cluster_id: clusterId, affiliate_id: affiliateId }), Effect.forkScoped)

    const setLocal = (state: LocalState) =>
      Effect.andThen(Ref.set(local, state), Queue.offer(localChanged, undefined)).pipe(Effect.asVoid)

    return DiscoveryClient.of({
      setLocalData: (localAffiliate, otherEndpoints = []) =>
        Effect.suspend(() => {
          const sealed = seal(config, localAffiliate, otherEndpoints)
          return Result.isFailure(sealed)
            ? Effect.fail(new InvalidLocalData({ message: sealed.failure }))
            : setLocal(sealed.success)
        }),
      deleteLocalAffiliate: setLocal({ _tag: "Deleting" }),
      affiliates: Effect.map(SubscriptionRef.get(discovered), toAffiliates),
      publicIp: Effect.map(Ref.get(publicIp), (ip) => ip?.slice()),
      changes: Stream.map(SubscriptionRef.changes(discovered), toAffiliates),
      endpoint: Ref.get(endpoint)
    })
  })

/**
 * The client as a layer: it runs while the layer is alive. Provide a
 * `ClusterConnector` (gRPC, or `ClusterConnector.layerClusterApi` in process).
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: ClientOptions): Layer.Layer<DiscoveryClient, InvalidClientOptions, ClusterConnector> =>
  Layer.effect(DiscoveryClient, make(options))
