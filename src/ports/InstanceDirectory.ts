/**
 * Where the instances that share one state backend announce themselves, so
 * that each can show the others (the live view's instance table). An
 * announcement lives for a TTL: an instance that stops renewing it (killed,
 * cut off) drops out of the list by itself.
 *
 * @since 0.1.0
 */
import type { Effect } from "effect"
import { Context } from "effect"
import type { Unavailable } from "./DiscoveryError.ts"

/**
 * What one instance says about itself; times are milliseconds since the
 * epoch, rates per second over the last sample.
 *
 * @category models
 * @since 0.1.0
 */
export interface InstanceAnnouncement {
  /** Its name (`<host name>/<process ID>` unless configured). */
  readonly name: string
  /** Where its gRPC port listens, as `host:port`. */
  readonly address: string
  readonly version: string
  readonly startedAt: number
  /** When it said this; it drops out of the list a TTL later unless it says it again. */
  readonly announcedAt: number
  readonly threads: number
  readonly watches: number
  readonly updatesPerSecond: number
  readonly deliveriesPerSecond: number
}

/**
 * The directory of the instances that share a state backend.
 *
 * @category services
 * @since 0.1.0
 */
export class InstanceDirectory extends Context.Service<
  InstanceDirectory,
  {
    /** Says (again) that this instance runs, for `ttlMillis`. */
    readonly announce: (announcement: InstanceAnnouncement, ttlMillis: number) => Effect.Effect<void, Unavailable>
    /** The instances whose announcement has not expired, by name. */
    readonly list: Effect.Effect<ReadonlyArray<InstanceAnnouncement>, Unavailable>
    /** Takes this instance's announcement back (it stops). */
    readonly withdraw: (name: string) => Effect.Effect<void, Unavailable>
  }
>()("talos-discovery/InstanceDirectory") {}
