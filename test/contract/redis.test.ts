/**
 * The contract suite against the core on the Redis backend, twice: on a
 * single `redis-server`, and on a Redis Cluster of three primaries created
 * for this file (`redis-cli --cluster create`), both on free loopback ports.
 * Each case gets a fresh key prefix (so cases never share state); time is on
 * `TestClock` (the backend takes every instant from the core's clock) and GC
 * runs on demand.
 */
import { randomUUID } from "node:crypto"
import { Context, Effect, Layer } from "effect"
import { RedisBackend } from "../../src/adapters/redis/index.ts"
import { TestDiscovery } from "../../src/adapters/testing/index.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import * as DiscoveryServer from "../../src/core/server/DiscoveryServer.ts"
import type { ClusterApi } from "../../src/ports/ClusterApi.ts"
import { StateBackend } from "../../src/ports/StateBackend.ts"
import { redisClusterForTests, redisForTests } from "../adapters/redis/redisServer.ts"
import { clusterApiSuite } from "./clusterApiSuite.ts"
import type { ContractTarget } from "./ContractTarget.ts"

const single = redisForTests()
const cluster = redisClusterForTests(3)

/** The case's backend. */
class Backend extends Context.Service<Backend, RedisBackend.RedisStateBackend>()("test/Backend") {}

const onRedis = (
  where: () => { readonly url: string; readonly cluster: boolean },
  caps: { maxClusters: number; maxWatches: number }
): Layer.Layer<ClusterApi | ClusterState | Backend> =>
  Layer.unwrap(
    Effect.map(
      Effect.suspend(() => RedisBackend.make({ ...where(), keyPrefix: `contract-${randomUUID()}:`, caps })),
      (backend) =>
        DiscoveryServer.layer({
          gcInterval: "disabled",
          state: ClusterState.layerOnBackend.pipe(Layer.provide(Layer.succeed(StateBackend, backend)))
        }).pipe(Layer.merge(Layer.succeed(Backend, backend)))
    )
  )

const target = (
  name: string,
  where: () => { readonly url: string; readonly cluster: boolean }
): ContractTarget<ClusterState | Backend> => ({
  name,
  layer: onRedis(where, { maxClusters: 1_000_000, maxWatches: 100_000 }),
  ours: true,
  time: { _tag: "TestClock", advance: TestDiscovery.advance, runGc: Effect.asVoid(TestDiscovery.runGc) },
  clientIp: { _tag: "FromRequest" },
  clusterCount: Effect.flatMap(Backend, (backend) => Effect.orDie(backend.clusterCount)),
  caps: { layer: onRedis(where, { maxClusters: 3, maxWatches: 3 }), maxClusters: 3, maxWatches: 3 },
  slowWatcher: { overflowAfter: 33, exact: false },
  rawStrings: true,
  timeout: 20_000
})

clusterApiSuite(target("in-process on Redis", () => ({ url: single.server.url, cluster: false })))
clusterApiSuite(
  target("in-process on a Redis Cluster of 3 primaries", () => ({ url: cluster.cluster.url, cluster: true }))
)
