/**
 * The *durable* validator: an acknowledged change stays until a later change
 * replaces it, it expires, or the service announces a loss by starting a new
 * epoch. At every checkpoint it looks at each affiliate's updates and deletes
 * that started before the checkpoint's final record and may have taken
 * effect, and judges only what the merge rules fix: presence when every
 * change that could be last is an update not yet expired, absence when all
 * are deletes, and data that one of them (or, after one without data, an
 * earlier change) set. A key reported at one checkpoint is judged again only
 * once it has an acknowledged change that judgment did not count, so one lost
 * update is reported once.
 */
import type {
  AffiliateRecord,
  CallRecord,
  HistoryRecord,
  RunRecord,
  Time,
  Violation,
  WatchMessageRecord
} from "../history.ts"
import {
  type Checkpoint,
  checkpointsOf,
  finalList,
  referenceInstance,
  runOf,
  showCheckpoint,
  stateOf,
  viewOf,
  watchLogs
} from "../model.ts"

/** The validator's name, as its violations carry it. */
export const name = "durable"

/** The rule, in one line. */
export const statement =
  "At every checkpoint, every acknowledged update or delete holds in that checkpoint's final lists unless a later change replaced it, it expired, or (where the run allows loss) a loss was announced after it and by the checkpoint (a new epoch reached the cluster's watchers, or it had none): no lost update, no stale data, no deleted affiliate back."

/**
 * An update or delete that may have taken effect by a checkpoint. One whose
 * outcome is unknown, or that was acknowledged only after the checkpoint's
 * quiesce, may take effect at any time after it started.
 */
interface Op {
  readonly call: CallRecord
  readonly acked: boolean
  readonly end: Time
  readonly data: string
}

/** One affiliate of one state, with every update and delete that may have taken effect on it. */
interface Key {
  readonly id: string
  readonly state: string
  readonly instance: string
  readonly cluster: string
  readonly affiliate: string
  readonly calls: Array<CallRecord>
}

const callsByKey = (history: ReadonlyArray<HistoryRecord>, run: RunRecord): Array<Key> => {
  const keys = new Map<string, Key>()
  for (const record of history) {
    if (record.type !== "call" || record.op === "list" || record.outcome === "failed" || record.affiliate === undefined)
      continue
    const state = stateOf(run, record.instance, record.cluster)
    const id = JSON.stringify([state, record.affiliate])
    const key = keys.get(id) ?? {
      id,
      state,
      instance: record.instance,
      cluster: record.cluster,
      affiliate: record.affiliate,
      calls: []
    }
    keys.set(id, key)
    key.calls.push(record)
  }
  return [...keys.values()]
}

/**
 * The key's changes as a checkpoint sees them: those that started before its
 * final record. The writers were paused at its quiesce, so each ended before
 * it; one acknowledged later counts as one of unknown outcome.
 */
const opsAt = (key: Key, checkpoint: Checkpoint): Array<Op> => {
  const ackedBy = checkpoint.quiesce?.at ?? checkpoint.final.at
  return key.calls
    .filter((call) => call.start < checkpoint.final.at)
    .map((call) => {
      const acked = call.outcome === "ok" && call.end <= ackedBy
      return {
        call,
        acked,
        end: acked ? call.end : Number.POSITIVE_INFINITY,
        data: call.op === "update" ? (call.data ?? "") : ""
      }
    })
}

/** For each state, the first message that carried each epoch. */
const epochsSeen = (
  history: ReadonlyArray<HistoryRecord>,
  run: RunRecord
): Map<string, Map<string, WatchMessageRecord>> => {
  const seen = new Map<string, Map<string, WatchMessageRecord>>()
  for (const log of watchLogs(history)) {
    const state = stateOf(run, log.open.instance, log.open.cluster)
    const epochs = seen.get(state) ?? new Map<string, WatchMessageRecord>()
    seen.set(state, epochs)
    for (const message of log.messages) {
      const earlier = epochs.get(message.epoch)
      if (earlier === undefined || message.at < earlier.at) epochs.set(message.epoch, message)
    }
  }
  return seen
}

const describeOp = (op: Op): string => {
  const call = op.call
  const outcome = op.acked ? "acknowledged" : "unknown-outcome"
  const what = call.op === "delete" ? "delete" : `update (data ${op.data || "none"}, ttl ${call.ttlMillis ?? "?"} ms)`
  return `${outcome} ${what} on ${call.instance} at ${call.start}-${call.end} ms`
}

/**
 * The earliest time the affiliate may expire after the updates that could be
 * last: whichever is applied last leaves its expiry at least its own start
 * plus its TTL (less the clock skew). Undefined when one has no TTL.
 */
const expiresNoSoonerThan = (updates: ReadonlyArray<Op>, skew: number): number | undefined => {
  let earliest = Number.POSITIVE_INFINITY
  for (const op of updates) {
    if (op.call.ttlMillis === undefined) return undefined
    earliest = Math.min(earliest, op.call.start + op.call.ttlMillis - skew)
  }
  return earliest
}

/** For each state, when its watches received messages, in order. */
const messageTimes = (history: ReadonlyArray<HistoryRecord>, run: RunRecord): Map<string, Array<Time>> => {
  const times = new Map<string, Array<Time>>()
  for (const log of watchLogs(history)) {
    const state = stateOf(run, log.open.instance, log.open.cluster)
    const list = times.get(state) ?? []
    times.set(state, list)
    for (const message of log.messages) list.push(message.at)
  }
  for (const list of times.values()) list.sort((a, b) => a - b)
  return times
}

/**
 * Whether a loss after `from` was announced by the checkpoint's final
 * record: a new epoch was first seen in the state meanwhile, or no watch of
 * the state received anything meanwhile (there was no watcher to tell; the
 * next one's start is judged by the other validators).
 */
const lossAnnounced = (
  announcements: ReadonlyMap<string, WatchMessageRecord> | undefined,
  times: ReadonlyArray<Time> | undefined,
  from: Time,
  checkpoint: Checkpoint
): boolean =>
  [...(announcements?.values() ?? [])].some((message) => message.at >= from && message.at <= checkpoint.final.at) ||
  !(times ?? []).some((at) => at >= from && at <= checkpoint.final.at)

/**
 * Judges one affiliate of one state against a checkpoint's list. The changes
 * that could be last are those not ended before the latest start among the
 * acknowledged ones (one of unknown outcome may take effect at any time after
 * its start); when that is one acknowledged change, it is the last word.
 */
const judge = (
  key: Key,
  ops: ReadonlyArray<Op>,
  run: RunRecord,
  checkpoint: Checkpoint,
  list: ReadonlyMap<string, AffiliateRecord>,
  announcements: ReadonlyMap<string, WatchMessageRecord> | undefined,
  times: ReadonlyArray<Time> | undefined
): Violation | undefined => {
  const final = checkpoint.final
  const acked = ops.filter((op) => op.acked)
  if (acked.length === 0) return undefined
  const latestStart = Math.max(...acked.map((op) => op.call.start))
  const candidates = ops.filter((op) => op.end >= latestStart)
  const judgedFrom = Math.min(...candidates.filter((op) => op.acked).map((op) => op.end))
  if (run.lossAllowed && lossAnnounced(announcements, times, judgedFrom, checkpoint)) return undefined
  const entry = list.get(key.affiliate)
  const updates = candidates.filter((op) => op.call.op === "update")
  const deletes = candidates.length - updates.length
  const last =
    candidates.length === 1
      ? `the last word was an ${describeOp(candidates[0]!)}`
      : `the changes that could be last are ${candidates.map(describeOp).join("; ")}`
  const where = `the final list (${final.at} ms)`
  const report = (text: string): Violation => ({
    validator: name,
    message:
      `${showCheckpoint(checkpoint)}: cluster ${key.cluster}${run.backend === "memory" ? ` on ${key.instance}` : ""}, affiliate ${key.affiliate}: ` +
      `${last}, ${text}` +
      (run.lossAllowed
        ? `, and no new epoch announced a loss after ${judgedFrom} ms and by ${final.at} ms`
        : " (this run allows no loss)"),
    at: final.at,
    records: [...candidates.slice(0, 3).map((op) => op.call), final]
  })
  if (entry === undefined) {
    if (deletes > 0) return undefined
    const expiry = expiresNoSoonerThan(updates, run.clockSkewMillis)
    return expiry !== undefined && expiry > final.at
      ? report(`so it cannot expire before ${expiry} ms, but the affiliate is missing from ${where}`)
      : undefined
  }
  if (updates.length === 0) return report(`but the affiliate is back in ${where}`)
  const allowed = new Set(updates.map((op) => op.data).filter((data) => data !== ""))
  if (updates.some((op) => op.data === "")) for (const op of ops) allowed.add(op.data)
  return allowed.has(entry.data) ? undefined : report(`but ${where} shows data ${entry.data || "none"}`)
}

/** A checkpoint's lists as views, by instance and cluster, made once each. */
const listsOf = (
  run: RunRecord,
  checkpoint: Checkpoint
): ((key: Key) => ReadonlyMap<string, AffiliateRecord> | undefined) => {
  const reference = referenceInstance(run, checkpoint.final)
  const views = new Map<string, ReadonlyMap<string, AffiliateRecord>>()
  return (key) => {
    const instance = run.backend === "memory" ? key.instance : reference
    const listed = instance === undefined ? undefined : finalList(checkpoint.final, instance, key.cluster)
    if (listed === undefined) return undefined
    const listKey = JSON.stringify([instance, key.cluster])
    const view = views.get(listKey) ?? viewOf(listed)
    views.set(listKey, view)
    return view
  }
}

/**
 * Checks every acknowledged update and delete against the lists of every
 * checkpoint. A key reported at a checkpoint is judged again only once it has
 * more acknowledged changes than that judgment counted.
 */
export const durable = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<Violation> => {
  const run = runOf(history)
  if (run === undefined) return [{ validator: name, message: "the history has no run record" }]
  const keys = callsByKey(history, run)
  const announcements = epochsSeen(history, run)
  const times = messageTimes(history, run)
  /** Key ID → how many acknowledged changes it had when it was last reported. */
  const reported = new Map<string, number>()
  const violations: Array<Violation> = []
  for (const checkpoint of checkpointsOf(history)) {
    const listOf = listsOf(run, checkpoint)
    for (const key of keys) {
      const ops = opsAt(key, checkpoint)
      const ackedCount = ops.filter((op) => op.acked).length
      if (ackedCount <= (reported.get(key.id) ?? -1)) continue
      const list = listOf(key)
      if (list === undefined) continue
      const violation = judge(key, ops, run, checkpoint, list, announcements.get(key.state), times.get(key.state))
      if (violation === undefined) continue
      violations.push(violation)
      reported.set(key.id, ackedCount)
    }
  }
  return violations
}
