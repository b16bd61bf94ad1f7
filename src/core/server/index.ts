/**
 * The transport-free discovery server: cluster state, TTL expiry, watches,
 * redirect policy and garbage collection. The synchronous engine behind the
 * state (`ClusterStore`, `Affiliate`) stays internal.
 *
 * @since 0.1.0
 */
export { ClusterState, type SnapshotImport, type WatchError } from "./ClusterState.ts"
export { defaultCaps, type GcReport, type StoreCaps, type StoreStats } from "./ClusterStore.ts"
export * as DiscoveryServer from "./DiscoveryServer.ts"
export * as GarbageCollector from "./GarbageCollector.ts"
export * from "./limits.ts"
export * from "./RedirectPolicy.ts"
export * as SnapshotCodec from "./SnapshotCodec.ts"
export {
  defaultSnapshotInterval,
  type LoadOutcome,
  loadSnapshot,
  type SnapshotOptions,
  SnapshotService,
  type SnapshotStats,
  saveSnapshot
} from "./SnapshotService.ts"
