import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import * as LandingServer from "../../../src/adapters/http/LandingServer.ts"
import * as Readiness from "../../../src/adapters/http/Readiness.ts"
import * as TestDiscovery from "../../../src/adapters/testing/TestDiscovery.ts"
import { ClusterState } from "../../../src/core/server/ClusterState.ts"
import { endpoint, settle, updateRequest, utf8 } from "../../core/fixtures/discovery.ts"
import { landing, request } from "./fixtures.ts"

const port = Effect.map(LandingServer.LandingServer, (server) => server.port)

describe("LandingServer", () => {
  describe("landing page", () => {
    it.effect("serves the static page that explains the service and links to /inspect", () =>
      Effect.gen(function* () {
        const reply = yield* request(yield* port, "/")
        assert.strictEqual(reply.status, 200)
        assert.strictEqual(reply.headers.get("content-type"), "text/html; charset=utf-8")
        assert.include(reply.headers.get("content-security-policy"), "default-src 'none'")
        assert.strictEqual(reply.headers.get("x-content-type-options"), "nosniff")
        for (const text of [
          "Talos-compatible cluster discovery service",
          "AES-GCM",
          "AES-ECB",
          "16-byte block",
          "never holds the key",
          "in memory",
          "snapshots",
          'href="/inspect"'
        ]) {
          assert.include(reply.body, text)
        }
      }).pipe(Effect.provide(landing()))
    )

    it.effect("redirects /index.html to / and answers 404 elsewhere", () =>
      Effect.gen(function* () {
        const p = yield* port
        const redirect = yield* request(p, "/index.html")
        assert.strictEqual(redirect.status, 301)
        assert.strictEqual(redirect.headers.get("location"), "/")
        for (const path of ["/nope", "/index.htm", "/inspect/x", "/static/app.js"]) {
          const missing = yield* request(p, path)
          assert.strictEqual(missing.status, 404, path)
          assert.strictEqual(missing.body, "404 page not found\n")
        }
      }).pipe(Effect.provide(landing()))
    )
  })

  describe("/stats", () => {
    it.effect("T37: with a 1 h TTL the count is cached until it expires", () =>
      Effect.gen(function* () {
        const state = yield* ClusterState
        const p = yield* port
        yield* state.update(updateRequest({ clusterId: "c1", affiliateId: "a1" }))
        const first = yield* request(p, "/stats")
        assert.strictEqual(first.status, 200)
        assert.strictEqual(first.body, '{"affiliates":1}')
        assert.strictEqual(first.headers.get("content-type"), "application/json")
        assert.strictEqual(first.headers.get("access-control-allow-origin"), "*")
        yield* state.update(updateRequest({ clusterId: "c1", affiliateId: "a2" }))
        assert.strictEqual((yield* request(p, "/stats")).body, '{"affiliates":1}')
        yield* TestClock.adjust("59 minutes")
        assert.strictEqual((yield* request(p, "/stats")).body, '{"affiliates":1}')
        yield* TestClock.adjust("1 minute")
        // Both have expired, but GC has not run, so both still count.
        assert.strictEqual((yield* request(p, "/stats")).body, '{"affiliates":2}')
      }).pipe(Effect.provide(landing({ statsTtl: "1 hour" })))
    )

    it.effect("T38: with TTL 0 the count is recomputed on every request", () =>
      Effect.gen(function* () {
        const state = yield* ClusterState
        const p = yield* port
        yield* state.update(updateRequest({ affiliateId: "a1" }))
        yield* state.update(updateRequest({ affiliateId: "a2" }))
        assert.strictEqual((yield* request(p, "/stats")).body, '{"affiliates":2}')
        yield* state.update(updateRequest({ affiliateId: "a3" }))
        assert.strictEqual((yield* request(p, "/stats")).body, '{"affiliates":3}')
      }).pipe(Effect.provide(landing({ statsTtl: 0 })))
    )

    it.effect("defaults to a 1 hour TTL", () =>
      Effect.sync(() => assert.isTrue(Duration.equals(LandingServer.defaultStatsTtl, Duration.hours(1))))
    )

    it.effect("collapses concurrent recomputes into one", () =>
      Effect.gen(function* () {
        const gate = yield* Deferred.make<void>()
        let calls = 0
        const stats = Effect.andThen(
          Effect.sync(() => calls++),
          Effect.as(Deferred.await(gate), { clusters: 1, affiliates: 7, endpoints: 0, watches: 0 })
        )
        const handler = yield* LandingServer.makeStatsHandler(0).pipe(Effect.provide(stubState({ stats })))
        const fibers = yield* Effect.forEach(Array.from({ length: 10 }), () => Effect.forkChild(handler))
        yield* settle
        yield* Deferred.succeed(gate, undefined)
        const responses = yield* Fiber.joinAll(fibers)
        assert.strictEqual(calls, 1)
        assert.deepStrictEqual(
          responses.map((r) => r.status),
          Array.from({ length: 10 }, () => 200)
        )
      })
    )

    it.effect("answers 500 with the JSON error and the same headers when counting fails", () =>
      Effect.gen(function* () {
        const reply = yield* request(yield* port, "/stats")
        assert.strictEqual(reply.status, 500)
        assert.strictEqual(reply.body, '{"error": "Oops, try again"}')
        assert.strictEqual(reply.headers.get("content-type"), "application/json")
        assert.strictEqual(reply.headers.get("access-control-allow-origin"), "*")
      }).pipe(
        Effect.provide(
          LandingServer.layer({ address: "127.0.0.1:0" }).pipe(
            Layer.provide(stubState({ stats: Effect.die(new Error("boom")) })),
            Layer.provide(Readiness.Readiness.layer)
          )
        )
      )
    )
  })

  describe("/inspect", () => {
    it.effect("shows only the form for an empty or missing cluster ID", () =>
      Effect.gen(function* () {
        const p = yield* port
        for (const path of ["/inspect", "/inspect?clusterID=", "/inspect?other=1"]) {
          const reply = yield* request(p, path)
          assert.strictEqual(reply.status, 200, path)
          assert.strictEqual(reply.headers.get("content-type"), "text/html; charset=utf-8")
          assert.include(reply.body, '<form method="get" action="/inspect">')
          assert.include(reply.body, 'name="clusterID"')
          assert.notInclude(reply.body, "<h2>Cluster")
        }
      }).pipe(Effect.provide(landing()))
    )

    it.effect("lists each affiliate with its data and endpoints as lowercase hex", () =>
      Effect.gen(function* () {
        const state = yield* ClusterState
        yield* state.update(
          updateRequest({
            clusterId: "fake1",
            affiliateId: "af1",
            data: new Uint8Array([0xab, 0xcd, 0x01]),
            endpoints: [endpoint(0x1f), endpoint(0x2e)]
          })
        )
        yield* state.update(updateRequest({ clusterId: "fake1", affiliateId: "af2" }))
        const reply = yield* request(yield* port, "/inspect?clusterID=fake1")
        assert.strictEqual(reply.status, 200)
        assert.include(reply.body, '<code class="cluster-id">fake1</code>')
        assert.include(reply.body, '<code class="affiliate-id">af1</code>')
        assert.include(reply.body, '<code class="affiliate-id">af2</code>')
        assert.include(reply.body, '<dd class="hex data">abcd01</dd>')
        assert.include(reply.body, `<li class="hex endpoint">1f${"00".repeat(14)}ee</li>`)
        assert.include(reply.body, `<li class="hex endpoint">${Buffer.from(endpoint(0x2e)).toString("hex")}</li>`)
        assert.include(reply.body, 'value="fake1"')
      }).pipe(Effect.provide(landing()))
    )

    it.effect("says there is no affiliate data for an unknown cluster, and creates no cluster", () =>
      Effect.gen(function* () {
        const state = yield* ClusterState
        yield* state.update(updateRequest({ clusterId: "existing" }))
        const before = yield* state.stats
        const reply = yield* request(yield* port, "/inspect?clusterID=nobody-here")
        assert.strictEqual(reply.status, 200)
        assert.include(reply.body, "No affiliate data for this cluster.")
        assert.deepStrictEqual(yield* state.stats, before)
        assert.strictEqual(before.clusters, 1)
      }).pipe(Effect.provide(landing()))
    )

    it.effect("HTML-escapes IDs in the listing and in the form", () =>
      Effect.gen(function* () {
        const state = yield* ClusterState
        const clusterId = `c"><script>alert(1)</script>`
        yield* state.update(updateRequest({ clusterId, affiliateId: "<script>alert('x')</script>", data: utf8("d") }))
        const reply = yield* request(yield* port, `/inspect?clusterID=${encodeURIComponent(clusterId)}`)
        assert.strictEqual(reply.status, 200)
        assert.notInclude(reply.body, "<script>")
        assert.include(reply.body, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;")
        assert.include(reply.body, 'value="c&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"')
      }).pipe(Effect.provide(landing()))
    )

    it.effect("answers 400 with the validation message for an invalid cluster ID, creating nothing", () =>
      Effect.gen(function* () {
        const state = yield* ClusterState
        const p = yield* port
        const long = yield* request(p, `/inspect?clusterID=${"x".repeat(257)}`)
        assert.strictEqual(long.status, 400)
        assert.include(long.body, '<p class="error">cluster ID is too long</p>')
        const notUtf16 = yield* request(p, "/inspect?clusterID=%ED%A0%80")
        assert.strictEqual(notUtf16.status, 400)
        assert.strictEqual((yield* state.stats).clusters, 0)
      }).pipe(Effect.provide(landing()))
    )

    it.effect("answers 400 for a malformed query (the original answers 500)", () =>
      Effect.gen(function* () {
        const p = yield* port
        const badEscape = yield* request(p, "/inspect?clusterID=%zz")
        assert.strictEqual(badEscape.status, 400)
        assert.include(badEscape.body, "invalid URL escape &#34;%zz&#34;")
        const semicolon = yield* request(p, "/inspect?clusterID=a;b=c")
        assert.strictEqual(semicolon.status, 400)
        assert.include(semicolon.body, "invalid semicolon separator in query")
      }).pipe(Effect.provide(landing()))
    )

    it.effect("T62: answers 200 for clusterID=fake1", () =>
      Effect.gen(function* () {
        assert.strictEqual((yield* request(yield* port, "/inspect?clusterID=fake1")).status, 200)
      }).pipe(Effect.provide(landing()))
    )

    it.effect("rate limits each client address with a token bucket on the clock", () =>
      Effect.gen(function* () {
        const p = yield* port
        const statuses = (n: number, headers: Record<string, string> = {}) =>
          Effect.forEach(Array.from({ length: n }), () =>
            Effect.map(request(p, "/inspect?clusterID=c1", { headers }), (r) => r.status)
          )
        assert.deepStrictEqual(yield* statuses(4), [200, 200, 200, 429])
        const limited = yield* request(p, "/inspect")
        assert.strictEqual(limited.status, 429)
        assert.strictEqual(limited.headers.get("retry-after"), "1")
        // Another client (trusted X-Real-IP) has its own bucket.
        assert.deepStrictEqual(yield* statuses(4, { "x-real-ip": "1.2.3.4" }), [200, 200, 200, 429])
        // One token per second comes back.
        yield* TestClock.adjust("1 second")
        assert.deepStrictEqual(yield* statuses(2), [200, 429])
        yield* TestClock.adjust("3 seconds")
        assert.deepStrictEqual(yield* statuses(4), [200, 200, 200, 429])
        // Other routes are not limited.
        assert.strictEqual((yield* request(p, "/stats")).status, 200)
      }).pipe(Effect.provide(landing({ inspectRateLimit: { perSecond: 1, burst: 3 }, trustXRealIp: true })))
    )

    it.effect("ignores X-Real-IP unless trusted", () =>
      Effect.gen(function* () {
        const p = yield* port
        assert.strictEqual((yield* request(p, "/inspect", { headers: { "x-real-ip": "1.1.1.1" } })).status, 200)
        assert.strictEqual((yield* request(p, "/inspect", { headers: { "x-real-ip": "2.2.2.2" } })).status, 429)
      }).pipe(Effect.provide(landing({ inspectRateLimit: { perSecond: 1, burst: 1 } })))
    )

    it.effect(
      "keys the limit by the rules of §2.10: an invalid trusted header falls through to the socket address",
      () =>
        Effect.gen(function* () {
          const p = yield* port
          // Not an IP, so the caller counts as its loopback address: the same bucket as a plain request.
          assert.strictEqual((yield* request(p, "/inspect", { headers: { "x-real-ip": "not-an-ip" } })).status, 200)
          assert.strictEqual((yield* request(p, "/inspect")).status, 429)
          // An IPv4-mapped value counts as its IPv4 address.
          assert.strictEqual(
            (yield* request(p, "/inspect", { headers: { "x-real-ip": "::ffff:9.9.9.9" } })).status,
            200
          )
          assert.strictEqual((yield* request(p, "/inspect", { headers: { "x-real-ip": "9.9.9.9" } })).status, 429)
        }).pipe(Effect.provide(landing({ inspectRateLimit: { perSecond: 1, burst: 1 }, trustXRealIp: true })))
    )

    it.effect("can run without a rate limit", () =>
      Effect.gen(function* () {
        const p = yield* port
        const replies = yield* Effect.forEach(Array.from({ length: 30 }), () => request(p, "/inspect"))
        assert.isTrue(replies.every((r) => r.status === 200))
      }).pipe(Effect.provide(landing({ inspectRateLimit: "disabled" })))
    )
  })

  describe("probes", () => {
    it.effect("/healthz is always 200; /readyz follows the readiness signal", () =>
      Effect.gen(function* () {
        const p = yield* port
        const readiness = yield* Readiness.Readiness
        assert.strictEqual((yield* request(p, "/healthz")).status, 200)
        const before = yield* request(p, "/readyz")
        assert.strictEqual(before.status, 503)
        assert.strictEqual(before.body, "not ready\n")
        yield* readiness.markReady
        const ready = yield* request(p, "/readyz")
        assert.strictEqual(ready.status, 200)
        assert.strictEqual(ready.body, "ready\n")
        yield* readiness.markNotReady
        assert.strictEqual((yield* request(p, "/readyz")).status, 503)
        assert.strictEqual((yield* request(p, "/healthz")).status, 200)
      }).pipe(Effect.provide(landing()))
    )

    it.effect("readyUntilClosed is ready inside its scope and not ready after", () =>
      Effect.gen(function* () {
        const p = yield* port
        yield* Effect.scoped(
          Effect.gen(function* () {
            yield* Readiness.readyUntilClosed
            assert.strictEqual((yield* request(p, "/readyz")).status, 200)
          })
        )
        assert.strictEqual((yield* request(p, "/readyz")).status, 503)
      }).pipe(Effect.provide(landing()))
    )
  })

  describe("layer", () => {
    it.effect("listens on every interface for a Go-style address with an empty host", () =>
      Effect.gen(function* () {
        const { port } = yield* LandingServer.LandingServer
        assert.strictEqual((yield* request(port, "/healthz")).status, 200)
      }).pipe(Effect.provide(landing({ address: ":0" })))
    )

    it.effect("fails with a ServeError for an invalid address or a busy port", () =>
      Effect.gen(function* () {
        const invalid = yield* Effect.flip(Layer.build(LandingServer.layer({ address: "nonsense" })))
        assert.strictEqual(invalid._tag, "ServeError")
        const p = yield* port
        const busy = yield* Effect.flip(Layer.build(LandingServer.layer({ address: `127.0.0.1:${p}` })))
        assert.strictEqual(busy._tag, "ServeError")
      }).pipe(Effect.provide(landing()))
    )
  })
})

/** The test core's ClusterState with some operations replaced. */
const stubState = (overrides: Partial<typeof ClusterState.Service>) =>
  Layer.effect(
    ClusterState,
    Effect.map(ClusterState, (real) => ClusterState.of({ ...real, ...overrides }))
  ).pipe(Layer.provide(TestDiscovery.layer()))
