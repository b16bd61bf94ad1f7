import { assert, describe, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import * as TestDiscovery from "../../src/adapters/testing/TestDiscovery.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import type { ServerOptions } from "../../src/core/server/DiscoveryServer.ts"
import { ClusterApi } from "../../src/ports/ClusterApi.ts"
import { updateRequest, utf8 } from "./fixtures/discovery.ts"

const address = Uint8Array.from([127, 0, 0, 1])

const withApi = <A, E>(
  body: (api: typeof ClusterApi.Service, state: typeof ClusterState.Service) => Effect.Effect<A, E>,
  options: ServerOptions = {}
) =>
  Effect.gen(function* () {
    return yield* body(yield* ClusterApi, yield* ClusterState)
  }).pipe(Effect.provide(TestDiscovery.layer(options)))

describe("DiscoveryServer", () => {
  describe("hello", () => {
    it.effect("reports the caller's address and no redirect by default", () =>
      withApi((api) =>
        Effect.gen(function* () {
          const response = yield* api.hello({ clusterId: "c1", clientVersion: "v1.8.3", clientAddress: address })
          assert.deepStrictEqual(response.clientIp, address)
          assert.isUndefined(response.redirect)
        })
      )
    )

    it.effect("leaves the address out when reporting is off", () =>
      withApi(
        (api) =>
          Effect.gen(function* () {
            const response = yield* api.hello({ clusterId: "c1", clientVersion: "", clientAddress: address })
            assert.isUndefined(response.clientIp)
          }),
        { reportClientIp: false }
      )
    )

    it.effect("redirects every caller when a redirect endpoint is set", () =>
      withApi(
        (api) =>
          Effect.gen(function* () {
            const response = yield* api.hello({ clusterId: "c1", clientVersion: "" })
            assert.strictEqual(response.redirect, "new.example.com:443")
            assert.isUndefined(response.clientIp)
          }),
        { redirectEndpoint: "new.example.com:443" }
      )
    )

    it.effect("validates the cluster ID and never creates a cluster", () =>
      withApi((api, state) =>
        Effect.gen(function* () {
          for (const clusterId of ["", "c".repeat(1024), "\ud800"]) {
            const error = yield* Effect.flip(api.hello({ clusterId, clientVersion: "" }))
            assert.strictEqual(error._tag, "InvalidArgument")
          }
          yield* api.hello({ clusterId: "c1", clientVersion: "" })
          assert.strictEqual((yield* state.stats).clusters, 0)
        })
      )
    )
  })

  it.effect("serves the other operations from the cluster state", () =>
    withApi((api, state) =>
      Effect.gen(function* () {
        yield* api.affiliateUpdate(updateRequest({ affiliateId: "af1", data: utf8("d") }))
        assert.deepStrictEqual(
          (yield* state.list({ clusterId: "c1" })).map((a) => a.id),
          ["af1"]
        )
        assert.deepStrictEqual(
          (yield* api.list({ clusterId: "c1" })).map((a) => a.id),
          ["af1"]
        )
        const [snapshot] = yield* Stream.runCollect(Stream.take(api.watch({ clusterId: "c1" }), 1))
        assert.strictEqual(snapshot?._tag, "Snapshot")
        yield* api.affiliateDelete({ clusterId: "c1", affiliateId: "af1" })
        assert.deepStrictEqual(yield* api.list({ clusterId: "c1" }), [])
        assert.strictEqual((yield* state.stats).clusters, 0)
      })
    )
  )
})
