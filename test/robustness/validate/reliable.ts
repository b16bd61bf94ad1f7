/**
 * The *reliable* validator: a watch that keeps reading gets every change of
 * its epoch after its start until it ends, within the run's delivery bound
 * of any other watch getting it. A watch that stopped reading and is still
 * open at the run's end (its last checkpoint's final record) must have caught
 * up by then. A server never ends a watch with OK, and never leaves one
 * hanging without its start.
 */
import type { HistoryRecord, Time, Violation, WatchMessageRecord } from "../history.ts"
import { finalOf, isDelta, replay, runEnd, runOf, showPoint, type WatchLog, type WatchReplay } from "../model.ts"

/** The validator's name, as its violations carry it. */
export const name = "reliable"

/** The rule, in one line. */
export const statement =
  "A reading watch receives every revision of its epoch after its start that any watch received at least deliveryMillis before it ended; a non-reading watch still open at the end is current; a server never ends a watch with OK nor leaves one open without its start."

/** The earliest receipt of each revision of each epoch, as a delta by any watch. */
const firstReceipts = (history: ReadonlyArray<HistoryRecord>): Map<string, Map<number, WatchMessageRecord>> => {
  const receipts = new Map<string, Map<number, WatchMessageRecord>>()
  for (const record of history) {
    if (record.type !== "watch-msg" || !isDelta(record)) continue
    const revisions = receipts.get(record.epoch) ?? new Map<number, WatchMessageRecord>()
    receipts.set(record.epoch, revisions)
    const earlier = revisions.get(record.revision)
    if (earlier === undefined || record.at < earlier.at) revisions.set(record.revision, record)
  }
  return receipts
}

/** Revisions as short ranges: "4, 6-9". */
const showRevisions = (revisions: ReadonlyArray<number>): string => {
  const ranges: Array<string> = []
  let index = 0
  while (index < revisions.length) {
    const from = revisions[index]!
    let to = from
    while (revisions[index + 1] === to + 1) to = revisions[++index]!
    ranges.push(from === to ? `${from}` : `${from}-${to}`)
    index++
  }
  return ranges.join(", ")
}

const describeWatch = (log: WatchLog): string =>
  `watch ${log.open.watch} (watcher ${log.open.watcher}, instance ${log.open.instance}, cluster ${log.open.cluster})`

/** The revisions of the watch's epoch after its start that others received by `deadline` and it did not by `readBy`. */
const missed = (
  watch: WatchReplay,
  receipts: ReadonlyMap<string, ReadonlyMap<number, WatchMessageRecord>>,
  deadline: Time,
  readBy: Time
): Array<WatchMessageRecord> => {
  const start = watch.startPoint
  if (start === undefined) return []
  const own = new Set(
    watch.log.messages
      .filter((message) => isDelta(message) && message.epoch === start.epoch && message.at <= readBy)
      .map((message) => message.revision)
  )
  const required = [...(receipts.get(start.epoch) ?? new Map<number, WatchMessageRecord>()).values()]
  return required
    .filter((message) => message.revision > start.revision && message.at <= deadline && !own.has(message.revision))
    .sort((a, b) => a.revision - b.revision)
}

/** Checks delivery to every watch, how server-ended watches ended, and that no watch hangs without its start. */
export const reliable = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<Violation> => {
  const run = runOf(history)
  if (run === undefined) return [{ validator: name, message: "the history has no run record" }]
  const delivery = run.bounds.deliveryMillis
  // The end of the run: its last checkpoint's final record.
  const final = finalOf(history)
  const horizon = runEnd(history)
  const receipts = firstReceipts(history)
  const violations: Array<Violation> = []
  for (const watch of replay(history).values()) {
    const { open, end } = watch.log
    if (end?.by === "server" && (end.code === undefined || end.code === 0))
      violations.push({
        validator: name,
        message: `${describeWatch(watch.log)} was ended by the server at ${end.at} ms with ${end.code === undefined ? "no status code" : "OK"}`,
        at: end.at,
        records: [open, end]
      })
    if (!watch.complete) {
      const endedInTime = end !== undefined && end.at <= horizon
      if (!endedInTime && open.start + delivery <= horizon)
        violations.push({
          validator: name,
          message: `${describeWatch(watch.log)} opened at ${open.start} ms ${watch.log.messages.length === 0 ? "never got a first message" : "never got its whole snapshot"} and was still open at ${horizon} ms`,
          at: horizon,
          records: [open, ...watch.log.messages.slice(0, 2)]
        })
      continue
    }
    const start = watch.startPoint
    if (start === undefined) continue
    if (open.reads) {
      const until = end?.at ?? horizon
      const missing = missed(watch, receipts, until - delivery, until)
      if (missing.length > 0)
        violations.push({
          validator: name,
          message:
            `${describeWatch(watch.log)}, started at ${showPoint(start)} and open until ${until} ms, never received ` +
            `revision ${showRevisions(missing.map((message) => message.revision))} of epoch ${start.epoch}, which ` +
            `another watch received by ${missing[0]!.at} ms`,
          at: missing[0]!.at + delivery,
          records: [open, ...missing.slice(0, 3), ...(end === undefined ? [] : [end])]
        })
    } else if (final !== undefined && (end === undefined || end.at > final.at)) {
      const missing = missed(watch, receipts, final.at - delivery, final.at)
      if (missing.length > 0)
        violations.push({
          validator: name,
          message:
            `${describeWatch(watch.log)} (not reading for a while) was still open at the final record (${final.at} ms) ` +
            `but never received revision ${showRevisions(missing.map((message) => message.revision))} of epoch ${start.epoch}`,
          at: final.at,
          records: [open, ...missing.slice(0, 3), final]
        })
    }
  }
  return violations
}
