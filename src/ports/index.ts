/**
 * The ports of the discovery service: what the core offers and what it needs.
 *
 * @since 0.1.0
 */
export * from "./ClusterApi.ts"
export * from "./DiscoveryError.ts"
export * from "./SnapshotStore.ts"
export * from "./StateBackend.ts"
export * from "./CallDeadline.ts"
export * from "./InstanceDirectory.ts"
