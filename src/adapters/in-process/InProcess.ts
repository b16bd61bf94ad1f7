/**
 * The in-process adapter: the core server's `ClusterApi` handed to a caller in
 * the same process, with no transport and no serialization.
 *
 * @since 0.1.0
 */
import type { Layer } from "effect"
import type { ClusterApi } from "../../ports/ClusterApi.ts"
import type { ClusterState } from "../../core/server/ClusterState.ts"
import * as DiscoveryServer from "../../core/server/DiscoveryServer.ts"

/**
 * A complete discovery service in this process: `ClusterApi` for callers (for
 * example the discovery client) and `ClusterState` for inspection. GC runs on
 * the ambient `Clock`.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: DiscoveryServer.ServerOptions = {}): Layer.Layer<ClusterApi | ClusterState> =>
  DiscoveryServer.layer(options)
