/**
 * The transport-free discovery server: cluster state, TTL expiry, watches,
 * redirect policy and garbage collection.
 *
 * @since 0.1.0
 */
export * as Affiliate from "./Affiliate.ts"
export * from "./ClusterState.ts"
export * from "./ClusterStore.ts"
export * as DiscoveryServer from "./DiscoveryServer.ts"
export * as GarbageCollector from "./GarbageCollector.ts"
export * from "./limits.ts"
export * from "./RedirectPolicy.ts"
export * from "./validation.ts"
