/**
 * The reference model the validators replay a history against: the view each
 * watch (and through it each logical watcher) holds after every message, the
 * point (epoch, revision) it stands at, whether its start is complete and
 * whether its view is known exactly. Also the run's checkpoints (each a
 * quiesce record and the final record that closes it; the last one is the end
 * of the run), the helpers that compare views and lists as sets, and the
 * intervals during which watches were open. Everything here is a pure
 * function of the history, which it takes in time order, as it is read.
 */
import { createHash } from "node:crypto"
import type {
  AffiliateRecord,
  FinalRecord,
  HistoryRecord,
  QuiesceRecord,
  RunRecord,
  Time,
  WatchEndRecord,
  WatchMessageRecord,
  WatchOpenRecord
} from "./history.ts"
import { timeOf } from "./history.ts"

/** The run's settings, or undefined when the history has no run record. */
export const runOf = (history: ReadonlyArray<HistoryRecord>): RunRecord | undefined =>
  history.find((record): record is RunRecord => record.type === "run")

/** Every `final` record, in history order: one per checkpoint. */
export const finalsOf = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<FinalRecord> =>
  history.filter((record): record is FinalRecord => record.type === "final")

/** The last `final` record (the end of the run), or undefined when the run never wrote one. */
export const finalOf = (history: ReadonlyArray<HistoryRecord>): FinalRecord | undefined =>
  history.findLast((record): record is FinalRecord => record.type === "final")

/** The last `quiesce` record, or undefined when the run never wrote one. */
export const quiesceOf = (history: ReadonlyArray<HistoryRecord>): QuiesceRecord | undefined =>
  history.findLast((record): record is QuiesceRecord => record.type === "quiesce")

/** When the run ended: its last `final` record, else its last record. */
export const runEnd = (history: ReadonlyArray<HistoryRecord>): Time =>
  finalOf(history)?.at ?? history.reduce((latest, record) => Math.max(latest, timeOf(record)), 0)

/**
 * A checkpoint: the writers paused at its quiesce record, the run waited
 * (bounded) for everything to agree, then recorded its final record, a
 * node-view of each Go node just before it and the gauges just after it;
 * then the traffic resumed. Lists, views and gauges agree only at these.
 */
export interface Checkpoint {
  /** Its place among the run's checkpoints, from 0 (the order of their final records). */
  readonly index: number
  /** The latest quiesce record before the final record; undefined when there is none. */
  readonly quiesce: QuiesceRecord | undefined
  readonly final: FinalRecord
  /** When the next quiesce record came (Infinity when none did): the checkpoint's gauges come before it. */
  readonly until: Time
}

/** The run's checkpoints in order: each final record with the latest quiesce record before it. The last is the end of the run. */
export const checkpointsOf = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<Checkpoint> => {
  const checkpoints: Array<{ index: number; quiesce: QuiesceRecord | undefined; final: FinalRecord; until: Time }> = []
  let quiesce: QuiesceRecord | undefined
  let waiting = 0
  for (const record of history) {
    if (record.type === "quiesce") {
      quiesce = record
      for (; waiting < checkpoints.length; waiting++) checkpoints[waiting]!.until = record.at
    } else if (record.type === "final")
      checkpoints.push({ index: checkpoints.length, quiesce, final: record, until: Number.POSITIVE_INFINITY })
  }
  return checkpoints
}

/** A checkpoint as a message names it: "checkpoint 2 (final record at 350 ms)", counted from 1. */
export const showCheckpoint = (checkpoint: Checkpoint): string =>
  `checkpoint ${checkpoint.index + 1} (final record at ${checkpoint.final.at} ms)`

/** The list of `cluster` on `instance` in a final record; undefined when that instance listed nothing at all. */
export const finalList = (
  final: FinalRecord,
  instance: string,
  cluster: string
): ReadonlyArray<AffiliateRecord> | undefined => {
  const lists = final.lists[instance]
  return lists === undefined ? undefined : (lists[cluster] ?? [])
}

/** The instance whose lists in a final record stand for the shared state: the first of the run's instances that listed. */
export const referenceInstance = (run: RunRecord, final: FinalRecord): string | undefined =>
  run.instances.find((instance) => final.lists[instance] !== undefined) ?? Object.keys(final.lists)[0]

/**
 * What one state holds: the whole run for a shared backend (Redis), one
 * instance for the memory backend, where every instance has its own clusters.
 */
export const stateOf = (run: RunRecord, instance: string, cluster: string): string =>
  run.backend === "memory" ? `${instance}/${cluster}` : cluster

/** An (epoch, revision) a watch can stand at. */
export interface Point {
  readonly epoch: string
  readonly revision: number
}

/** A string that names a point, for use as a map key. */
export const pointKey = (point: Point): string => `${point.revision}@${point.epoch}`

/** Whether two points are the same (two missing points are not). */
export const samePoint = (a: Point | undefined, b: Point | undefined): boolean =>
  a !== undefined && b !== undefined && a.epoch === b.epoch && a.revision === b.revision

/** A point as a message prints it: `(epoch, revision)`. */
export const showPoint = (point: Point): string => `(${point.epoch}, ${point.revision})`

/** The affiliates a watcher holds or a List returned, by ID. */
export type View = ReadonlyMap<string, AffiliateRecord>

/** An affiliate's content as a string: ID, data and endpoints as a set, so two equal affiliates give one key. */
export const affiliateKey = (affiliate: AffiliateRecord): string =>
  JSON.stringify([affiliate.id, affiliate.data, [...new Set(affiliate.endpoints)].sort()])

/** Whether two affiliate records are the same: same ID, same data, same endpoints as a set. */
export const sameAffiliate = (a: AffiliateRecord, b: AffiliateRecord): boolean => affiliateKey(a) === affiliateKey(b)

/** The view a list of affiliates makes (a later record of one ID replaces an earlier one). */
export const viewOf = (affiliates: ReadonlyArray<AffiliateRecord>): View =>
  new Map(affiliates.map((affiliate) => [affiliate.id, affiliate]))

/** How two views differ: the IDs only the first holds, only the second holds, and held by both with other content. */
export interface ViewDifference {
  readonly onlyFirst: ReadonlyArray<string>
  readonly onlySecond: ReadonlyArray<string>
  readonly changed: ReadonlyArray<string>
}

/** The difference between two views, each ID list sorted. */
export const viewDifference = (first: View, second: View): ViewDifference => {
  const onlyFirst: Array<string> = []
  const changed: Array<string> = []
  for (const [id, affiliate] of first) {
    const other = second.get(id)
    if (other === undefined) onlyFirst.push(id)
    else if (!sameAffiliate(affiliate, other)) changed.push(id)
  }
  const onlySecond = [...second.keys()].filter((id) => !first.has(id))
  return { onlyFirst: onlyFirst.sort(), onlySecond: onlySecond.sort(), changed: changed.sort() }
}

/** Whether two views hold the same affiliates (compared as sets of records). */
export const sameView = (first: View, second: View): boolean => {
  if (first.size !== second.size) return false
  const difference = viewDifference(first, second)
  return difference.onlyFirst.length + difference.onlySecond.length + difference.changed.length === 0
}

/** Whether two lists hold the same affiliates, as sets. */
export const sameList = (first: ReadonlyArray<AffiliateRecord>, second: ReadonlyArray<AffiliateRecord>): boolean =>
  sameView(viewOf(first), viewOf(second))

/** A short list of IDs for a message: sorted, at most `limit` of them, then how many more. */
export const showIds = (ids: Iterable<string>, limit = 8): string => {
  const all = [...ids].sort()
  if (all.length === 0) return "none"
  const shown = all.slice(0, limit).join(", ")
  return all.length > limit ? `${shown} and ${all.length - limit} more` : shown
}

/** A difference in words, naming the two sides: "n3 only in A; n5 only in B; n2 differs". */
export const describeDifference = (difference: ViewDifference, firstName: string, secondName: string): string => {
  const parts: Array<string> = []
  if (difference.onlyFirst.length > 0) parts.push(`${showIds(difference.onlyFirst)} only in ${firstName}`)
  if (difference.onlySecond.length > 0) parts.push(`${showIds(difference.onlySecond)} only in ${secondName}`)
  if (difference.changed.length > 0) parts.push(`${showIds(difference.changed)} with other data or endpoints`)
  return parts.length === 0 ? "no difference" : parts.join("; ")
}

/** Everything recorded about one watch: how it opened, its messages in order, how it ended (if it did). */
export interface WatchLog {
  readonly open: WatchOpenRecord
  readonly messages: ReadonlyArray<WatchMessageRecord>
  readonly end: WatchEndRecord | undefined
}

/** The watches of a history in the order they opened (messages of a watch never opened are left out, wherever its open record sorted). */
export const watchLogs = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<WatchLog> => {
  const logs = new Map<string, { open: WatchOpenRecord; messages: Array<WatchMessageRecord>; end?: WatchEndRecord }>()
  for (const record of history)
    if (record.type === "watch-open" && !logs.has(record.watch)) logs.set(record.watch, { open: record, messages: [] })
  for (const record of history) {
    if (record.type === "watch-msg") logs.get(record.watch)?.messages.push(record)
    else if (record.type === "watch-end") {
      const log = logs.get(record.watch)
      if (log !== undefined && log.end === undefined) log.end = record
    }
  }
  return [...logs.values()].map((log) => ({ open: log.open, messages: log.messages, end: log.end }))
}

/** Whether a message is a delta: one change, neither a snapshot nor a resumed start. */
export const isDelta = (message: WatchMessageRecord): boolean => !message.snapshot && !message.resumed

/** A time interval, both ends included. */
export interface Interval {
  readonly from: Time
  readonly to: Time
}

/** When a watch was open: from its first message to its end record, or to `end` (the run's end) when it never ended. */
export const openInterval = (log: WatchLog, end: Time): Interval | undefined => {
  const first = log.messages[0]
  return first === undefined ? undefined : { from: first.at, to: log.end?.at ?? Math.max(end, first.at) }
}

/**
 * What a message did to its watch: a snapshot part that is not the last, a
 * complete snapshot, a resumed start, a delta, or a start message that came
 * after the start (a broken stream).
 */
export type StepKind = "snapshot-part" | "snapshot" | "resumed" | "delta" | "late-start"

/** A watch (and its watcher) right after one message. */
export interface Step {
  readonly log: WatchLog
  readonly watcher: string
  readonly message: WatchMessageRecord
  /** The message's index in its watch. */
  readonly index: number
  readonly kind: StepKind
  /** Where the watch stands: undefined until its start is complete. */
  readonly point: Point | undefined
  /** Whether the watch's start is complete (a whole snapshot, or a resumed message). */
  readonly complete: boolean
  /** Whether the view is exactly what the server held at `point` (the start and every change since applied in order). */
  readonly known: boolean
  /** The view after the message; it changes as the replay goes on, so copy it to keep it. */
  readonly view: View
  /** A digest of the view as a set: equal views have equal fingerprints. */
  readonly fingerprint: number
}

/** Where one watch stood after its last message. */
export interface WatchReplay {
  readonly log: WatchLog
  readonly start: "snapshot" | "resumed" | "delta" | undefined
  /** The point its start stood at (the snapshot's or the resumed message's). */
  readonly startPoint: Point | undefined
  /** When its start became complete. */
  readonly startedAt: Time | undefined
  readonly point: Point | undefined
  readonly complete: boolean
  readonly known: boolean
  readonly view: View
  readonly fingerprint: number
}

const fingerprintModulus = 2 ** 48

const affiliateFingerprint = (affiliate: AffiliateRecord): number =>
  Number.parseInt(createHash("sha256").update(affiliateKey(affiliate)).digest("hex").slice(0, 12), 16)

interface WatchState {
  log: WatchLog
  start: "snapshot" | "resumed" | "delta" | undefined
  startPoint: Point | undefined
  startedAt: Time | undefined
  point: Point | undefined
  complete: boolean
  known: boolean
  view: Map<string, AffiliateRecord>
  fingerprint: number
  index: number
}

const put = (state: WatchState, affiliate: AffiliateRecord): void => {
  remove(state, affiliate.id)
  state.view.set(affiliate.id, affiliate)
  state.fingerprint = (state.fingerprint + affiliateFingerprint(affiliate)) % fingerprintModulus
}

const remove = (state: WatchState, id: string): void => {
  const old = state.view.get(id)
  if (old === undefined) return
  state.view.delete(id)
  state.fingerprint = (state.fingerprint - affiliateFingerprint(old) + fingerprintModulus) % fingerprintModulus
}

const applyDelta = (state: WatchState, message: WatchMessageRecord): void => {
  const [affiliate] = message.affiliates
  if (affiliate === undefined) return
  if (message.deleted) remove(state, affiliate.id)
  else put(state, affiliate)
}

const pointOf = (message: WatchMessageRecord): Point => ({ epoch: message.epoch, revision: message.revision })

/** Applies a watch's first message; `current` is the watch its watcher last applied a message through. */
const applyFirst = (state: WatchState, message: WatchMessageRecord, current: WatchState | undefined): StepKind => {
  if (message.snapshot) {
    state.start = "snapshot"
    state.startPoint = pointOf(message)
    for (const affiliate of message.affiliates) put(state, affiliate)
    if (message.more) return "snapshot-part"
    state.complete = true
    state.known = true
    state.startedAt = message.at
    state.point = pointOf(message)
    return "snapshot"
  }
  state.complete = true
  state.startedAt = message.at
  state.point = pointOf(message)
  if (message.resumed) {
    state.start = "resumed"
    state.startPoint = pointOf(message)
    if (current !== undefined) {
      state.view = new Map(current.view)
      state.fingerprint = current.fingerprint
      state.known = current.known && samePoint(current.point, state.point)
    }
    return "resumed"
  }
  state.start = "delta"
  applyDelta(state, message)
  return "delta"
}

const applyLater = (state: WatchState, message: WatchMessageRecord): StepKind => {
  if (!state.complete) {
    if (message.snapshot) {
      for (const affiliate of message.affiliates) put(state, affiliate)
      const sameSnapshot = samePoint(state.startPoint, pointOf(message))
      if (message.more) {
        if (!sameSnapshot) state.startPoint = undefined
        return "snapshot-part"
      }
      state.complete = true
      state.known = sameSnapshot
      state.startedAt = message.at
      state.point = pointOf(message)
      return "snapshot"
    }
    state.complete = true
    state.known = false
    state.startedAt = message.at
    state.point = pointOf(message)
    if (!message.resumed) applyDelta(state, message)
    return message.resumed ? "late-start" : "delta"
  }
  if (!isDelta(message)) {
    state.known = false
    state.point = pointOf(message)
    return "late-start"
  }
  const inOrder =
    state.point !== undefined && message.epoch === state.point.epoch && message.revision === state.point.revision + 1
  if (!inOrder) state.known = false
  applyDelta(state, message)
  state.point = pointOf(message)
  return "delta"
}

const newState = (log: WatchLog): WatchState => ({
  log,
  start: undefined,
  startPoint: undefined,
  startedAt: undefined,
  point: undefined,
  complete: false,
  known: false,
  view: new Map(),
  fingerprint: 0,
  index: 0
})

/**
 * The replay itself: every watch message in history order, `before` seeing
 * the states before each message is applied and `visit` each step after.
 * Returns the logs and the states the watches ended in, by watch ID.
 */
const replayStates = (
  history: ReadonlyArray<HistoryRecord>,
  visit?: (step: Step) => void,
  before?: (message: WatchMessageRecord, states: ReadonlyMap<string, WatchState>) => void
): { readonly logs: ReadonlyMap<string, WatchLog>; readonly states: ReadonlyMap<string, WatchState> } => {
  const logs = new Map(watchLogs(history).map((log) => [log.open.watch, log]))
  const states = new Map<string, WatchState>()
  const current = new Map<string, WatchState>()
  for (const record of history) {
    if (record.type !== "watch-msg") continue
    const log = logs.get(record.watch)
    if (log === undefined) continue
    before?.(record, states)
    let state = states.get(record.watch)
    if (state === undefined) {
      state = newState(log)
      states.set(record.watch, state)
    }
    const watcher = log.open.watcher
    const kind = state.index === 0 ? applyFirst(state, record, current.get(watcher)) : applyLater(state, record)
    if (state.complete) current.set(watcher, state)
    visit?.({
      log,
      watcher,
      message: record,
      index: state.index,
      kind,
      point: state.point,
      complete: state.complete,
      known: state.known,
      view: state.view,
      fingerprint: state.fingerprint
    })
    state.index++
  }
  return { logs, states }
}

/**
 * Replays every watch of a history in the order its messages arrived, calling
 * `visit` after each message. A watch's view starts from its snapshot; a
 * resumed watch starts from the view its watcher held (through the watch it
 * last applied a message from), and that view is known only when the watcher
 * stood exactly at the resumed point with a known view. A change out of order
 * (another epoch, a gap, a repeat) or a start message after the start makes
 * the rest of that watch's views unknown. Returns where each watch ended up,
 * by watch ID.
 */
export const replay = (
  history: ReadonlyArray<HistoryRecord>,
  visit?: (step: Step) => void
): ReadonlyMap<string, WatchReplay> => {
  const { logs, states } = replayStates(history, visit)
  const replays = new Map<string, WatchReplay>()
  for (const [watch, log] of logs) replays.set(watch, states.get(watch) ?? newState(log))
  return replays
}

/** A copy of a watch's state, to keep. */
const frozen = (state: WatchState): WatchReplay => ({
  log: state.log,
  start: state.start,
  startPoint: state.startPoint,
  startedAt: state.startedAt,
  point: state.point,
  complete: state.complete,
  known: state.known,
  view: new Map(state.view),
  fingerprint: state.fingerprint
})

/**
 * Where each watch stood at each of `times` (after every message at or
 * before it), in one replay: for each time, by watch ID, the watches `keep`
 * accepts for it (a watch with no message by then is left out). The same as
 * replaying the records up to each time, as the history is in time order;
 * `keep` spares copying the views of watches the caller does not look at.
 */
export const replayAt = (
  history: ReadonlyArray<HistoryRecord>,
  times: ReadonlyArray<Time>,
  keep: (log: WatchLog, at: Time) => boolean = () => true
): ReadonlyArray<ReadonlyMap<string, WatchReplay>> => {
  const order = [...times.keys()].sort((a, b) => times[a]! - times[b]!)
  const results = times.map(() => new Map<string, WatchReplay>())
  let next = 0
  const captureBefore = (at: Time, states: ReadonlyMap<string, WatchState>, last = false): void => {
    for (; next < order.length && (last || times[order[next]!]! < at); next++) {
      const time = times[order[next]!]!
      const result = results[order[next]!]!
      for (const [watch, state] of states) if (keep(state.log, time)) result.set(watch, frozen(state))
    }
  }
  const { states } = replayStates(history, undefined, (message, states) => captureBefore(message.at, states))
  captureBefore(Number.POSITIVE_INFINITY, states, true)
  return results
}

/** The views watches held right after each of `messages` (copies), by message; one replay for all of them. */
export const viewsAfter = (
  history: ReadonlyArray<HistoryRecord>,
  messages: ReadonlySet<WatchMessageRecord>
): ReadonlyMap<WatchMessageRecord, View> => {
  const views = new Map<WatchMessageRecord, View>()
  if (messages.size === 0) return views
  replay(history, (step) => {
    if (messages.has(step.message)) views.set(step.message, new Map(step.view))
  })
  return views
}
