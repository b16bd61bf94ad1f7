import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Latch, Layer, Scope } from "effect"
import * as TestDiscovery from "../../src/adapters/testing/TestDiscovery.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import type { ServerOptions } from "../../src/core/server/DiscoveryServer.ts"
import type { AffiliateUpdateRequest } from "../../src/ports/ClusterApi.ts"
import {
  gcCounts,
  blob,
  endpoint,
  type PlainEvent,
  plainAffiliate,
  plainEvent,
  plainList,
  type Recorder,
  record,
  type State,
  settle,
  updateRequest,
  utf8
} from "./fixtures/discovery.ts"

/** Runs a test body against a fresh core on the TestClock, GC only on demand. */
const withState = <A, E>(
  body: (state: State) => Effect.Effect<A, E, ClusterState>,
  options: ServerOptions = {}
): Effect.Effect<A, E> => Effect.flatMap(ClusterState, body).pipe(Effect.provide(TestDiscovery.layer(options)))

const af = plainAffiliate

const events = (recorder: Recorder): Array<PlainEvent> => recorder.events.map(plainEvent)

/** The typed error a recorder's stream ended with. */
const failureOf = (recorder: Recorder): { readonly _tag: string; readonly message: string } | undefined => {
  const exit = recorder.exit
  if (exit === undefined || Exit.isSuccess(exit)) return undefined
  const error = Exit.findErrorOption(exit)
  return error._tag === "Some" ? { _tag: error.value._tag, message: error.value.message } : undefined
}

const upd = (fields: Partial<AffiliateUpdateRequest>) => updateRequest({ clusterId: "c1", ...fields })

describe("ClusterState", () => {
  describe("watch", () => {
    it.effect("starts with an empty snapshot for a cluster nobody wrote to", () =>
      withState((state) =>
        Effect.gen(function* () {
          const watcher = yield* record(state, "c1")
          assert.deepStrictEqual(events(watcher), [{ _tag: "Snapshot", revision: 0, affiliates: [] }])
        })
      )
    )

    it.effect("sends the snapshot, then the full state of each change and the ID of each deletion", () =>
      withState((state) =>
        Effect.gen(function* () {
          yield* state.update(upd({ affiliateId: "af1", data: utf8("data1") }))
          const watcher = yield* record(state, "c1")
          yield* state.update(upd({ affiliateId: "af1", data: utf8("data1.1"), endpoints: [endpoint(1)] }))
          yield* state.update(upd({ affiliateId: "af2", data: utf8("data2") }))
          yield* state.delete({ clusterId: "c1", affiliateId: "af1" })
          yield* settle
          assert.deepStrictEqual(events(watcher), [
            { _tag: "Snapshot", revision: 1, affiliates: [af("af1", "data1")] },
            { _tag: "Updated", revision: 2, affiliate: af("af1", "data1.1", [endpoint(1)]) },
            { _tag: "Updated", revision: 3, affiliate: af("af2", "data2") },
            { _tag: "Deleted", revision: 4, affiliateId: "af1" }
          ])
          assert.deepStrictEqual(plainList(yield* state.list({ clusterId: "c1" })), [af("af2", "data2")])
        })
      )
    )

    it.effect("numbers deltas from the snapshot's revision without gaps", () =>
      withState((state) =>
        Effect.gen(function* () {
          for (let i = 0; i < 5; i++) yield* state.update(upd({ affiliateId: `af${i}` }))
          const watcher = yield* record(state, "c1")
          for (let i = 0; i < 5; i++) {
            yield* state.update(upd({ affiliateId: `af${i}`, data: utf8(`v${i}`) }))
            yield* state.update(upd({ affiliateId: `af${i}`, data: utf8(`v${i}`) })) // no-op, no revision
          }
          yield* state.delete({ clusterId: "c1", affiliateId: "af0" })
          yield* settle
          assert.deepStrictEqual(
            watcher.events.map((e) => e.revision),
            [5, 6, 7, 8, 9, 10, 11]
          )
          assert.strictEqual(watcher.events[0]!._tag, "Snapshot")
        })
      )
    )

    it.effect("does not mix clusters", () =>
      withState((state) =>
        Effect.gen(function* () {
          const one = yield* record(state, "c1")
          const two = yield* record(state, "c2")
          yield* state.update(upd({ clusterId: "c2", affiliateId: "x", data: utf8("x") }))
          yield* settle
          assert.strictEqual(one.events.length, 1)
          assert.deepStrictEqual(events(two).slice(1), [{ _tag: "Updated", revision: 1, affiliate: af("x", "x") }])
        })
      )
    )

    it.effect("delivers every change in order to 5 live watchers and cuts off 2 that never read", () =>
      withState((state) =>
        Effect.gen(function* () {
          const live: Array<Recorder> = []
          for (let i = 0; i < 5; i++) live.push(yield* record(state, "c1"))
          const stuck = yield* Latch.make(false)
          const dead = [yield* record(state, "c1", stuck.await), yield* record(state, "c1", stuck.await)]

          yield* state.update(upd({ affiliateId: "af1", data: utf8("data1") }))
          yield* settle
          yield* state.update(upd({ affiliateId: "af2", data: utf8("data2") }))
          yield* settle
          yield* state.update(upd({ affiliateId: "af2", data: utf8("data2_1") }))
          yield* settle
          yield* state.delete({ clusterId: "c1", affiliateId: "af2" })
          yield* settle
          // 4 events so far; 29 more make 33, one more than a watcher's buffer holds
          for (let i = 0; i < 29; i++) {
            yield* state.update(upd({ affiliateId: "af1", data: utf8(`n${i}`) }))
            yield* settle
          }
          const expected: Array<PlainEvent> = [
            { _tag: "Snapshot", revision: 0, affiliates: [] },
            { _tag: "Updated", revision: 1, affiliate: af("af1", "data1") },
            { _tag: "Updated", revision: 2, affiliate: af("af2", "data2") },
            { _tag: "Updated", revision: 3, affiliate: af("af2", "data2_1") },
            { _tag: "Deleted", revision: 4, affiliateId: "af2" },
            ...Array.from(
              { length: 29 },
              (_, i): PlainEvent => ({
                _tag: "Updated",
                revision: 5 + i,
                affiliate: af("af1", `n${i}`)
              })
            )
          ]
          for (const watcher of live) {
            assert.deepStrictEqual(events(watcher), expected)
            assert.isUndefined(watcher.exit)
          }
          // the cut-off watchers no longer take a watch slot, even before they notice
          assert.strictEqual((yield* state.stats).watches, 5)

          // the stuck ones wake up: they get the snapshot and the 32 buffered events, then the loss
          yield* stuck.open
          yield* settle
          for (const watcher of dead) {
            assert.deepStrictEqual(events(watcher), expected.slice(0, 33))
            assert.deepStrictEqual(failureOf(watcher), {
              _tag: "SubscriptionLost",
              message: "subscription canceled: lost update"
            })
          }
          assert.strictEqual((yield* state.stats).watches, 5)

          yield* state.update(upd({ affiliateId: "af1", data: utf8("after") }))
          yield* settle
          for (const watcher of live) assert.strictEqual(watcher.events.length, 35)
        })
      )
    )

    it.effect("fails with InvalidArgument for an invalid cluster ID and creates nothing", () =>
      withState((state) =>
        Effect.gen(function* () {
          for (const clusterId of ["", "c".repeat(257), "\ud800"]) {
            const watcher = yield* record(state, clusterId)
            assert.strictEqual(failureOf(watcher)?._tag, "InvalidArgument")
            assert.deepStrictEqual(watcher.events, [])
          }
          assert.deepStrictEqual(yield* state.stats, { clusters: 0, affiliates: 0, endpoints: 0, watches: 0 })
        })
      )
    )

    it.effect("ends open watches with Unavailable when the layer's scope closes", () =>
      Effect.gen(function* () {
        const scope = yield* Scope.make()
        const context = yield* Layer.buildWithScope(TestDiscovery.layer(), scope)
        const state = yield* ClusterState.pipe(Effect.provideContext(context))
        yield* state.update(upd({ affiliateId: "af1", data: utf8("d") }))
        const first = yield* record(state, "c1")
        const second = yield* record(state, "other")
        yield* Scope.close(scope, Exit.void)
        yield* settle
        for (const watcher of [first, second]) {
          assert.strictEqual(watcher.events[0]!._tag, "Snapshot")
          assert.deepStrictEqual(failureOf(watcher), { _tag: "Unavailable", message: "server is shutting down" })
        }
        const late = yield* record(state, "c1")
        yield* settle
        assert.deepStrictEqual(late.events, [])
        assert.deepStrictEqual(failureOf(late), { _tag: "Unavailable", message: "server is shutting down" })
      })
    )
  })

  describe("changes nobody can see", () => {
    it.effect("publishes nothing for the same data bytes and known endpoints, yet extends the expiry", () =>
      withState((state) =>
        Effect.gen(function* () {
          const request = upd({
            affiliateId: "af1",
            data: utf8("d"),
            endpoints: [endpoint(1)],
            ttl: Duration.minutes(1)
          })
          yield* state.update(request)
          const watcher = yield* record(state, "c1")
          yield* TestDiscovery.advance("50 seconds")
          // a refresh from a fresh copy of the same bytes
          yield* state.update(upd({ ...request, data: utf8("d"), endpoints: [endpoint(1)] }))
          yield* settle
          assert.strictEqual(watcher.events.length, 1)

          // past the first expiry (1m) but before the refreshed one (1m50s): nothing goes
          yield* TestDiscovery.advance("30 seconds")
          assert.deepStrictEqual(gcCounts(yield* TestDiscovery.runGc), {
            removedClusters: 0,
            removedAffiliates: 0,
            trimmedAffiliates: 0
          })
          assert.deepStrictEqual(plainList(yield* state.list({ clusterId: "c1" })), [af("af1", "d", [endpoint(1)])])
          yield* settle
          assert.strictEqual(watcher.events.length, 1)

          // past the refreshed expiry: the affiliate goes
          yield* TestDiscovery.advance("31 seconds")
          assert.strictEqual((yield* TestDiscovery.runGc).removedAffiliates, 1)
          yield* settle
          assert.deepStrictEqual(events(watcher).slice(1), [{ _tag: "Deleted", revision: 2, affiliateId: "af1" }])
        })
      )
    )

    it.effect("publishes nothing for an endpoint-only refresh, which keeps the endpoint alive", () =>
      withState((state) =>
        Effect.gen(function* () {
          yield* state.update(upd({ affiliateId: "af1", data: utf8("d"), ttl: Duration.minutes(10) }))
          yield* state.update(upd({ affiliateId: "af1", endpoints: [endpoint(1)], ttl: Duration.minutes(1) }))
          const watcher = yield* record(state, "c1")
          yield* TestDiscovery.advance("45 seconds")
          yield* state.update(upd({ affiliateId: "af1", endpoints: [endpoint(1)], ttl: Duration.minutes(1) }))
          yield* TestDiscovery.advance("45 seconds")
          assert.strictEqual((yield* TestDiscovery.runGc).trimmedAffiliates, 0)
          yield* settle
          assert.strictEqual(watcher.events.length, 1)
          assert.strictEqual((yield* state.list({ clusterId: "c1" }))[0]!.endpoints.length, 1)
        })
      )
    )
  })

  describe("garbage collection", () => {
    it.effect("publishes the remaining full state when only some endpoints expire", () =>
      withState((state) =>
        Effect.gen(function* () {
          yield* state.update(upd({ affiliateId: "af1", data: utf8("d"), ttl: Duration.minutes(5) }))
          yield* state.update(upd({ affiliateId: "af1", endpoints: [endpoint(1)], ttl: Duration.minutes(1) }))
          yield* state.update(upd({ affiliateId: "af1", endpoints: [endpoint(2)], ttl: Duration.minutes(5) }))
          const watcher = yield* record(state, "c1")
          yield* TestDiscovery.advance("2 minutes")
          assert.deepStrictEqual(gcCounts(yield* TestDiscovery.runGc), {
            removedClusters: 0,
            removedAffiliates: 0,
            trimmedAffiliates: 1
          })
          yield* settle
          assert.deepStrictEqual(events(watcher).slice(1), [
            { _tag: "Updated", revision: 4, affiliate: af("af1", "d", [endpoint(2)]) }
          ])
          assert.deepStrictEqual(plainList(yield* state.list({ clusterId: "c1" })), [af("af1", "d", [endpoint(2)])])
        })
      )
    )

    it.effect("removes an affiliate whose ttl ran out and tells its watchers", () =>
      withState((state) =>
        Effect.gen(function* () {
          yield* state.update(upd({ affiliateId: "short", data: utf8("s"), ttl: Duration.seconds(1) }))
          yield* state.update(upd({ affiliateId: "long", data: utf8("l"), ttl: Duration.minutes(1) }))
          const watcher = yield* record(state, "c1")
          yield* TestDiscovery.advance("1 second")
          assert.strictEqual((yield* TestDiscovery.runGc).removedAffiliates, 0)
          yield* TestDiscovery.advance("1 millis")
          assert.strictEqual((yield* TestDiscovery.runGc).removedAffiliates, 1)
          yield* settle
          assert.deepStrictEqual(events(watcher).slice(1), [{ _tag: "Deleted", revision: 3, affiliateId: "short" }])
          assert.deepStrictEqual(plainList(yield* state.list({ clusterId: "c1" })), [af("long", "l")])
        })
      )
    )

    it.effect("removes an entry with a zero ttl once time moves and one with a negative ttl at once", () =>
      withState((state) =>
        Effect.gen(function* () {
          yield* state.update(upd({ affiliateId: "zero", ttl: Duration.zero }))
          yield* state.update(upd({ affiliateId: "negative", ttl: Duration.seconds(-5) }))
          assert.strictEqual((yield* state.list({ clusterId: "c1" })).length, 2)
          assert.strictEqual((yield* TestDiscovery.runGc).removedAffiliates, 1)
          assert.deepStrictEqual(
            (yield* state.list({ clusterId: "c1" })).map((a) => a.id),
            ["zero"]
          )
          yield* TestDiscovery.advance("1 millis")
          assert.deepStrictEqual(gcCounts(yield* TestDiscovery.runGc), {
            removedClusters: 1,
            removedAffiliates: 1,
            trimmedAffiliates: 0
          })
        })
      )
    )
  })

  describe("all or nothing", () => {
    it.effect("refuses an update that would pass 64 endpoints without changing or publishing anything", () =>
      withState((state) =>
        Effect.gen(function* () {
          const sixty = Array.from({ length: 60 }, (_, i) => endpoint(i))
          yield* state.update(upd({ affiliateId: "af1", data: utf8("d"), endpoints: sixty, ttl: Duration.minutes(1) }))
          const watcher = yield* record(state, "c1")
          const five = Array.from({ length: 5 }, (_, i) => endpoint(100 + i))
          const error = yield* Effect.flip(
            state.update(upd({ affiliateId: "af1", data: utf8("new"), endpoints: five, ttl: Duration.minutes(10) }))
          )
          assert.deepStrictEqual(
            { _tag: error._tag, message: error.message },
            {
              _tag: "ResourceExhausted",
              message: "too many endpoints in the affiliate"
            }
          )
          yield* settle
          assert.strictEqual(watcher.events.length, 1)
          assert.deepStrictEqual(plainList(yield* state.list({ clusterId: "c1" })), [af("af1", "d", sixty)])
          // nothing was extended either
          yield* TestDiscovery.advance("61 seconds")
          assert.strictEqual((yield* TestDiscovery.runGc).removedAffiliates, 1)
        })
      )
    )

    it.effect("does not create an affiliate, nor its cluster, from a request with 65 distinct endpoints", () =>
      withState((state) =>
        Effect.gen(function* () {
          const endpoints = Array.from({ length: 65 }, (_, i) => endpoint(i))
          const error = yield* Effect.flip(state.update(upd({ affiliateId: "af1", data: utf8("d"), endpoints })))
          assert.strictEqual(error.message, "too many endpoints in the affiliate")
          assert.deepStrictEqual(yield* state.stats, { clusters: 0, affiliates: 0, endpoints: 0, watches: 0 })
          assert.deepStrictEqual(yield* state.list({ clusterId: "c1" }), [])
        })
      )
    )

    it.effect("refuses the 1025th affiliate without changing or publishing anything", () =>
      withState((state) =>
        Effect.gen(function* () {
          for (let i = 0; i < 1024; i++) yield* state.update(upd({ affiliateId: `af${i}` }))
          const watcher = yield* record(state, "c1")
          const error = yield* Effect.flip(state.update(upd({ affiliateId: "af1024", data: utf8("d") })))
          assert.deepStrictEqual(
            { _tag: error._tag, message: error.message },
            {
              _tag: "ResourceExhausted",
              message: "too many affiliates in the cluster"
            }
          )
          yield* settle
          assert.strictEqual(watcher.events.length, 1)
          assert.strictEqual((yield* state.stats).affiliates, 1024)
        })
      )
    )
  })

  describe("caps", () => {
    it.effect("refuses a new cluster beyond maxClusters with ResourceExhausted", () =>
      withState(
        (state) =>
          Effect.gen(function* () {
            yield* state.update(upd({ clusterId: "c1" }))
            yield* state.update(upd({ clusterId: "c2" }))
            const error = yield* Effect.flip(state.update(upd({ clusterId: "c3" })))
            assert.deepStrictEqual(
              { _tag: error._tag, message: error.message },
              {
                _tag: "ResourceExhausted",
                message: "too many clusters"
              }
            )
            const watcher = yield* record(state, "c3")
            assert.deepStrictEqual(failureOf(watcher), { _tag: "ResourceExhausted", message: "too many clusters" })
            assert.strictEqual((yield* state.stats).clusters, 2)
            yield* state.update(upd({ clusterId: "c2", affiliateId: "a2" }))
          }),
        { caps: { maxClusters: 2 } }
      )
    )

    it.effect("refuses a watch beyond maxWatches with ResourceExhausted until one closes", () =>
      withState(
        (state) =>
          Effect.gen(function* () {
            const first = yield* record(state, "c1")
            yield* record(state, "c2")
            const refused = yield* record(state, "c1")
            assert.deepStrictEqual(failureOf(refused), { _tag: "ResourceExhausted", message: "too many watches" })
            assert.deepStrictEqual(refused.events, [])
            yield* Fiber.interrupt(first.fiber)
            assert.strictEqual((yield* state.stats).watches, 1)
            const again = yield* record(state, "c3")
            assert.isUndefined(again.exit)
            assert.strictEqual((yield* state.stats).watches, 2)
          }),
        { caps: { maxWatches: 2 } }
      )
    )

    it.effect("frees the slot of a watcher cut off for falling behind before it notices", () =>
      withState(
        (state) =>
          Effect.gen(function* () {
            const stuck = yield* Latch.make(false)
            const slow = yield* record(state, "c1", stuck.await)
            for (let i = 0; i < 33; i++) yield* state.update(upd({ affiliateId: "a1", data: utf8(`v${i}`) }))
            yield* settle
            assert.isUndefined(slow.exit)
            const next = yield* record(state, "c1")
            assert.isUndefined(next.exit)
            assert.strictEqual(next.events[0]!._tag, "Snapshot")
            assert.strictEqual((yield* state.stats).watches, 1)
          }),
        { caps: { maxWatches: 1 } }
      )
    )

    it.effect("leaves no cluster behind after List, Delete or a Watch on an unknown cluster", () =>
      withState((state) =>
        Effect.gen(function* () {
          assert.deepStrictEqual(yield* state.list({ clusterId: "ghost" }), [])
          yield* state.delete({ clusterId: "ghost", affiliateId: "a1" })
          assert.strictEqual((yield* state.stats).clusters, 0)
          const watcher = yield* record(state, "ghost")
          assert.deepStrictEqual(yield* state.stats, { clusters: 1, affiliates: 0, endpoints: 0, watches: 1 })
          yield* Fiber.interrupt(watcher.fiber)
          assert.deepStrictEqual(yield* state.stats, { clusters: 0, affiliates: 0, endpoints: 0, watches: 0 })
        })
      )
    )

    it.effect("leaves no cluster behind after a watch that was cut off ends", () =>
      withState((state) =>
        Effect.gen(function* () {
          const stuck = yield* Latch.make(false)
          const watcher = yield* record(state, "c1", stuck.await)
          for (let i = 0; i < 33; i++) yield* state.update(upd({ affiliateId: `a${i}`, ttl: Duration.zero }))
          yield* TestDiscovery.advance("1 millis")
          yield* TestDiscovery.runGc
          yield* stuck.open
          yield* settle
          assert.strictEqual(failureOf(watcher)?._tag, "SubscriptionLost")
          assert.deepStrictEqual(yield* state.stats, { clusters: 0, affiliates: 0, endpoints: 0, watches: 0 })
        })
      )
    )
  })

  describe("validation", () => {
    it.effect("rejects endpoint blobs that are not a positive multiple of 16 bytes and stores nothing", () =>
      withState((state) =>
        Effect.gen(function* () {
          for (const size of [0, 1, 15, 17]) {
            const error = yield* Effect.flip(state.update(upd({ endpoints: [blob(size)] })))
            assert.strictEqual(error._tag, "InvalidArgument", `${size}`)
          }
          const tooBig = yield* Effect.flip(state.update(upd({ endpoints: [blob(33)] })))
          assert.deepStrictEqual(
            { _tag: tooBig._tag, message: tooBig.message },
            {
              _tag: "InvalidArgument",
              message: "affiliate endpoint is too big"
            }
          )
          assert.strictEqual((yield* state.stats).clusters, 0)
          yield* state.update(upd({ endpoints: [blob(16, 1), blob(32, 2)] }))
          assert.strictEqual((yield* state.stats).endpoints, 2)
        })
      )
    )

    it.effect("rejects IDs that are not well-formed Unicode on every operation", () =>
      withState((state) =>
        Effect.gen(function* () {
          const bad = "a\udfffb"
          const errors = [
            yield* Effect.flip(state.update(upd({ clusterId: bad }))),
            yield* Effect.flip(state.update(upd({ affiliateId: bad }))),
            yield* Effect.flip(state.delete({ clusterId: bad, affiliateId: "a" })),
            yield* Effect.flip(state.delete({ clusterId: "c1", affiliateId: bad })),
            yield* Effect.flip(state.list({ clusterId: bad }))
          ]
          assert.deepStrictEqual(
            errors.map((e) => e._tag),
            ["InvalidArgument", "InvalidArgument", "InvalidArgument", "InvalidArgument", "InvalidArgument"]
          )
          assert.strictEqual((yield* state.stats).clusters, 0)
        })
      )
    )

    it.effect("accepts a ttl of exactly 30 minutes and rejects 30 minutes and 1 nanosecond", () =>
      withState((state) =>
        Effect.gen(function* () {
          yield* state.update(upd({ ttl: Duration.minutes(30) }))
          const error = yield* Effect.flip(
            state.update(upd({ affiliateId: "a2", ttl: Duration.nanos(30n * 60n * 1_000_000_000n + 1n) }))
          )
          assert.strictEqual(error.message, "ttl is too large")
          assert.strictEqual((yield* state.stats).affiliates, 1)
        })
      )
    )
  })

  describe("stored bytes", () => {
    it.effect("keeps copies, so changing the caller's arrays after an update changes nothing", () =>
      withState((state) =>
        Effect.gen(function* () {
          const data = utf8("data")
          const blob16 = endpoint(7)
          yield* state.update(upd({ affiliateId: "af1", data, endpoints: [blob16] }))
          data.fill(0)
          blob16.fill(0)
          assert.deepStrictEqual(plainList(yield* state.list({ clusterId: "c1" })), [af("af1", "data", [endpoint(7)])])
        })
      )
    )

    // Core bug: Affiliate.view() hands out the stored Uint8Arrays themselves, so whoever mutates a
    // List result or a watch event (e.g. decrypting in place) rewrites the stored state.
    it.effect("hands out copies, so changing a listed affiliate changes nothing stored", () =>
      withState((state) =>
        Effect.gen(function* () {
          yield* state.update(upd({ affiliateId: "af1", data: utf8("data"), endpoints: [endpoint(7)] }))
          const [listed] = yield* state.list({ clusterId: "c1" })
          listed!.data.fill(0)
          listed!.endpoints[0]!.fill(0)
          assert.deepStrictEqual(plainList(yield* state.list({ clusterId: "c1" })), [af("af1", "data", [endpoint(7)])])
        })
      )
    )

    it.effect("hands out copies, so changing a watch event changes nothing stored", () =>
      withState((state) =>
        Effect.gen(function* () {
          const watcher = yield* record(state, "c1")
          yield* state.update(upd({ affiliateId: "af1", data: utf8("data"), endpoints: [endpoint(7)] }))
          yield* settle
          const event = watcher.events[1]!
          if (event._tag === "Updated") {
            event.affiliate.data.fill(1)
            event.affiliate.endpoints[0]!.fill(1)
          }
          assert.deepStrictEqual(plainList(yield* state.list({ clusterId: "c1" })), [af("af1", "data", [endpoint(7)])])
          const late = yield* record(state, "c1")
          yield* settle
          assert.deepStrictEqual(events(late)[0], {
            _tag: "Snapshot",
            revision: 1,
            affiliates: [af("af1", "data", [endpoint(7)])]
          })
        })
      )
    )
  })
})
