/**
 * One Watch call with every message and its end recorded, and the view a
 * client builds from them: a snapshot (whole once its last part is in)
 * replaces the view, a resumed start keeps it, each change must carry the
 * next revision. A change that does not is not applied: the watch is
 * cancelled and its watcher starts again without a resume point, as our
 * client does.
 */
import type { WatchResponse } from "../../../src/gen/discovery/server/cluster_pb.ts"
import type { AffiliateRecord, WatchMessageRecord } from "../history.ts"
import { affiliateRecord, type TrafficContext } from "./traffic.ts"
import type { RecordWriter } from "./historyFiles.ts"
import type { WireClient } from "./wireClient.ts"

/** Where a watcher stands: the epoch and revision of the last message it applied. */
export interface Point {
  readonly epoch: string
  readonly revision: number
}

/** What a watcher holds between its watches. */
export interface WatcherState {
  point: Point | undefined
  view: Map<string, AffiliateRecord>
}

/** A watch in progress. */
export interface RecordedWatch {
  readonly id: string
  /** True once its start (snapshot or resumed) is complete. */
  readonly started: () => boolean
  /** Resolves when it ended (by the server, the connection or the client). */
  readonly ended: Promise<void>
  readonly isEnded: () => boolean
  /** Stops reading (HTTP/2 flow control holds the server back). */
  readonly pause: () => void
  readonly resume: () => void
  /** Ends it from the client's side. */
  readonly cancel: () => void
}

/** What opening a watch needs. */
export interface WatchOpening {
  readonly context: TrafficContext
  readonly write: RecordWriter
  readonly client: WireClient
  readonly instance: string
  readonly watcher: string
  readonly id: string
  readonly cluster: string
  readonly state: WatcherState
  readonly resume: Point | undefined
  readonly reads: boolean
}

/** Opens a watch and records it; the watcher's state follows what it applies. */
export const openRecordedWatch = (opening: WatchOpening): RecordedWatch => {
  const { context, write, id, state } = opening
  write({
    type: "watch-open",
    watch: id,
    watcher: opening.watcher,
    instance: opening.instance,
    cluster: opening.cluster,
    ...(opening.resume === undefined ? {} : { resume: opening.resume }),
    reads: opening.reads,
    start: context.files.now()
  })
  let started = false
  let ended = false
  let cancelled = false
  let snapshot: Map<string, AffiliateRecord> | undefined
  let done: () => void = () => undefined
  const endedPromise = new Promise<void>((resolve) => {
    done = resolve
  })
  const apply = (message: WatchResponse, record: WatchMessageRecord) => {
    if (message.snapshot) {
      snapshot ??= new Map()
      for (const affiliate of record.affiliates) snapshot.set(affiliate.id, affiliate)
      if (!message.more) {
        state.view = snapshot
        state.point = { epoch: record.epoch, revision: record.revision }
        snapshot = undefined
        started = true
      }
      return true
    }
    if (message.resumed) {
      state.point = { epoch: record.epoch, revision: record.revision }
      started = true
      return true
    }
    const point = state.point
    if (!started || point === undefined || record.epoch !== point.epoch || record.revision !== point.revision + 1) {
      state.point = undefined
      return false
    }
    const affiliate = record.affiliates[0]
    if (affiliate !== undefined) {
      if (message.deleted) state.view.delete(affiliate.id)
      else state.view.set(affiliate.id, affiliate)
    }
    state.point = { epoch: point.epoch, revision: record.revision }
    return true
  }
  const call = opening.client.watch(opening.cluster, opening.resume, {
    message: (message) => {
      const record: WatchMessageRecord = {
        type: "watch-msg",
        watch: id,
        at: context.files.now(),
        epoch: message.epoch,
        revision: Number(message.revision),
        snapshot: message.snapshot,
        resumed: message.resumed,
        more: message.more,
        deleted: message.deleted,
        affiliates: message.affiliates.map(affiliateRecord)
      }
      write(record)
      if (!apply(message, record)) cancel()
    },
    end: (code, message) => {
      if (ended) return
      ended = true
      write(
        cancelled
          ? { type: "watch-end", watch: id, at: context.files.now(), by: "client" }
          : { type: "watch-end", watch: id, at: context.files.now(), by: "server", code, message }
      )
      done()
    }
  })
  const cancel = () => {
    if (ended) return
    cancelled = true
    call.cancel()
  }
  return {
    id,
    started: () => started,
    ended: endedPromise,
    isEnded: () => ended,
    pause: call.pause,
    resume: call.resume,
    cancel
  }
}
