/**
 * The contract suite against the in-process core (`TestDiscovery`): time on
 * `TestClock`, GC on demand, clusters counted through `ClusterState.stats`.
 * Two targets: the default configuration, and one that redirects and does not
 * report client addresses (the other RPCs must work as usual there).
 */
import { TestDiscovery } from "../../src/adapters/testing/index.ts"
import type { ClusterState } from "../../src/core/server/ClusterState.ts"
import { clusterApiSuite } from "./clusterApiSuite.ts"
import { coreControls } from "./fixtures.ts"
import type { ContractTarget } from "./ContractTarget.ts"

const inProcess = (
  name: string,
  options: Parameters<typeof TestDiscovery.layer>[0],
  fields: Pick<ContractTarget<ClusterState>, "clientIp" | "redirectEndpoint">
): ContractTarget<ClusterState> => ({
  name,
  layer: TestDiscovery.layer(options),
  ours: true,
  ...coreControls,
  caps: {
    layer: TestDiscovery.layer({ ...options, caps: { maxClusters: 3, maxWatches: 3 } }),
    maxClusters: 3,
    maxWatches: 3
  },
  slowWatcher: { overflowAfter: 33, exact: true },
  rawStrings: true,
  ...fields
})

clusterApiSuite(inProcess("in-process", {}, { clientIp: { _tag: "FromRequest" } }))

clusterApiSuite(
  inProcess(
    "in-process, redirecting, client IP reporting off",
    { redirectEndpoint: "new.example.com:443", reportClientIp: false },
    { clientIp: { _tag: "Off" }, redirectEndpoint: "new.example.com:443" }
  )
)
