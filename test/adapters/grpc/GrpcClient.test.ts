import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { ClusterState } from "../../../src/core/server/ClusterState.ts"
import { ClusterApi } from "../../../src/ports/ClusterApi.ts"
import type { AffiliateView } from "../../../src/ports/ClusterApi.ts"
import { blob, connect, failureOf, serverLayer as baseServerLayer, transports, watcher } from "./fixtures.ts"

const e1 = blob(16, 1)
const e2 = blob(16, 2)
const e3 = blob(16, 3)
const data1 = new TextEncoder().encode("data1")
const data2 = new TextEncoder().encode("data2")

for (const transport of transports) {
  describe(`GrpcClient against GrpcServer over ${transport}`, () => {
    const serverLayer = (...[core, server]: Parameters<typeof baseServerLayer>) =>
      baseServerLayer(core, { transport, ...server })

    it.effect("drives Hello, AffiliateUpdate, List and AffiliateDelete (T40, T43-T45)", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        const hello = yield* api.hello({ clusterId: "fake1", clientVersion: "v1.8.3" })
        assert.deepStrictEqual(hello, { redirect: undefined, clientIp: new Uint8Array([127, 0, 0, 1]) })

        yield* api.affiliateUpdate({
          clusterId: "fake1",
          affiliateId: "af1",
          data: data1,
          endpoints: [e1, e2],
          ttl: Duration.minutes(1)
        })
        assert.deepStrictEqual(yield* api.list({ clusterId: "fake1" }), [
          { id: "af1", data: data1, endpoints: [e1, e2] }
        ])

        yield* api.affiliateUpdate({
          clusterId: "fake1",
          affiliateId: "af1",
          endpoints: [e3, e2],
          ttl: Duration.minutes(1)
        })
        assert.deepStrictEqual(yield* api.list({ clusterId: "fake1" }), [
          { id: "af1", data: data1, endpoints: [e1, e2, e3] }
        ])

        yield* api.affiliateDelete({ clusterId: "fake1", affiliateId: "missing" })
        yield* api.affiliateDelete({ clusterId: "fake1", affiliateId: "af1" })
        assert.deepStrictEqual(yield* api.list({ clusterId: "fake1" }), [])
      }).pipe(Effect.provide(serverLayer()))
    )

    it.effect("reports the redirect and, when disabled, no client IP (T47, T56)", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        assert.deepStrictEqual(yield* api.hello({ clusterId: "c", clientVersion: "" }), {
          redirect: "new.example.com:443",
          clientIp: undefined
        })
      }).pipe(Effect.provide(serverLayer({ reportClientIp: false, redirectEndpoint: "new.example.com:443" })))
    )

    it.effect("brings back the exact status messages as tagged errors (T48, T49, T52, T53)", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        const long = "x".repeat(1024)
        const ttl = Duration.minutes(1)
        const cases: ReadonlyArray<readonly [Effect.Effect<unknown, unknown>, string, string]> = [
          [api.hello({ clusterId: "", clientVersion: "" }), "InvalidArgument", "cluster ID can't be empty"],
          [api.hello({ clusterId: long, clientVersion: "" }), "InvalidArgument", "cluster ID is too long"],
          [
            api.affiliateUpdate({ clusterId: "", affiliateId: "", endpoints: [], ttl }),
            "InvalidArgument",
            "cluster ID can't be empty"
          ],
          [
            api.affiliateUpdate({ clusterId: "c", affiliateId: "a".repeat(257), endpoints: [], ttl }),
            "InvalidArgument",
            "affiliate ID is too long"
          ],
          [
            api.affiliateUpdate({ clusterId: "c", affiliateId: "a", data: blob(2049, 0), endpoints: [], ttl }),
            "InvalidArgument",
            "affiliate data is too big"
          ],
          [
            api.affiliateUpdate({ clusterId: "c", affiliateId: "a", endpoints: [blob(33, 0)], ttl }),
            "InvalidArgument",
            "affiliate endpoint is too big"
          ],
          [
            api.affiliateUpdate({
              clusterId: "c",
              affiliateId: "a",
              endpoints: [],
              ttl: Duration.nanos(1_800_000_000_001n)
            }),
            "InvalidArgument",
            "ttl is too large"
          ],
          [api.affiliateDelete({ clusterId: "c", affiliateId: long }), "InvalidArgument", "affiliate ID is too long"],
          [api.list({ clusterId: long }), "InvalidArgument", "cluster ID is too long"]
        ]
        for (const [call, tag, message] of cases) {
          const error = failureOf(yield* Effect.exit(call)) as { _tag: string; message: string }
          assert.deepStrictEqual([error._tag, error.message], [tag, message])
        }
        yield* api.affiliateUpdate({ clusterId: "c", affiliateId: "a", endpoints: [], ttl: Duration.minutes(30) })
      }).pipe(Effect.provide(serverLayer()))
    )

    // 1025 calls from one address: without limiting, as the TestClock never refills the bucket.
    it.effect("gives ResourceExhausted for the 1025th affiliate (T50)", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        const ttl = Duration.minutes(1)
        yield* Effect.forEach(
          Array.from({ length: 1024 }, (_, i) => i),
          (i) => api.affiliateUpdate({ clusterId: "full", affiliateId: `af${i}`, endpoints: [], ttl }),
          { concurrency: 16, discard: true }
        )
        const error = failureOf(
          yield* Effect.exit(api.affiliateUpdate({ clusterId: "full", affiliateId: "one-more", endpoints: [], ttl }))
        )
        assert.strictEqual(error._tag, "ResourceExhausted")
        assert.strictEqual(error.message, "too many affiliates in the cluster")
      }).pipe(Effect.provide(serverLayer({}, { rateLimit: false })))
    )

    it.effect("watches: the snapshot, then an update and a delete (T46)", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        const ttl = Duration.minutes(1)
        yield* api.affiliateUpdate({ clusterId: "fake1", affiliateId: "af1", data: data1, endpoints: [], ttl })
        const watch = yield* watcher(api.watch({ clusterId: "fake1" }))
        const snapshot = yield* watch.next
        const epoch = snapshot._tag === "Snapshot" ? snapshot.epoch : undefined
        assert.isString(epoch)
        assert.deepStrictEqual(snapshot, {
          _tag: "Snapshot",
          revision: 1,
          affiliates: [{ id: "af1", data: data1, endpoints: [] }],
          epoch
        })
        yield* api.affiliateUpdate({ clusterId: "fake1", affiliateId: "af2", data: data2, endpoints: [e1], ttl })
        assert.deepStrictEqual(yield* watch.next, {
          _tag: "Updated",
          revision: 2,
          affiliate: { id: "af2", data: data2, endpoints: [e1] }
        })
        yield* api.affiliateDelete({ clusterId: "fake1", affiliateId: "af1" })
        assert.deepStrictEqual(yield* watch.next, { _tag: "Deleted", revision: 3, affiliateId: "af1" })
      }).pipe(Effect.provide(serverLayer()))
    )

    it.effect("sends an empty snapshot for an empty cluster", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        const watch = yield* watcher(api.watch({ clusterId: "nobody-here" }))
        assert.deepInclude(yield* watch.next, { _tag: "Snapshot", revision: 0, affiliates: [] })
      }).pipe(Effect.provide(serverLayer()))
    )

    it.effect("fails a watch with InvalidArgument on its first read (T54)", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        for (const clusterId of ["", "x".repeat(1024)]) {
          const watch = yield* watcher(api.watch({ clusterId }))
          const error = failureOf(yield* Effect.exit(watch.next))
          assert.strictEqual(error._tag, "InvalidArgument")
        }
      }).pipe(Effect.provide(serverLayer()))
    )

    it.effect("delivers a snapshot larger than the 4 MiB receive limit, split yet complete (Q12)", () =>
      Effect.gen(function* () {
        const core = yield* ClusterApi
        const ttl = Duration.minutes(5)
        const expected = new Map<string, AffiliateView>()
        for (let i = 0; i < 1024; i++) {
          const affiliate: AffiliateView = {
            id: `affiliate-${i}`,
            data: blob(2048, i % 251),
            endpoints: Array.from({ length: 64 }, (_, j) => {
              const endpoint = blob(32, j)
              endpoint[0] = i & 0xff
              endpoint[1] = i >> 8
              return endpoint
            })
          }
          expected.set(affiliate.id, affiliate)
          yield* core.affiliateUpdate({ clusterId: "big", affiliateId: affiliate.id, ...affiliate, ttl })
        }

        const api = yield* connect()
        const list = failureOf(yield* Effect.exit(api.list({ clusterId: "big" })))
        assert.strictEqual(list._tag, "ResourceExhausted", "a full cluster does not fit in one List response")

        const watch = yield* watcher(api.watch({ clusterId: "big" }))
        const snapshot = yield* watch.next
        assert.strictEqual(snapshot._tag, "Snapshot")
        const received = new Map<string, AffiliateView>()
        if (snapshot._tag === "Snapshot") for (const a of snapshot.affiliates) received.set(a.id, a)
        // the server splits it; our client, which reads the parts' `more` flags, puts it back together
        assert.deepStrictEqual(received, expected)
      }).pipe(Effect.provide(serverLayer()))
    )

    it.effect("interrupting a watch cancels the call and ends the subscription", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        const state = yield* ClusterState
        yield* Effect.scoped(
          Effect.gen(function* () {
            const watch = yield* watcher(api.watch({ clusterId: "w" }))
            yield* watch.next
            assert.strictEqual((yield* state.stats).watches, 1)
          })
        )
        let rounds = 0
        while ((yield* state.stats).watches !== 0 && rounds++ < 100) yield* api.list({ clusterId: "w" })
        assert.strictEqual((yield* state.stats).watches, 0)
      }).pipe(Effect.provide(serverLayer()))
    )
  })
}
