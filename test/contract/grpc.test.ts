/**
 * The contract suite over gRPC:
 *
 * - "grpc loopback": our `GrpcServer` on 127.0.0.1:0 over `TestDiscovery`,
 *   reached through our `GrpcClient`, on each of the server's transports
 *   (http2, grpc-js), with the push and the Stream form of Watch. Both are
 *   built inside each case, so the server's handlers read the case's
 *   `TestClock`, and GC runs on demand.
 * - "external": any server named by `DISCOVERY_CONTRACT_TARGET=host:port`
 *   (plaintext h2c), for example the original Go service started with
 *   `-gc-interval 1s`. It is not ours and its time cannot be controlled, so only
 *   the original's behaviours run. `DISCOVERY_CONTRACT_REDIRECT` names the
 *   redirect endpoint it was started with, if any. The Go binary limits each
 *   client IP to 15 requests per second (burst 60), and the suite makes about
 *   1300 requests (T50 alone makes 1025), so a run takes a minute or two.
 */
import { Context, Effect, Exit, Layer, Scope } from "effect"
import { it } from "@effect/vitest"
import { GrpcClient, GrpcServer } from "../../src/adapters/grpc/index.ts"
import { TestDiscovery } from "../../src/adapters/testing/index.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import type { ServerOptions } from "../../src/core/server/DiscoveryServer.ts"
import { ClusterApi } from "../../src/ports/ClusterApi.ts"
import { clusterApiSuite } from "./clusterApiSuite.ts"
import { externalTarget } from "./externalTarget.ts"

/** Stops the case's server, as SIGTERM stops the command's. */
class StopServer extends Context.Service<StopServer, { readonly stop: Effect.Effect<void> }>()("test/StopServer") {}

/**
 * Our core behind our gRPC server on a free loopback port, and our gRPC client
 * connected to it. `streamWatch` hides the core's push form of Watch
 * (`ClusterApi.subscribe`), so the server falls back to the Stream form, as it
 * does for any `ClusterApi` without it.
 */
const loopback = (
  transport: GrpcServer.Transport,
  options: ServerOptions = {},
  streamWatch = false
): Layer.Layer<ClusterApi | ClusterState | StopServer, unknown> =>
  Layer.effectContext(
    Effect.gen(function* () {
      const built = yield* Layer.build(TestDiscovery.layer(options))
      const core = streamWatch
        ? Context.add(built, ClusterApi, { ...Context.get(built, ClusterApi), subscribe: undefined })
        : built
      // No rate limiting: the suite makes over a thousand calls from one address and its TestClock never refills a bucket.
      const serverScope = yield* Scope.fork(yield* Effect.scope)
      const { port } = yield* GrpcServer.make({
        address: "127.0.0.1:0",
        transport,
        shutdownTimeout: "1 second",
        rateLimit: false
      }).pipe(Effect.provide(core), Scope.provide(serverScope))
      const api = yield* GrpcClient.make({ endpoint: `127.0.0.1:${port}`, tls: false })
      return Context.make(ClusterApi, api).pipe(
        Context.add(ClusterState, Context.get(core, ClusterState)),
        Context.add(StopServer, { stop: Scope.close(serverScope, Exit.void) })
      )
    })
  )

for (const [transport, streamWatch] of [
  ["http2", false],
  ["http2", true],
  ["grpc-js", false],
  ["grpc-js", true]
] as const) {
  clusterApiSuite({
    name: `grpc loopback over ${transport}${streamWatch ? ", Stream watch" : ""}`,
    layer: loopback(transport, {}, streamWatch),
    ours: true,
    time: {
      _tag: "TestClock",
      advance: TestDiscovery.advance,
      runGc: Effect.asVoid(TestDiscovery.runGc)
    },
    clientIp: { _tag: "Peer", bytes: Uint8Array.of(127, 0, 0, 1) },
    clusterCount: Effect.map(
      Effect.flatMap(ClusterState, (state) => state.stats),
      (stats) => stats.clusters
    ),
    caps: {
      layer: loopback(transport, { caps: { maxClusters: 3, maxWatches: 3 } }, streamWatch),
      maxClusters: 3,
      maxWatches: 3
    },
    slowWatcher: { overflowAfter: 400, exact: false },
    rawStrings: false,
    stop: { run: Effect.flatMap(StopServer, (server) => server.stop), withinMillis: 3000 },
    timeout: 30_000
  })
}

const external = process.env.DISCOVERY_CONTRACT_TARGET
if (external === undefined || external === "") {
  it.skip("ClusterApi contract: external [skipped: DISCOVERY_CONTRACT_TARGET=host:port is not set]")
} else {
  clusterApiSuite(
    externalTarget(`external ${external}`, () => external, process.env.DISCOVERY_CONTRACT_REDIRECT || undefined)
  )
}
