/**
 * The contract suite against the core reached over a `MessagePort` (as a
 * gRPC worker thread reaches the thread that owns the state): the same
 * in-process core, on `TestClock`, served by `ClusterApiHost` on one end of
 * a `MessageChannel` and called through `ClusterApiClient` on the other.
 */
import { MessageChannel } from "node:worker_threads"
import { Context, Effect, Layer } from "effect"
import { ClusterApiClient, ClusterApiHost } from "../../src/adapters/message-port/index.ts"
import { TestDiscovery } from "../../src/adapters/testing/index.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import { ClusterApi } from "../../src/ports/ClusterApi.ts"
import { clusterApiSuite } from "./clusterApiSuite.ts"
import { coreControls } from "./fixtures.ts"
import type { ContractTarget } from "./ContractTarget.ts"

const overPort = (options: Parameters<typeof TestDiscovery.layer>[0]): Layer.Layer<ClusterApi | ClusterState> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const core = yield* Layer.build(TestDiscovery.layer(options))
      const channel = new MessageChannel()
      yield* ClusterApiHost.serve(Context.get(core, ClusterApi), channel.port1)
      const api = yield* ClusterApiClient.make(channel.port2)
      return Context.make(ClusterApi, api).pipe(Context.add(ClusterState, Context.get(core, ClusterState)))
    })
  )

clusterApiSuite({
  name: "over a MessagePort",
  layer: overPort({}),
  ours: true,
  ...coreControls,
  caps: { layer: overPort({ caps: { maxClusters: 3, maxWatches: 3 } }), maxClusters: 3, maxWatches: 3 },
  slowWatcher: { overflowAfter: 33, exact: false },
  rawStrings: true,
  clientIp: { _tag: "FromRequest" }
} satisfies ContractTarget<ClusterState>)
