/**
 * The landing listener (`--landing-addr`, default `:3001`): the static landing
 * page, the read-only `/inspect` page, `/stats`, and the `/healthz` and
 * `/readyz` probes, served with `@effect/platform-node` over the core's
 * `ClusterState`.
 *
 * Compared with the original: `/inspect` validates the cluster ID, never
 * creates a cluster, is rate limited per client address, and answers a
 * malformed query with 400 instead of 500; the `/stats` cache TTL is
 * configurable (Q6, Q22).
 *
 * @since 0.1.0
 */
import type * as http from "node:http"
import { hostname } from "node:os"
import type * as http2 from "node:http2"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import type { Scope } from "effect"
import { Clock, Context, Duration, Effect, Exit, Layer, Option } from "effect"
import type { HttpServerError } from "effect/http"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import type { NetAddress } from "effect/net"
import { limiterKey, parseSocketAddress, resolveClientAddress } from "../../core/server/clientAddress.ts"
import { ClusterState } from "../../core/server/ClusterState.ts"
import * as Health from "./Health.ts"
import { latestByAffiliate } from "./live/inspectFrame.ts"
import * as LiveRoutes from "./live/liveRoutes.ts"
import * as LiveSampler from "./live/LiveSampler.ts"
import { LiveView } from "./live/LiveView.ts"
import { boundAddress, serveOn } from "./listener.ts"
import { inspectPage, landingPage } from "./pages.ts"
import type { RateLimit } from "./RateLimiter.ts"
import * as RateLimiter from "./RateLimiter.ts"
import type { Readiness } from "./Readiness.ts"

/**
 * How the landing listener behaves; every field has a default.
 *
 * @category models
 * @since 0.1.0
 */
export interface LandingOptions {
  /** Listen address, Go style: `:3001` (every interface, the default), `127.0.0.1:0`, `[::1]:3001`. */
  readonly address?: string | undefined
  /** How long `/stats` keeps its count (default 1 hour, as the original); 0 recomputes on every request. */
  readonly statsTtl?: Duration.Input | undefined
  /** Token bucket per client address for `/inspect` (default 5 per second, burst 10), or "disabled". */
  readonly inspectRateLimit?: RateLimit | "disabled" | undefined
  /** Key the `/inspect` limit on the X-Real-IP header when present (default false; only behind a proxy). */
  readonly trustXRealIp?: boolean | undefined
  /** Key the `/inspect` limit on the first X-Forwarded-For entry when present (default false). */
  readonly trustFirstXForwardedFor?: boolean | undefined
  /** How long open requests may take to finish on shutdown (default 5 seconds, as the original). */
  readonly shutdownTimeout?: Duration.Input | undefined
}

/**
 * The default `/inspect` limit per client address: 5 requests per second,
 * bursts of 10. Plenty for a person at a browser, too little to enumerate IDs.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultInspectRateLimit: RateLimit = { perSecond: 5, burst: 10 }

/**
 * The default `/stats` cache TTL: one hour, as the original.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultStatsTtl: Duration.Duration = Duration.hours(1)

/**
 * The running landing listener: where it is bound (useful with port 0).
 *
 * @category services
 * @since 0.1.0
 */
export class LandingServer extends Context.Service<
  LandingServer,
  { readonly address: NetAddress.SocketAddress; readonly port: number }
>()("talos-discovery/http/LandingServer") {}

/**
 * The query of a request parsed like Go's `url.ParseQuery`: `&`-separated,
 * `+` is a space, and a bad `%` escape, a `;` separator or bytes that are not
 * UTF-8 make it malformed.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseQuery = (
  raw: string
):
  | { readonly _tag: "Ok"; readonly values: ReadonlyMap<string, string> }
  | { readonly _tag: "Malformed"; readonly message: string } => {
  const values = new Map<string, string>()
  for (const part of raw.split("&")) {
    if (part === "") continue
    if (part.includes(";")) return { _tag: "Malformed", message: "invalid semicolon separator in query" }
    const eq = part.indexOf("=")
    const decoded: Array<string> = []
    for (const text of eq === -1 ? [part, ""] : [part.slice(0, eq), part.slice(eq + 1)]) {
      const badEscape = /%(?![0-9a-fA-F]{2})/.exec(text)
      if (badEscape !== null) {
        return {
          _tag: "Malformed",
          message: `invalid URL escape ${JSON.stringify(text.slice(badEscape.index, badEscape.index + 3))}`
        }
      }
      try {
        decoded.push(decodeURIComponent(text.replaceAll("+", " ")))
      } catch {
        return { _tag: "Malformed", message: "invalid UTF-8 in query" }
      }
    }
    const [key, value] = decoded as [string, string]
    if (!values.has(key)) values.set(key, value)
  }
  return { _tag: "Ok", values }
}

/**
 * The caller's address as the rate limit key, by the same rules as gRPC calls
 * (PROTOCOL.md §2.10); IPv4-mapped IPv6 counts as IPv4.
 */
const clientKey = (request: HttpServerRequest.HttpServerRequest, options: LandingOptions): string => {
  const ip = resolveClientAddress(
    (name) => request.headers[name],
    () => Option.getOrUndefined(Option.map(request.remoteAddress, parseSocketAddress)),
    { trustXRealIp: options.trustXRealIp, trustXForwardedFor: options.trustFirstXForwardedFor }
  )
  return ip === undefined ? "unknown" : limiterKey(ip)
}

// The pages run only the service's own scripts and reach only the service: an escaping slip stays inert.
const htmlHeaders = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self' 'unsafe-inline'; " +
    "img-src 'self' data:; form-action 'self'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff"
}
const html = (body: string, status = 200) =>
  HttpServerResponse.text(body, { status, contentType: "text/html; charset=utf-8", headers: htmlHeaders })
const oops = () => HttpServerResponse.text("Oops, try again", { status: 500 })

const statsHeaders = { "access-control-allow-origin": "*" }
const statsJson = (body: string, status: number) =>
  HttpServerResponse.text(body, { status, contentType: "application/json", headers: statsHeaders })

/**
 * The `/stats` handler: `{"affiliates":N}` computed at most once per `ttl`,
 * with concurrent recomputes collapsed into one; failures are not cached.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeStatsHandler = Effect.fnUntraced(function* (ttl: Duration.Input) {
  const state = yield* ClusterState
  const affiliates = yield* Effect.cachedWithTTL(
    Effect.map(state.stats, (stats) => stats.affiliates),
    (exit: Exit.Exit<number>) => (Exit.isSuccess(exit) ? ttl : Duration.zero)
  )
  return affiliates.pipe(
    Effect.map((count) => statsJson(JSON.stringify({ affiliates: count }), 200)),
    Effect.catchCause(() => Effect.succeed(statsJson(`{"error": "Oops, try again"}`, 500)))
  )
})

/** The `/inspect` limit of `options`, or `undefined` when it is disabled. */
const inspectLimiter = (options: LandingOptions) => {
  const limit = options.inspectRateLimit ?? defaultInspectRateLimit
  return limit === "disabled" ? undefined : RateLimiter.make(limit)
}

const tooManyRequests = (retryAfterMillis: number) =>
  HttpServerResponse.text("too many requests, try again later\n", {
    status: 429,
    headers: { "retry-after": String(Math.max(1, Math.ceil(retryAfterMillis / 1000))) }
  })

/** The 429 answer when the client's `/inspect` rate limit refuses the request, else `undefined`. */
const refusedByLimit = (
  request: HttpServerRequest.HttpServerRequest,
  options: LandingOptions,
  limiter: RateLimiter.RateLimiter | undefined
) =>
  limiter === undefined
    ? Effect.succeed(undefined)
    : Effect.map(limiter.take(clientKey(request, options)), (decision) =>
        decision.allowed ? undefined : tooManyRequests(decision.retryAfterMillis)
      )

/**
 * The request's cluster ID after the rate limit (which the page and its
 * event stream share): a response when it is refused or the query is
 * malformed, else the ID (empty when none was given).
 */
const inspectedCluster = (
  request: HttpServerRequest.HttpServerRequest,
  options: LandingOptions,
  limiter: RateLimiter.RateLimiter | undefined
) =>
  Effect.gen(function* () {
    const refused = yield* refusedByLimit(request, options, limiter)
    if (refused !== undefined) return { _tag: "Refused", response: refused } as const
    const question = request.url.indexOf("?")
    const query = parseQuery(question === -1 ? "" : request.url.slice(question + 1))
    if (query._tag === "Malformed") return { _tag: "Malformed", message: query.message } as const
    return { _tag: "Cluster", clusterId: query.values.get("clusterID") ?? "" } as const
  })

/**
 * The `/inspect` handler: form only for an empty ID, 400 with the validation
 * message for an invalid one or a malformed query, 429 past the rate limit,
 * else the cluster's affiliates and its last changes, with the script that
 * keeps them live. It reads with `ClusterState.list` and `history`, which
 * never create a cluster.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeInspectHandler = Effect.fnUntraced(function* (
  options: LandingOptions,
  limiter: RateLimiter.RateLimiter | undefined = inspectLimiter(options)
) {
  const state = yield* ClusterState
  return Effect.gen(function* () {
    const asked = yield* inspectedCluster(yield* HttpServerRequest.HttpServerRequest, options, limiter)
    if (asked._tag === "Refused") return asked.response
    if (asked._tag === "Malformed") return html(inspectPage("", { _tag: "Error", message: asked.message }), 400)
    const clusterId = asked.clusterId
    if (clusterId === "") return html(inspectPage("", { _tag: "Form" }))
    const listed = yield* Effect.result(state.list({ clusterId }))
    if (listed._tag === "Failure") {
      return html(inspectPage(clusterId, { _tag: "Error", message: listed.failure.message }), 400)
    }
    const read = yield* Effect.result(state.history({ clusterId }))
    const history = read._tag === "Success" ? read.success : undefined
    return html(
      inspectPage(clusterId, {
        _tag: "Cluster",
        affiliates: listed.success,
        history,
        known: latestByAffiliate(history),
        now: yield* Clock.currentTimeMillis
      })
    )
  }).pipe(Effect.catchCause(() => Effect.succeed(oops())))
})

/**
 * The `/inspect/events` handler: the live stream of the page's cluster,
 * under the same rate limit as the page (one token a stream).
 */
const makeInspectEventsHandler = (
  options: LandingOptions,
  limiter: RateLimiter.RateLimiter | undefined,
  streams: LiveRoutes.OpenStreams
) =>
  Effect.gen(function* () {
    const asked = yield* inspectedCluster(yield* HttpServerRequest.HttpServerRequest, options, limiter)
    if (asked._tag === "Refused") return asked.response
    if (asked._tag === "Malformed") return HttpServerResponse.text(`${asked.message}\n`, { status: 400 })
    if (asked.clusterId === "") return HttpServerResponse.text("clusterID is required\n", { status: 400 })
    return yield* LiveRoutes.inspectEventsFor(asked.clusterId, streams)
  }).pipe(Effect.catchCause(() => Effect.succeed(oops())))

/**
 * The live view of the context, or one that samples the state alone (an
 * embedder's landing listener without the command's threads and instances).
 */
const liveViewOf = Effect.gen(function* () {
  const provided = yield* Effect.serviceOption(LiveView)
  if (Option.isSome(provided)) return provided.value
  return yield* LiveSampler.make({
    self: { name: `${hostname()}/${process.pid}`, version: "embedded", startedAt: Date.now(), state: "embedded" },
    address: () => "",
    threads: () => [],
    requestMemory: () => undefined,
    refreshMetrics: Effect.void
  })
})

/**
 * The site's routes: `/` (landing page), `/index.html` (301 to `/`),
 * `/inspect`, the live view's event streams (`/live/events`,
 * `/inspect/events`) and assets (`/assets/…`), `/stats`, `/healthz`,
 * `/readyz`, and a plain 404 for anything else. The live view is the
 * context's `LiveView`, or one sampling the state alone. Methods are not checked, as in the original's mux. Mount them on any
 * `HttpRouter` (for example the main port's, for non-gRPC requests).
 *
 * @category layers
 * @since 0.1.0
 */
export const routes = (
  options: LandingOptions = {}
): Layer.Layer<never, never, HttpRouter.HttpRouter | ClusterState | Readiness> =>
  Layer.merge(
    HttpRouter.use((router) =>
      Effect.gen(function* () {
        const stats = yield* makeStatsHandler(options.statsTtl ?? defaultStatsTtl)
        const limiter = inspectLimiter(options)
        const inspect = yield* makeInspectHandler(options, limiter)
        const view = yield* liveViewOf
        const streams = new LiveRoutes.OpenStreams()
        const context = yield* Effect.context<ClusterState>()
        yield* router.add("*", "/", html(landingPage))
        yield* router.add("*", "/index.html", HttpServerResponse.redirect("/", { status: 301 }))
        yield* router.add("*", "/inspect", inspect)
        // event streams answer GET only; each takes a token of its client's /inspect rate limit
        yield* router.add(
          "GET",
          "/inspect/events",
          makeInspectEventsHandler(options, limiter, streams).pipe(Effect.provideContext(context))
        )
        yield* router.add(
          "GET",
          "/live/events",
          Effect.gen(function* () {
            const refused = yield* refusedByLimit(yield* HttpServerRequest.HttpServerRequest, options, limiter)
            return refused ?? LiveRoutes.liveEvents(view, streams)
          })
        )
        for (const path of Object.keys(LiveRoutes.assets) as Array<keyof typeof LiveRoutes.assets>) {
          const answer = Effect.sync(LiveRoutes.assets[path]).pipe(Effect.catchCause(() => Effect.succeed(oops())))
          yield* router.add("GET", path, answer)
        }
        yield* router.add("*", "/stats", stats)
        yield* router.add("*", "*", HttpServerResponse.text("404 page not found\n", { status: 404 }))
      })
    ),
    Health.routes
  )

/**
 * The landing listener: the site's routes on a Node HTTP server at
 * `options.address` (default `:3001`), open while the layer is.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (
  options: LandingOptions = {}
): Layer.Layer<LandingServer, HttpServerError.ServeError, ClusterState | Readiness> =>
  serveOn(
    Layer.merge(routes(options), Layer.effect(LandingServer, boundAddress)),
    options.address ?? ":3001",
    options.shutdownTimeout
  )

/**
 * A Node request listener for HTTP/1.1 and HTTP/2 compatibility requests.
 *
 * @category models
 * @since 0.1.0
 */
export type RequestListener = (
  request: http.IncomingMessage | http2.Http2ServerRequest,
  response: http.ServerResponse | http2.Http2ServerResponse
) => void

/**
 * The site's routes as a Node request listener that lives as long as the
 * scope, for a server of someone else's: the gRPC port hands it the
 * requests that are not gRPC, as the original's main port serves its site.
 *
 * @category constructors
 * @since 0.1.0
 */
export const requestListener = (
  options: LandingOptions = {}
): Effect.Effect<RequestListener, never, ClusterState | Readiness | Scope.Scope> =>
  Effect.gen(function* () {
    const scope = yield* Effect.scope
    const app = yield* HttpRouter.toHttpEffect(routes(options))
    return yield* NodeHttpServer.makeHandler(app, { scope })
  })
