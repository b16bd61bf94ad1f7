/**
 * The live view's routes over real HTTP on loopback, on the test clock: the
 * landing page's stream sends each sample once, the inspect stream sends a
 * frame when the cluster changes (and a comment when it stays quiet) without
 * creating the cluster, bad IDs are refused, open streams are capped, and the
 * assets are served under a policy that allows only the service's own
 * scripts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as LandingServer from "../../../src/adapters/http/LandingServer.ts"
import type { LiveFrame } from "../../../src/adapters/http/live/LiveSample.ts"
import { maxOpenStreams } from "../../../src/adapters/http/live/liveRoutes.ts"
import { ClusterState } from "../../../src/core/server/ClusterState.ts"
import { endpoint, updateRequest } from "../../core/fixtures/discovery.ts"
import { landing, request } from "./fixtures.ts"

/** An event stream read one event (or comment) at a time, closed with the scope. */
const openEvents = (port: number, path: string) =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const controller = new AbortController()
      const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: controller.signal })
      const reader = response.body!.getReader()
      const decoder = new TextDecoder()
      let buffered = ""
      const next = async (): Promise<string> => {
        for (;;) {
          const end = buffered.indexOf("\n\n")
          if (end !== -1) {
            const event = buffered.slice(0, end)
            buffered = buffered.slice(end + 2)
            return event
          }
          const { value, done } = await reader.read()
          if (done) return "(closed)"
          buffered += decoder.decode(value, { stream: true })
        }
      }
      return { response, next: () => Effect.promise(next), close: () => controller.abort() }
    }),
    (events) => Effect.sync(() => events.close())
  )

const dataOf = <A>(event: string): A => {
  assert.match(event, /^data: /)
  return JSON.parse(event.slice("data: ".length)) as A
}

interface InspectFrame {
  readonly affiliates: ReadonlyArray<{
    readonly id: string
    readonly data: string
    readonly dataBytes: number
    readonly endpoints: ReadonlyArray<string>
    readonly expiresAt?: number
    readonly revision?: number
  }>
  readonly history?: ReadonlyArray<{ readonly cause: string; readonly facts: string }>
}

const withLanding = <A, E>(effect: Effect.Effect<A, E, LandingServer.LandingServer | ClusterState | Scope.Scope>) =>
  effect.pipe(Effect.scoped, Effect.provide(landing({ inspectRateLimit: "disabled" })))

describe("live view routes", () => {
  it.effect("the landing page's stream sends every sample once: all so far first, then each new one", () =>
    withLanding(
      Effect.gen(function* () {
        const { port } = yield* LandingServer.LandingServer
        yield* TestClock.adjust("3 seconds")
        const events = yield* openEvents(port, "/live/events")
        assert.strictEqual(events.response.headers.get("content-type"), "text/event-stream")
        assert.strictEqual(yield* events.next(), "retry: 2000")
        const first = dataOf<LiveFrame>(yield* events.next())
        assert.isAtLeast(first.samples.length, 3)
        assert.strictEqual(first.self.version, "embedded")
        const state = yield* ClusterState
        yield* state.update(updateRequest({ clusterId: "c", affiliateId: "a" }))
        yield* TestClock.adjust("1 second")
        const second = dataOf<LiveFrame>(yield* events.next())
        assert.lengthOf(second.samples, 1)
        assert.isAbove(second.samples[0]!.at, first.samples.at(-1)!.at)
        assert.strictEqual(second.samples[0]!.affiliates, 1)
      })
    )
  )

  it.effect(
    "the inspect stream sends a frame when the cluster changes, a comment when quiet, and creates nothing",
    () =>
      withLanding(
        Effect.gen(function* () {
          const { port } = yield* LandingServer.LandingServer
          const state = yield* ClusterState
          const events = yield* openEvents(port, "/inspect/events?clusterID=watched")
          assert.strictEqual(yield* events.next(), "retry: 2000")
          assert.deepStrictEqual(dataOf<InspectFrame>(yield* events.next()).affiliates, [])
          assert.strictEqual((yield* state.stats).clusters, 0)
          yield* state.update(
            updateRequest({
              clusterId: "watched",
              affiliateId: "node-1",
              data: Uint8Array.of(0xca, 0xfe),
              endpoints: [endpoint(1)]
            })
          )
          yield* TestClock.adjust("1 second")
          const changed = dataOf<InspectFrame>(yield* events.next())
          assert.deepStrictEqual(
            changed.affiliates.map(({ id, data, dataBytes, endpoints }) => ({ id, data, dataBytes, endpoints })),
            [{ id: "node-1", data: "cafe", dataBytes: 2, endpoints: [`01${"00".repeat(14)}ee`] }]
          )
          yield* TestClock.adjust("15 seconds")
          assert.strictEqual(yield* events.next(), ": still here")
          yield* state.delete({ clusterId: "watched", affiliateId: "node-1" })
          yield* TestClock.adjust("1 second")
          assert.deepStrictEqual(dataOf<InspectFrame>(yield* events.next()).affiliates, [])
        })
      )
  )

  it.effect("refuses a missing or invalid cluster ID with 400, creating nothing", () =>
    withLanding(
      Effect.gen(function* () {
        const { port } = yield* LandingServer.LandingServer
        assert.strictEqual((yield* request(port, "/inspect/events")).status, 400)
        const invalid = yield* request(port, `/inspect/events?clusterID=${"x".repeat(300)}`)
        assert.strictEqual(invalid.status, 400)
        assert.strictEqual((yield* request(port, "/inspect/events?clusterID=%zz")).status, 400)
        assert.strictEqual((yield* (yield* ClusterState).stats).clusters, 0)
      })
    )
  )

  it.effect(`opens at most ${maxOpenStreams} streams at once, then answers 503 until one closes`, () =>
    withLanding(
      Effect.gen(function* () {
        const { port } = yield* LandingServer.LandingServer
        const streams = yield* Scope.make()
        for (let opened = 0; opened < maxOpenStreams; opened++) {
          const events = yield* openEvents(
            port,
            opened % 2 === 0 ? "/live/events" : "/inspect/events?clusterID=c"
          ).pipe(Scope.provide(streams))
          assert.strictEqual(events.response.status, 200)
        }
        const refused = yield* request(port, "/live/events")
        assert.strictEqual(refused.status, 503)
        assert.strictEqual(refused.headers.get("retry-after"), "10")
        yield* Scope.close(streams, Exit.void)
        // the server sees the closed connections on its next write
        yield* TestClock.adjust("1 second")
        let status = 503
        for (let attempt = 0; attempt < 50 && status === 503; attempt++) {
          const events = yield* openEvents(port, "/live/events")
          status = events.response.status
          events.close()
          if (status === 503) yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        }
        assert.strictEqual(status, 200)
      })
    )
  )

  it.effect("a HEAD request or a client gone before its stream starts holds no place", () =>
    withLanding(
      Effect.gen(function* () {
        const { port } = yield* LandingServer.LandingServer
        for (let sent = 0; sent < maxOpenStreams + 4; sent++) {
          const head = yield* request(port, "/live/events", { method: "HEAD" })
          assert.notStrictEqual(head.status, 503)
        }
        const events = yield* openEvents(port, "/live/events")
        assert.strictEqual(events.response.status, 200)
      })
    )
  )

  it.effect("each stream takes a token of its client's /inspect rate limit", () =>
    Effect.gen(function* () {
      const { port } = yield* LandingServer.LandingServer
      const statuses: Array<number> = []
      for (let opened = 0; opened < 3; opened++) {
        const events = yield* openEvents(port, opened === 1 ? "/inspect/events?clusterID=c" : "/live/events")
        statuses.push(events.response.status)
      }
      assert.deepStrictEqual(statuses, [200, 200, 429])
    }).pipe(Effect.scoped, Effect.provide(landing({ inspectRateLimit: { perSecond: 1, burst: 2 } })))
  )

  it.effect("serves the scripts and the chart library; pages allow only the service's own scripts", () =>
    withLanding(
      Effect.gen(function* () {
        const { port } = yield* LandingServer.LandingServer
        const live = yield* request(port, "/assets/live.js")
        assert.strictEqual(live.headers.get("content-type"), "text/javascript; charset=utf-8")
        assert.include(live.body, 'new EventSource("/live/events")')
        assert.include((yield* request(port, "/assets/inspect.js")).body, "/inspect/events?clusterID=")
        const chart = (yield* request(port, "/assets/chart.js")).body
        assert.include(chart, "uPlot")
        assert.include(chart, "Copyright (c) 2022 Leon Sorokin", "the library's MIT licence goes with it")
        assert.strictEqual(
          (yield* request(port, "/assets/chart.css")).headers.get("content-type"),
          "text/css; charset=utf-8"
        )
        const page = yield* request(port, "/")
        const policy = page.headers.get("content-security-policy") ?? ""
        assert.include(policy, "script-src 'self'")
        assert.include(policy, "connect-src 'self'")
        assert.notInclude(policy, "unsafe-eval")
        assert.notInclude(policy.split(";").find((part) => part.includes("script-src")) ?? "", "unsafe-inline")
        assert.include(page.body, `<script src="/assets/live.js" defer></script>`)
      })
    )
  )
})
