/**
 * The settings of the `discovery-service` command once its flags are parsed:
 * everything needed to build the service's layers.
 *
 * @since 0.1.0
 */
import type { Duration } from "effect"

/**
 * What the command runs with; defaults are the flags' defaults.
 *
 * @category models
 * @since 0.1.0
 */
export interface ServiceConfig {
  /** gRPC listen address as `host:port`; an empty host listens on every interface. */
  readonly addr: string
  readonly gcInterval: Duration.Duration
  readonly redirectEndpoint: string
  readonly trustXRealIp: boolean
  readonly trustFirstXForwardedFor: boolean
  readonly disableClientIpReporting: boolean
  readonly maxClusters: number
  readonly maxWatches: number
  readonly debug: boolean
}
