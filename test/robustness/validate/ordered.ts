/**
 * The *ordered* validator: each watch's stream, read on its own, is well
 * formed. It starts with a snapshot (in one or more parts sharing a revision)
 * or a resumed message, keeps one non-empty epoch, and then carries exactly
 * the revisions after its start, one at a time, each once.
 */
import type { HistoryRecord, Violation, WatchMessageRecord } from "../history.ts"
import { type WatchLog, watchLogs } from "../model.ts"

/** The validator's name, as its violations carry it. */
export const name = "ordered"

/** The rule, in one line. */
export const statement =
  "Every watch starts with one snapshot (its parts sharing one revision) or one resumed message, keeps one non-empty epoch, and then carries revisions start+1, start+2, … one at a time: none missing, none twice, none going back, no second start."

const describeWatch = (log: WatchLog): string =>
  `watch ${log.open.watch} (watcher ${log.open.watcher}, instance ${log.open.instance}, cluster ${log.open.cluster})`

const checkWatch = (log: WatchLog): Array<Violation> => {
  const violations: Array<Violation> = []
  const report = (message: WatchMessageRecord, text: string, ...others: ReadonlyArray<HistoryRecord>): void => {
    violations.push({
      validator: name,
      message: `${describeWatch(log)}: ${text}`,
      at: message.at,
      records: [log.open, ...others, message]
    })
  }
  const [first] = log.messages
  if (first === undefined) return violations
  if (first.snapshot && first.resumed) report(first, "its first message is both a snapshot and resumed")
  else if (!first.snapshot && !first.resumed)
    report(first, `its first message is a delta (revision ${first.revision}), not a snapshot or resumed message`)
  if (first.resumed && first.affiliates.length > 0)
    report(first, `its resumed message carries ${first.affiliates.length} affiliates (it should carry none)`)
  let snapshotting = first.snapshot && first.more
  let last = first.revision
  let previous = first
  for (const message of log.messages) {
    if (message.epoch === "") report(message, `a message at revision ${message.revision} has an empty epoch`)
    else if (message.epoch !== first.epoch)
      report(message, `epoch changed from ${first.epoch} to ${message.epoch} at revision ${message.revision}`, first)
    if (message === first) continue
    if (snapshotting) {
      if (message.snapshot) {
        if (message.revision !== first.revision)
          report(
            message,
            `a snapshot part has revision ${message.revision} where the snapshot's first part has ${first.revision}`,
            first
          )
        snapshotting = message.more
        previous = message
        continue
      }
      report(message, `a ${message.resumed ? "resumed message" : "delta"} came before the snapshot's last part`, first)
      snapshotting = false
    }
    if (message.snapshot || message.resumed) {
      report(
        message,
        `a ${message.snapshot ? "snapshot" : "resumed message"} at revision ${message.revision} came after the start`,
        first
      )
      previous = message
      continue
    }
    if (message.affiliates.length !== 1)
      report(message, `the delta at revision ${message.revision} carries ${message.affiliates.length} affiliates`)
    if (message.revision > last + 1) {
      const missing = message.revision === last + 2 ? `${last + 1}` : `${last + 1}-${message.revision - 1}`
      report(message, `gap: revision ${message.revision} came after ${last}, so ${missing} never came`, previous)
      last = message.revision
    } else if (message.revision === last) {
      report(message, `duplicate: revision ${message.revision} came twice`, previous)
    } else if (message.revision < last) {
      report(message, `went back: revision ${message.revision} came after ${last}`, previous)
    } else {
      last = message.revision
    }
    previous = message
  }
  return violations
}

/** Checks every watch's messages on their own: the start, the epoch, and revisions one by one after the start. */
export const ordered = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<Violation> =>
  watchLogs(history).flatMap(checkWatch)
