/**
 * The transport-free discovery client: sealing compatible with Talos nodes,
 * reconciliation of what the service reports, and the run loop over the
 * `ClusterApi` port.
 *
 * @since 0.1.0
 */
export * from "./ClusterConnector.ts"
export * as DiscoveryClient from "./DiscoveryClient.ts"
export * from "./payload.ts"
export * from "./reconcile.ts"
export * as Sealing from "./sealing.ts"
