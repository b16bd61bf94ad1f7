/**
 * Moving a state between snapshot files and a real Redis: a file made by the
 * memory backend goes into Redis and comes back out the same (TTLs measured
 * from the same instant), expired affiliates are left out, and a cluster
 * Redis already holds is left as it is; the service on Redis then serves
 * what was imported.
 */
import { randomUUID } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { RedisBackend } from "../../../src/adapters/redis/index.ts"
import { RedisConnection } from "../../../src/adapters/redis/RedisConnection.ts"
import { exportSnapshot, importSnapshot } from "../../../src/adapters/redis/stateTransfer.ts"
import { ClusterState } from "../../../src/core/server/ClusterState.ts"
import * as DiscoveryServer from "../../../src/core/server/DiscoveryServer.ts"
import * as SnapshotCodec from "../../../src/core/server/SnapshotCodec.ts"
import { ClusterApi } from "../../../src/ports/ClusterApi.ts"
import { StateBackend } from "../../../src/ports/StateBackend.ts"
import { type RedisServer, startRedis } from "./redisServer.ts"

let redis: (RedisServer & { cleanup(): Promise<void> }) | undefined
let connection: RedisConnection | undefined

beforeAll(async () => {
  redis = await startRedis()
  connection = new RedisConnection({ url: redis.url }, "transfer-test")
  await connection.connect()
}, 30_000)

afterAll(async () => {
  connection?.close()
  await redis?.cleanup()
})

const now = 1_800_000_000_000
const bytes = (...values: Array<number>) => Uint8Array.from(values)
const endpoint = (n: number) => new Uint8Array(16).fill(n)

const entries = [
  {
    id: "cluster-a",
    affiliates: new Map([
      [
        "af1",
        {
          id: "af1",
          data: bytes(1, 2, 3),
          expiresAt: now + 60_000,
          endpoints: [
            { data: endpoint(1), expiresAt: now + 30_000 },
            { data: endpoint(2), expiresAt: now + 60_000 }
          ]
        }
      ],
      ["af2", { id: "af2", data: bytes(), expiresAt: now + 120_000.5, endpoints: [] }],
      ["gone", { id: "gone", data: bytes(9), expiresAt: now - 5_000, endpoints: [] }]
    ])
  },
  {
    id: "cluster-{b}%",
    affiliates: new Map([["x", { id: "x", data: bytes(7), expiresAt: now + 1_000, endpoints: [] }]])
  }
]

const decodeAll = (file: Uint8Array) =>
  SnapshotCodec.decode(file, now)
    .clusters.map((cluster) => ({
      id: cluster.id,
      affiliates: [...(cluster.packed?.unpack() ?? cluster.affiliates).values()]
        .map((a) => ({
          id: a.id,
          data: [...a.data],
          expiresAt: a.expiresAt,
          endpoints: a.endpoints.map((e) => ({ data: [...e.data], expiresAt: e.expiresAt }))
        }))
        .sort((x, y) => x.id.localeCompare(y.id))
    }))
    .sort((x, y) => x.id.localeCompare(y.id))

describe("state transfer between snapshot files and Redis", () => {
  it.live("a file goes into Redis and comes back the same, without what had expired", () =>
    Effect.promise(async () => {
      const keyPrefix = `transfer-${randomUUID()}:`
      const file = SnapshotCodec.encode(entries, now).bytes
      const report = await importSnapshot(connection!, { keyPrefix, maxClusters: 100 }, file, now)
      assert.deepStrictEqual(
        { ...report },
        { clusters: 2, affiliates: 3, endpoints: 2, expiredAffiliates: 1, alreadyHeld: [], damaged: 0 }
      )
      const back = await exportSnapshot(connection!, keyPrefix, now)
      const expected = decodeAll(file).map((cluster) => ({
        ...cluster,
        affiliates: cluster.affiliates.filter((a) => a.id !== "gone")
      }))
      assert.deepStrictEqual(decodeAll(back.bytes), expected)
      const again = await importSnapshot(connection!, { keyPrefix, maxClusters: 100 }, file, now)
      assert.deepStrictEqual([...again.alreadyHeld].sort(), ["cluster-a", "cluster-{b}%"])
      assert.strictEqual(again.clusters, 0)
    })
  )

  it.live("the service on Redis serves what was imported", () =>
    Effect.gen(function* () {
      const keyPrefix = `transfer-${randomUUID()}:`
      const file = SnapshotCodec.encode(entries, now).bytes
      yield* Effect.promise(() => importSnapshot(connection!, { keyPrefix, maxClusters: 100 }, file, now))
      const backend = yield* RedisBackend.make({
        url: redis!.url,
        keyPrefix,
        caps: { maxClusters: 100, maxWatches: 100 }
      })
      const context = yield* Layer.build(
        DiscoveryServer.layer({
          gcInterval: "disabled",
          state: ClusterState.layerOnBackend.pipe(Layer.provide(Layer.succeed(StateBackend, backend)))
        })
      )
      const api = Context.get(context, ClusterApi)
      const listed = yield* api.list({ clusterId: "cluster-a" })
      assert.deepStrictEqual(listed.map((a) => a.id).sort(), ["af1", "af2"])
      const af1 = listed.find((a) => a.id === "af1")!
      assert.deepStrictEqual([...af1.data], [1, 2, 3])
      assert.deepStrictEqual(
        af1.endpoints.map((e) => [...e]),
        [[...endpoint(1)], [...endpoint(2)]]
      )
    }).pipe(Effect.scoped)
  )
})
