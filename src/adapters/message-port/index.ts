/**
 * `ClusterApi` over a `MessagePort`: the thread that owns the state serves
 * it (`ClusterApiHost`), other threads call it (`ClusterApiClient`).
 *
 * @since 0.1.0
 */
export * as ClusterApiClient from "./ClusterApiClient.ts"
export * as ClusterApiHost from "./ClusterApiHost.ts"
