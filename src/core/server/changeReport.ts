/**
 * What the service says about each change and each watch that ends: a
 * counter by cause (bounded labels), and at debug level one structured log
 * line with the cause and its facts (cluster and affiliate IDs as the
 * request lines carry them, never the encrypted data). A change is reported
 * by the instance that applied it, once.
 *
 * @since 0.1.0
 */
import type { Fiber } from "effect"
import { Effect, LogLevel, Metric, References } from "effect"
import type { ChangeCause, ChangeRecord, WatchEndCause } from "../../ports/ChangeCause.ts"
import { changeCauses, watchEndCauses } from "../../ports/ChangeCause.ts"
import { formatIp } from "./clientAddress.ts"

/**
 * `discovery_changes_total{cause}`: changes applied by this instance, by cause.
 *
 * @category metrics
 * @since 0.1.0
 */
export const changesTotal = Metric.counter("discovery_changes_total", {
  description:
    "Changes applied by this instance, by cause: created, data_changed, endpoints_added, ttl_refreshed, endpoint_expired, affiliate_expired, deleted, cluster_dropped",
  incremental: true
})

/**
 * `discovery_watch_endings_total{cause}`: watches of this instance that ended, by cause.
 *
 * @category metrics
 * @since 0.1.0
 */
export const watchEndingsTotal = Metric.counter("discovery_watch_endings_total", {
  description: "Watches that ended, by cause: cut_off, client_gone, shutdown, thread_stopped, backend_unavailable",
  incremental: true
})

const changeCounters = Object.fromEntries(
  changeCauses.map((cause) => [cause, Metric.withAttributes(changesTotal, { cause })])
) as Record<ChangeCause, Metric.Metric<number, unknown>>

const endingCounters = Object.fromEntries(
  watchEndCauses.map((cause) => [cause, Metric.withAttributes(watchEndingsTotal, { cause })])
) as Record<WatchEndCause, Metric.Metric<number, unknown>>

/**
 * The message of each cause's log line.
 *
 * @category models
 * @since 0.1.0
 */
export const changeMessages: Record<ChangeCause, string> = {
  created: "affiliate created",
  data_changed: "affiliate data changed",
  endpoints_added: "affiliate endpoints added",
  ttl_refreshed: "affiliate TTL refreshed",
  endpoint_expired: "affiliate endpoints expired",
  affiliate_expired: "affiliate expired",
  deleted: "affiliate deleted",
  cluster_dropped: "cluster dropped"
}

const iso = (millis: number): string => new Date(millis).toISOString()

/**
 * The fields of a change's log line (and of its row on the inspect page):
 * only the facts its cause has.
 *
 * @category models
 * @since 0.1.0
 */
export const changeFields = (record: ChangeRecord): Record<string, string | number> => {
  const fields: Record<string, string | number> = { cause: record.cause, cluster_id: record.clusterId }
  if (record.affiliateId !== undefined) fields.affiliate_id = record.affiliateId
  if (record.revision !== undefined) fields.revision = record.revision
  if (record.ttlMillis !== undefined) fields.ttl_ms = record.ttlMillis
  if (record.expiresAt !== undefined) fields.expires_at = iso(record.expiresAt)
  if (record.leftMillis !== undefined) fields.left_ms = record.leftMillis
  if (record.endpoints !== undefined) fields.endpoints = record.endpoints
  if (record.clientAddress !== undefined) fields.client_ip = formatIp(record.clientAddress)
  if (record.instance !== undefined) fields.instance = record.instance
  return fields
}

const debugOff = (fiber: Fiber.Fiber<unknown, unknown>) =>
  LogLevel.isGreaterThan(fiber.getRef(References.MinimumLogLevel), "Debug")

/**
 * Counts one change and, at debug level, logs it.
 *
 * @category reporting
 * @since 0.1.0
 */
export const reportChange = (record: ChangeRecord): Effect.Effect<void> =>
  Effect.withFiber((fiber) => {
    // on the hot path (every AffiliateUpdate): counted in place, and no log line built unless it is written
    changeCounters[record.cause].updateUnsafe(1, fiber.context)
    if (debugOff(fiber)) return Effect.void
    return Effect.logDebug(changeMessages[record.cause]).pipe(Effect.annotateLogs(changeFields(record)))
  })

/**
 * Counts and logs the changes of one step (a delete, a GC pass).
 *
 * @category reporting
 * @since 0.1.0
 */
export const reportChanges = (records: ReadonlyArray<ChangeRecord>): Effect.Effect<void> =>
  records.length === 0 ? Effect.void : Effect.forEach(records, reportChange, { discard: true })

/**
 * Counts one watch that ended and, at debug level, logs it.
 *
 * @category reporting
 * @since 0.1.0
 */
export const reportWatchEnd = (clusterId: string, cause: WatchEndCause, openedMillis: number): Effect.Effect<void> =>
  Effect.withFiber((fiber) => {
    endingCounters[cause].updateUnsafe(1, fiber.context)
    if (debugOff(fiber)) return Effect.void
    return Effect.logDebug("watch ended").pipe(
      Effect.annotateLogs({ cause, cluster_id: clusterId, open_ms: Math.max(0, Math.round(openedMillis)) })
    )
  })
