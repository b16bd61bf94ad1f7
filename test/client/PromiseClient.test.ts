import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Layer, ManagedRuntime } from "effect"
import { createDiscoveryClient, type PromiseClient } from "../../src/client/PromiseClient.ts"
import * as GrpcServer from "../../src/adapters/grpc/GrpcServer.ts"
import * as InProcess from "../../src/adapters/in-process/InProcess.ts"
import type { DiscoveredAffiliate } from "../../src/core/client/reconcile.ts"
import { ClusterApi } from "../../src/ports/ClusterApi.ts"
import { key32 } from "./fixtures.ts"

/** Resolves once `check` passes (real time), or rejects after `ms`. */
const waitFor = async (check: () => boolean, ms = 3000): Promise<void> => {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error("timed out")
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

const options = (affiliateId: string, endpoint: string) => ({
  key: key32,
  endpoint,
  clusterId: "facade",
  affiliateId,
  ttl: "1 minute" as const,
  logLevel: "None" as const
})

const ids = (list: ReadonlyArray<DiscoveredAffiliate>) => list.map((a) => a.id).sort()

describe("PromiseClient", () => {
  describe("in process", () => {
    const runtime = ManagedRuntime.make(InProcess.layer())
    let api: ClusterApi["Service"]
    beforeAll(async () => {
      api = await runtime.runPromise(ClusterApi)
    })
    afterAll(() => runtime.dispose())

    it("publishes, discovers, reports changes and closes", async () => {
      const connector = { connect: () => Effect.succeed(api) }
      const one = await createDiscoveryClient({ ...options("af1", "local"), connector })
      const two = await createDiscoveryClient({ ...options("af2", "local"), connector })
      const changes: Array<Array<string>> = []
      two.on("change", (list) => changes.push(ids(list)))
      try {
        await one.setLocalData({
          affiliate: { hostname: "one" },
          endpoints: [{ ip: Uint8Array.of(1, 2, 3, 4), port: 51820 }]
        })
        await waitFor(() => two.affiliates().length === 1)
        const [peer] = two.affiliates()
        assert.strictEqual(peer?.id, "af1")
        assert.strictEqual(peer?.affiliate.hostname, "one")
        assert.deepStrictEqual(peer?.endpoints, [{ ip: Uint8Array.of(1, 2, 3, 4), port: 51820 }])
        assert.strictEqual(two.endpoint(), "local")

        await one.deleteLocalAffiliate()
        await waitFor(() => two.affiliates().length === 0)
        assert.deepStrictEqual(changes, [["af1"], []])
      } finally {
        await Promise.all([one.close(), two.close()])
      }
      assert.deepStrictEqual(await runtime.runPromise(api.list({ clusterId: "facade" })), [])
    })

    it("rejects unusable options and unpublishable data with tagged errors", async () => {
      const connector = { connect: () => Effect.succeed(api) }
      const error = await createDiscoveryClient({ ...options("af1", "local"), connector, ttl: 0 }).catch((e) => e)
      assert.strictEqual(error._tag, "InvalidClientOptions")
      const client = await createDiscoveryClient({ ...options("af1", "local"), connector })
      try {
        const failure = await client.setLocalData({ affiliate: { hostname: "h".repeat(3000) } }).catch((e) => e)
        assert.strictEqual(failure._tag, "InvalidLocalData")
      } finally {
        await client.close()
      }
    })
  })

  describe("over gRPC (plaintext, loopback)", () => {
    const runtime = ManagedRuntime.make(
      GrpcServer.layer({ address: "127.0.0.1:0" }).pipe(Layer.provideMerge(InProcess.layer()))
    )
    let endpoint: string
    beforeAll(async () => {
      const { port } = await runtime.runPromise(GrpcServer.GrpcServer)
      endpoint = `127.0.0.1:${port}`
    })
    afterAll(() => runtime.dispose())

    it("two clients find each other through our gRPC server", async () => {
      const clients: Array<PromiseClient> = []
      try {
        for (const id of ["g1", "g2"]) {
          const client = await createDiscoveryClient({ ...options(id, endpoint), tls: false })
          clients.push(client)
          await client.setLocalData({ affiliate: { nodeId: id, hostname: id } })
        }
        const [one, two] = clients as [PromiseClient, PromiseClient]
        await waitFor(() => ids(one.affiliates()).join() === "g2" && ids(two.affiliates()).join() === "g1")
        assert.strictEqual(two.affiliates()[0]?.affiliate.hostname, "g1")
        assert.deepStrictEqual(one.publicIp(), Uint8Array.of(127, 0, 0, 1))
      } finally {
        await Promise.all(clients.map((client) => client.close()))
      }
    })
  })
})
