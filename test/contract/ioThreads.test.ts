/**
 * The contract suite over gRPC with the port served by two I/O threads
 * (`IoThreads`): the in-process core on `TestClock` holds the state on this
 * thread, two worker threads run our gRPC server on one loopback port
 * (SO_REUSEPORT) and reach the core over `MessagePort`s, and our gRPC client
 * calls them. Each case starts its own threads.
 */
import { Context, Effect, Layer } from "effect"
import { GrpcClient } from "../../src/adapters/grpc/index.ts"
import * as IoThreads from "../../src/cli/IoThreads.ts"
import { TestDiscovery } from "../../src/adapters/testing/index.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import { ClusterApi } from "../../src/ports/ClusterApi.ts"
import { clusterApiSuite } from "./clusterApiSuite.ts"
import type { ContractTarget } from "./ContractTarget.ts"
import { coreControls } from "./fixtures.ts"
import { ConnectionCounts } from "../../src/adapters/grpc/http2/ConnectionCounts.ts"

/** The test's I/O thread. */
const threadEntry = new URL("./fixtures/grpcIoThread.ts", import.meta.url)

const overThreads = (options: Parameters<typeof TestDiscovery.layer>[0]): Layer.Layer<ClusterApi | ClusterState> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const core = yield* Layer.build(TestDiscovery.layer(options))
      const threads = yield* IoThreads.make({
        threads: 2,
        entry: threadEntry,
        addresses: ["127.0.0.1:0"],
        connections: new ConnectionCounts(1000, 1000),
        stopTimeout: "2 seconds"
      }).pipe(Effect.provide(core), Effect.orDie)
      const api = yield* GrpcClient.make({ endpoint: `127.0.0.1:${threads.port}`, tls: false })
      return Context.make(ClusterApi, api).pipe(Context.add(ClusterState, Context.get(core, ClusterState)))
    })
  )

clusterApiSuite({
  name: "grpc over two I/O threads",
  layer: overThreads({}),
  ours: true,
  ...coreControls,
  caps: { layer: overThreads({ caps: { maxClusters: 3, maxWatches: 3 } }), maxClusters: 3, maxWatches: 3 },
  slowWatcher: { overflowAfter: 400, exact: false },
  rawStrings: false,
  clientIp: { _tag: "Peer", bytes: Uint8Array.of(127, 0, 0, 1) },
  timeout: 30_000
} satisfies ContractTarget<ClusterState>)
