/**
 * The *one history per epoch* validator: an epoch names one sequence of
 * changes, so every watch that received revision r of epoch e received the
 * same change, and every watcher that stands at (e, r) holds the same view.
 * The second half catches a backend that renumbered revisions under an epoch
 * it kept (a Redis restarted from an older file): a watcher that resumes there
 * goes on from a view a fresh watcher never had.
 */
import type { HistoryRecord, Violation, WatchMessageRecord } from "../history.ts"
import {
  affiliateKey,
  describeDifference,
  isDelta,
  pointKey,
  replay,
  showIds,
  showPoint,
  type Step,
  type View,
  viewsAfter,
  viewDifference,
  type WatchLog,
  watchLogs
} from "../model.ts"

/** The validator's name, as its violations carry it. */
export const name = "oneHistory"

/** The rule, in one line. */
export const statement =
  "Within one epoch a revision is one change: every watch that receives (epoch, r) as a delta receives the same change, and every watcher that stands at (epoch, r) with a view it knows holds the same affiliates."

const changeKey = (message: WatchMessageRecord): string => {
  const [affiliate] = message.affiliates
  if (affiliate === undefined) return "nothing"
  return message.deleted ? JSON.stringify(["deleted", affiliate.id]) : affiliateKey(affiliate)
}

const describeChange = (message: WatchMessageRecord): string => {
  const [affiliate] = message.affiliates
  if (affiliate === undefined) return "a delta with no affiliate"
  if (message.deleted) return `delete ${affiliate.id}`
  return `update ${affiliate.id} (data ${affiliate.data || "none"}, ${new Set(affiliate.endpoints).size} endpoints)`
}

/** (a): the deltas at one point, grouped by the change they carry; more than one group is a violation. */
const sameChanges = (history: ReadonlyArray<HistoryRecord>, logs: ReadonlyMap<string, WatchLog>): Array<Violation> => {
  const atPoint = new Map<string, Map<string, WatchMessageRecord>>()
  for (const record of history) {
    if (record.type !== "watch-msg" || !isDelta(record) || !logs.has(record.watch)) continue
    const key = pointKey(record)
    const changes = atPoint.get(key) ?? new Map<string, WatchMessageRecord>()
    atPoint.set(key, changes)
    const change = changeKey(record)
    if (!changes.has(change)) changes.set(change, record)
  }
  const violations: Array<Violation> = []
  for (const changes of atPoint.values()) {
    if (changes.size < 2) continue
    const messages = [...changes.values()]
    const first = messages[0]!
    const described = messages
      .slice(0, 4)
      .map((message) => `watch ${message.watch} received ${describeChange(message)} at ${message.at} ms`)
    violations.push({
      validator: name,
      message: `${changes.size} different changes at ${showPoint(first)}: ${described.join("; ")}`,
      at: messages[1]!.at,
      records: messages.slice(0, 4).flatMap((message) => [logs.get(message.watch)!.open, message])
    })
  }
  return violations
}

interface FirstAtPoint {
  readonly step: Pick<Step, "watcher" | "log" | "message">
  readonly fingerprint: number
  readonly size: number
}

interface Divergence {
  readonly reference: FirstAtPoint
  readonly step: Pick<Step, "watcher" | "log" | "message">
  readonly view: View
}

const describeStep = (step: Pick<Step, "watcher" | "log">): string =>
  `watcher ${step.watcher} (watch ${step.log.open.watch} on ${step.log.open.instance})`

/** (b): the first view known at each point; a later known view there that differs is a violation (once per watcher and epoch). */
const sameViews = (history: ReadonlyArray<HistoryRecord>): Array<Violation> => {
  const first = new Map<string, FirstAtPoint>()
  const divergences: Array<Divergence> = []
  const reported = new Set<string>()
  replay(history, (step) => {
    if (!step.known || step.point === undefined || step.kind === "snapshot-part" || step.kind === "late-start") return
    const key = pointKey(step.point)
    const reference = first.get(key)
    if (reference === undefined) {
      first.set(key, { step, fingerprint: step.fingerprint, size: step.view.size })
      return
    }
    if (reference.fingerprint === step.fingerprint && reference.size === step.view.size) return
    const watcherEpoch = JSON.stringify([step.watcher, step.point.epoch])
    if (reported.has(watcherEpoch)) return
    reported.add(watcherEpoch)
    divergences.push({ reference, step, view: new Map(step.view) })
  })
  const referenceViews = viewsAfter(history, new Set(divergences.map(({ reference }) => reference.step.message)))
  return divergences.map(({ reference, step, view }) => {
    const referenceView = referenceViews.get(reference.step.message) ?? new Map()
    const difference = describeDifference(
      viewDifference(view, referenceView),
      `${step.watcher}'s`,
      `${reference.step.watcher}'s`
    )
    const point = showPoint(step.message)
    return {
      validator: name,
      message:
        `${describeStep(step)} stands at ${point} at ${step.message.at} ms holding ${showIds(view.keys())}, ` +
        `but ${describeStep(reference.step)} held ${showIds(referenceView.keys())} at ${point} ` +
        `(${reference.step.message.at} ms): ${difference}`,
      at: step.message.at,
      records: [reference.step.log.open, reference.step.message, step.log.open, step.message]
    }
  })
}

/** Checks that every revision of an epoch is one change and every point of an epoch one view, whichever watch saw it. */
export const oneHistory = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<Violation> => {
  const logs = new Map(watchLogs(history).map((log) => [log.open.watch, log]))
  return [...sameChanges(history, logs), ...sameViews(history)]
}
