/**
 * Where a client's watch stands, so that the next one resumes there: the
 * last event applied and the epoch it belongs to. A service that names no
 * epoch (the original) gives none, and every watch starts from a snapshot.
 *
 * @since 0.1.0
 */
import type { ResumePoint, WatchEvent } from "../../ports/ClusterApi.ts"

/**
 * Whether `event` may be applied after `current`: a change must have the next
 * revision (anything else means the view would be built on the wrong base).
 *
 * @category reconciliation
 * @since 0.1.0
 */
export const continues = (current: ResumePoint | undefined, event: WatchEvent): boolean =>
  current === undefined ||
  (event._tag !== "Updated" && event._tag !== "Deleted") ||
  event.revision === current.revision + 1

/**
 * The resume point once `event` is applied, after `current`.
 *
 * @category reconciliation
 * @since 0.1.0
 */
export const nextResumePoint = (current: ResumePoint | undefined, event: WatchEvent): ResumePoint | undefined => {
  switch (event._tag) {
    case "Snapshot":
      return event.epoch === undefined ? undefined : { epoch: event.epoch, revision: event.revision }
    case "Resumed":
      return { epoch: event.epoch, revision: event.revision }
    default:
      return current === undefined ? undefined : { epoch: current.epoch, revision: event.revision }
  }
}
