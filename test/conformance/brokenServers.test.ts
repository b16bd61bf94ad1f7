/**
 * The conformance kit catches servers broken on purpose: our gRPC server
 * over a `ClusterApi` that reorders watch deltas, drops deletions, or takes
 * one endpoint too few. Each is checked through the kit as a user would
 * (`remoteTarget` over plaintext gRPC, the original protocol), and the case
 * that should catch it fails with what was expected and what came, while an
 * unbroken server passes the same cases.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Layer, Scope, Stream } from "effect"
import { GrpcServer } from "../../src/adapters/grpc/index.ts"
import { TestDiscovery } from "../../src/adapters/testing/index.ts"
import { contractCases } from "../../src/conformance/cases.ts"
import { remoteTarget } from "../../src/conformance/remoteTarget.ts"
import { checkModelProperty, replayScript } from "../../src/conformance/properties.ts"
import { clientLayer } from "../../src/conformance/remoteTarget.ts"
import type { CaseResult } from "../../src/conformance/runner.ts"
import { runCases } from "../../src/conformance/runner.ts"
import type { WatchEvent } from "../../src/ports/ClusterApi.ts"
import { ClusterApi } from "../../src/ports/ClusterApi.ts"
import { ResourceExhausted } from "../../src/ports/DiscoveryError.ts"
import { LimitMessages } from "../../src/core/server/limits.ts"

type Breakage = (api: ClusterApi["Service"]) => ClusterApi["Service"]

/** Watch deltas pass through `rewrite` (the push form is hidden, so the server takes the stream). */
const rewriteWatch =
  (rewrite: (events: Stream.Stream<WatchEvent, unknown>) => Stream.Stream<WatchEvent, unknown>): Breakage =>
  (api) => ({
    ...api,
    subscribe: undefined,
    watch: (request) => rewrite(api.watch(request)) as ReturnType<typeof api.watch>
  })

const breakages: Record<string, Breakage> = {
  "deltas reordered": rewriteWatch((events) =>
    // the snapshot stays first; after it, each pair of deltas comes swapped
    events.pipe(
      Stream.rechunk(1),
      Stream.mapAccum(
        () => [] as Array<WatchEvent>,
        (held, event) => {
          if (event._tag === "Snapshot") return [[], [event]]
          if (held.length === 0) return [[event], []]
          return [[], [event, held[0]!]]
        }
      )
    )
  ),
  // told to stop, each watch lingers 5 s before it ends: the stop waits for it
  "watches held open on shutdown": rewriteWatch((events) =>
    events.pipe(Stream.ensuring(Effect.uninterruptible(Effect.promise(() => new Promise((r) => setTimeout(r, 5000))))))
  ),
  "a deletion dropped": rewriteWatch((events) => Stream.filter(events, (event) => event._tag !== "Deleted")),
  "63 endpoints where the protocol says 64": (api) => ({
    ...api,
    affiliateUpdate: (request) =>
      Effect.gen(function* () {
        const listed = yield* api.list({ clusterId: request.clusterId })
        const known = listed.find((affiliate) => affiliate.id === request.affiliateId)?.endpoints ?? []
        const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString("hex")
        const all = new Set([...known.map(hex), ...request.endpoints.map(hex)])
        if (all.size > 63) return yield* new ResourceExhausted({ message: LimitMessages.tooManyEndpoints })
        return yield* api.affiliateUpdate(request)
      })
  })
}

/** Our gRPC server on loopback over the in-process core, broken by `breakage` (or not); gives its address. */
const serverWith = (breakage: Breakage | undefined) =>
  Effect.map(stoppableServerWith(breakage), ({ endpoint }) => endpoint)

/** The same, with a way to stop it gracefully (closing its scope, as SIGTERM does). */
const stoppableServerWith = (breakage: Breakage | undefined) =>
  Effect.gen(function* () {
    const core = yield* Layer.build(TestDiscovery.layer())
    const api = Context.get(core, ClusterApi)
    const serverScope = yield* Scope.fork(yield* Effect.scope)
    const { port } = yield* GrpcServer.make({
      address: "127.0.0.1:0",
      shutdownTimeout: "10 seconds",
      rateLimit: false
    }).pipe(
      Effect.provide(Context.add(core, ClusterApi, breakage === undefined ? api : breakage(api))),
      Scope.provide(serverScope)
    )
    return { endpoint: `127.0.0.1:${port}`, stop: Scope.close(serverScope, Exit.void) }
  })

/** The kit's results for the cases whose group or name contains `only`, against the server at `endpoint`. */
const check = (endpoint: string, only: string) =>
  Effect.flatMap(remoteTarget({ endpoint, extensions: false, caseTimeoutMillis: 20_000 }), ({ target }) =>
    runCases(contractCases(target), { only })
  )

const byName = (results: ReadonlyArray<CaseResult>, fragment: string): CaseResult =>
  results.find((result) => result.name.includes(fragment))!

describe("the conformance kit against servers broken on purpose", () => {
  it.live(
    "passes an unbroken server on the cases that catch the breakages",
    () =>
      Effect.gen(function* () {
        const endpoint = yield* serverWith(undefined)
        for (const only of ["T46", "T21", "T51"]) {
          const results = yield* check(endpoint, only)
          assert.isAbove(results.length, 0)
          assert.deepStrictEqual(
            results.map((result) => [result.name, result.status]),
            results.map((result) => [result.name, "passed"])
          )
        }
      }).pipe(Effect.scoped),
    30_000
  )

  it.live(
    "catches deltas that come out of order, with the message expected and the one that came",
    () =>
      Effect.gen(function* () {
        const endpoint = yield* serverWith(breakages["deltas reordered"])
        const result = byName(yield* check(endpoint, "T21"), "T21")
        assert.strictEqual(result.status, "failed")
        assert.deepStrictEqual(result.expected, {
          _tag: "Updated",
          affiliate: { id: "af1", data: Buffer.from("data1").toString("hex"), endpoints: [] }
        })
        assert.deepStrictEqual(result.actual, {
          _tag: "Updated",
          affiliate: { id: "af2", data: Buffer.from("data2").toString("hex"), endpoints: [] }
        })
      }).pipe(Effect.scoped),
    30_000
  )

  it.live(
    "catches a deletion the watch never delivers",
    () =>
      Effect.gen(function* () {
        const endpoint = yield* serverWith(breakages["a deletion dropped"])
        const result = byName(yield* check(endpoint, "T46"), "T46")
        assert.strictEqual(result.status, "failed")
        assert.include(`${result.reason} ${JSON.stringify(result.expected)}`, "Deleted")
      }).pipe(Effect.scoped),
    30_000
  )

  it.live(
    "catches a limit off by one",
    () =>
      Effect.gen(function* () {
        const endpoint = yield* serverWith(breakages["63 endpoints where the protocol says 64"])
        const result = byName(yield* check(endpoint, "T51"), "T51")
        assert.strictEqual(result.status, "failed")
        assert.include(result.reason ?? "", "ResourceExhausted")
      }).pipe(Effect.scoped),
    30_000
  )

  it.live(
    "holds the model property on an unbroken server",
    () =>
      Effect.gen(function* () {
        const endpoint = yield* serverWith(undefined)
        const result = yield* checkModelProperty(clientLayer({ endpoint }), { runs: 15, seed: 42 })
        assert.strictEqual(result.status, "passed", result.reason)
        assert.strictEqual(result.runs, 15)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "catches a dropped deletion with the model property, shrunk to a short script that replays",
    () =>
      Effect.gen(function* () {
        const broken = yield* serverWith(breakages["a deletion dropped"])
        const result = yield* checkModelProperty(clientLayer({ endpoint: broken }), {
          runs: 30,
          seed: 7,
          settleMillis: 300
        })
        assert.strictEqual(result.status, "failed")
        const script = result.counterexample!
        assert.include(result.reason ?? "", "a watch of cluster")
        // a minimal story: a watch, an affiliate, its deletion (and nothing the failure does not need)
        assert.isAtMost(script.steps.length, 4, JSON.stringify(script.steps))
        assert.include(
          script.steps.map((step) => step.op),
          "delete"
        )
        const saved = JSON.parse(JSON.stringify(script))
        assert.strictEqual((yield* replayScript(clientLayer({ endpoint: broken }), saved)).status, "failed")
        const sound = yield* serverWith(undefined)
        assert.strictEqual((yield* replayScript(clientLayer({ endpoint: sound }), saved)).status, "passed")
      }).pipe(Effect.scoped),
    120_000
  )

  it.live(
    "catches watches held open when the server stops, and passes a server that ends them",
    () =>
      Effect.gen(function* () {
        const shutdownOf = (breakage: Breakage | undefined) =>
          Effect.gen(function* () {
            const server = yield* stoppableServerWith(breakage)
            const { target } = yield* remoteTarget({ endpoint: server.endpoint, extensions: false })
            const cases = contractCases({ ...target, stop: { run: server.stop, withinMillis: 2000 } })
            return byName(yield* runCases(cases, { only: "shutdown" }), "server stops")
          })
        assert.strictEqual((yield* shutdownOf(undefined)).status, "passed")
        const held = yield* shutdownOf(breakages["watches held open on shutdown"])
        assert.strictEqual(held.status, "failed")
        assert.include(held.reason ?? "", "still open 2000 ms after the server was told to stop")
      }).pipe(Effect.scoped),
    60_000
  )
})
