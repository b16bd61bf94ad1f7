/**
 * The contract suite against the core on the Redis backend: a real
 * `redis-server` started for this file on a free loopback port, a fresh key
 * prefix per case (so cases never share state), time on `TestClock` (the
 * backend takes every instant from the core's clock) and GC on demand.
 */
import { randomUUID } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import { afterAll, beforeAll } from "@effect/vitest"
import { RedisBackend } from "../../src/adapters/redis/index.ts"
import { TestDiscovery } from "../../src/adapters/testing/index.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import * as DiscoveryServer from "../../src/core/server/DiscoveryServer.ts"
import type { ClusterApi } from "../../src/ports/ClusterApi.ts"
import { StateBackend } from "../../src/ports/StateBackend.ts"
import { type RedisServer, startRedis } from "../adapters/redis/redisServer.ts"
import { clusterApiSuite } from "./clusterApiSuite.ts"
import type { ContractTarget } from "./ContractTarget.ts"

let redis: (RedisServer & { cleanup(): Promise<void> }) | undefined
beforeAll(async () => {
  redis = await startRedis()
}, 30_000)

afterAll(async () => {
  await redis?.cleanup()
})

/** The case's backend. */
class Backend extends Context.Service<Backend, RedisBackend.RedisStateBackend>()("test/Backend") {}

const onRedis = (caps: { maxClusters: number; maxWatches: number }): Layer.Layer<ClusterApi | ClusterState | Backend> =>
  Layer.unwrap(
    Effect.map(
      Effect.suspend(() => RedisBackend.make({ url: redis!.url, keyPrefix: `contract-${randomUUID()}:`, caps })),
      (backend) =>
        DiscoveryServer.layer({
          gcInterval: "disabled",
          state: ClusterState.layerOnBackend.pipe(Layer.provide(Layer.succeed(StateBackend, backend)))
        }).pipe(Layer.merge(Layer.succeed(Backend, backend)))
    )
  )

const target: ContractTarget<ClusterState | Backend> = {
  name: "in-process on Redis",
  layer: onRedis({ maxClusters: 1_000_000, maxWatches: 100_000 }),
  ours: true,
  time: { _tag: "TestClock", advance: TestDiscovery.advance, runGc: Effect.asVoid(TestDiscovery.runGc) },
  clientIp: { _tag: "FromRequest" },
  clusterCount: Effect.flatMap(Backend, (backend) => Effect.orDie(backend.clusterCount)),
  caps: { layer: onRedis({ maxClusters: 3, maxWatches: 3 }), maxClusters: 3, maxWatches: 3 },
  slowWatcher: { overflowAfter: 33, exact: false },
  rawStrings: true,
  timeout: 20_000
}

clusterApiSuite(target)
