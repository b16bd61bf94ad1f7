/**
 * The *convergent* validator: at every checkpoint (the writers paused, every
 * fault healed) the run settles within its bound and everything agrees.
 * Every instance lists the same affiliates, every reading watch's view equals
 * the list, every Go node sees the list (less itself), and the state gauges
 * count what the lists hold. Between checkpoints the traffic runs, so lists,
 * views and gauges are compared only at a checkpoint's final record (the
 * node-views just before it, the gauges just after it).
 */
import type { FinalRecord, GaugeRecord, HistoryRecord, NodeViewRecord, RunRecord, Time, Violation } from "../history.ts"
import {
  type Checkpoint,
  checkpointsOf,
  describeDifference,
  finalList,
  referenceInstance,
  replayAt,
  runOf,
  sameList,
  showCheckpoint,
  showIds,
  viewDifference,
  viewOf,
  type WatchLog,
  type WatchReplay
} from "../model.ts"

/** The validator's name, as its violations carry it. */
export const name = "convergent"

/** The rule, in one line. */
export const statement =
  "At every checkpoint, within convergeMillis of quiescence, every instance lists the same affiliates, every reading watch open then holds exactly that list, every Go node sees it less itself, and each instance's gauges count it."

/** A violation of one checkpoint, its message led by the checkpoint's name. */
const report = (
  checkpoint: Checkpoint,
  text: string,
  when: Time,
  records: ReadonlyArray<HistoryRecord>
): Violation => ({
  validator: name,
  message: `${showCheckpoint(checkpoint)}: ${text}`,
  at: when,
  records
})

const clustersIn = (checkpoint: Checkpoint): Array<string> =>
  [...new Set(Object.values(checkpoint.final.lists).flatMap((lists) => Object.keys(lists)))].sort()

/** The quiesce records no final record closed: each is a checkpoint that never settled. */
const unsettled = (history: ReadonlyArray<HistoryRecord>): Array<Violation> => {
  const violations: Array<Violation> = []
  let pending: HistoryRecord | undefined
  for (const record of history) {
    if (record.type === "final") pending = undefined
    if (record.type !== "quiesce") continue
    if (pending?.type === "quiesce")
      violations.push({
        validator: name,
        message: `the run never settled: the quiesce record at ${pending.at} ms has no final record before the next quiesce (${record.at} ms)`,
        at: record.at,
        records: [pending, record]
      })
    pending = record
  }
  if (pending?.type === "quiesce")
    violations.push({
      validator: name,
      message: `the run never settled: the quiesce record at ${pending.at} ms has no final record after it`,
      at: pending.at,
      records: [pending]
    })
  return violations
}

/** The time from quiescence to the final record against the bound. */
const settledInTime = (run: RunRecord, checkpoint: Checkpoint): Array<Violation> => {
  const { quiesce, final } = checkpoint
  if (quiesce === undefined || final.at - quiesce.at <= run.bounds.convergeMillis) return []
  return [
    report(
      checkpoint,
      `the run took ${final.at - quiesce.at} ms from quiescence (${quiesce.at} ms) to its final record (${final.at} ms), over the ${run.bounds.convergeMillis} ms bound`,
      final.at,
      [quiesce, final]
    )
  ]
}

/** Every instance's list of each cluster against the reference instance's (not for the memory backend, where each instance has its own state). */
const sameLists = (run: RunRecord, checkpoint: Checkpoint, reference: string): Array<Violation> => {
  const final = checkpoint.final
  const violations: Array<Violation> = []
  for (const instance of run.instances)
    if (final.lists[instance] === undefined)
      violations.push(report(checkpoint, `instance ${instance} has no lists in the final record`, final.at, [final]))
  if (run.backend === "memory") return violations
  for (const cluster of clustersIn(checkpoint)) {
    const expected = finalList(final, reference, cluster) ?? []
    for (const instance of run.instances) {
      const list = finalList(final, instance, cluster)
      if (instance === reference || list === undefined || sameList(list, expected)) continue
      const difference = viewDifference(viewOf(list), viewOf(expected))
      violations.push(
        report(
          checkpoint,
          `cluster ${cluster}: instance ${instance}'s final list differs from ${reference}'s: ${describeDifference(difference, instance, reference)}`,
          final.at,
          [final]
        )
      )
    }
  }
  return violations
}

/** Whether a watch is judged at a final record: reading and still open then. */
const judgedAt = (log: WatchLog, time: Time): boolean => log.open.reads && (log.end === undefined || log.end.at > time)

/** Each reading watch open at the final record, with a complete start and a view it knows, against its instance's list. */
const watchesMatch = (
  checkpoint: Checkpoint,
  watches: ReadonlyMap<string, WatchReplay>,
  reference: string
): Array<Violation> => {
  const final = checkpoint.final
  const violations: Array<Violation> = []
  for (const watch of watches.values()) {
    const { open } = watch.log
    if (!judgedAt(watch.log, final.at) || !watch.complete || !watch.known) continue
    const list = finalList(final, open.instance, open.cluster) ?? finalList(final, reference, open.cluster) ?? []
    const expected = viewOf(list)
    const difference = viewDifference(watch.view, expected)
    if (difference.onlyFirst.length + difference.onlySecond.length + difference.changed.length === 0) continue
    const last = watch.log.messages.findLast((message) => message.at <= final.at)
    violations.push(
      report(
        checkpoint,
        `watch ${open.watch} (watcher ${open.watcher}, instance ${open.instance}, cluster ${open.cluster}) holds ` +
          `${showIds(watch.view.keys())} at the final record but the list is ${showIds(expected.keys())}: ` +
          describeDifference(difference, "the watch", "the list"),
        final.at,
        [open, ...(last === undefined ? [] : [last]), final]
      )
    )
  }
  return violations
}

/** Each Go node's last view between quiescence and the final record against its cluster's list less its own affiliate (none there: not judged). */
const nodesMatch = (
  nodeViews: ReadonlyArray<NodeViewRecord>,
  checkpoint: Checkpoint,
  from: Time,
  reference: string
): Array<Violation> => {
  const final = checkpoint.final
  const last = new Map<string, NodeViewRecord>()
  for (const record of nodeViews)
    if (record.at >= from && record.at <= final.at) {
      const earlier = last.get(record.node)
      if (earlier === undefined || earlier.at <= record.at) last.set(record.node, record)
    }
  const violations: Array<Violation> = []
  for (const view of last.values()) {
    const expected = new Set(
      (finalList(final, reference, view.cluster) ?? [])
        .map((affiliate) => affiliate.id)
        .filter((id) => id !== view.affiliate)
    )
    const seen = new Set(view.affiliates)
    const missing = [...expected].filter((id) => !seen.has(id))
    const extra = [...seen].filter((id) => !expected.has(id))
    if (missing.length + extra.length === 0) continue
    violations.push(
      report(
        checkpoint,
        `Go node ${view.node} (affiliate ${view.affiliate}, cluster ${view.cluster}) last saw ${showIds(seen)} at ${view.at} ms; ` +
          `the list less itself is ${showIds(expected)} (missing ${showIds(missing)}, extra ${showIds(extra)})`,
        view.at,
        [view, final]
      )
    )
  }
  return violations
}

/** What gauges should count for one instance's lists: affiliates, distinct endpoints, clusters with affiliates. */
const countsOf = (
  lists: FinalRecord["lists"][string]
): { readonly affiliates: number; readonly endpoints: number; readonly clusters: number } => {
  const all = Object.values(lists)
  return {
    affiliates: all.reduce((sum, list) => sum + list.length, 0),
    endpoints: all.reduce(
      (sum, list) => sum + list.reduce((count, affiliate) => count + new Set(affiliate.endpoints).size, 0),
      0
    ),
    clusters: all.filter((list) => list.length > 0).length
  }
}

/** Each instance's first gauges at or after the final record (and before the next quiesce) against what its lists hold. */
const gaugesMatch = (
  allGauges: ReadonlyArray<GaugeRecord>,
  run: RunRecord,
  checkpoint: Checkpoint
): Array<Violation> => {
  const final = checkpoint.final
  const violations: Array<Violation> = []
  for (const instance of run.instances) {
    const lists = final.lists[instance]
    const gauges = allGauges.find(
      (record) => record.instance === instance && record.at >= final.at && record.at < checkpoint.until
    )
    if (lists === undefined || gauges === undefined) continue
    const counts = countsOf(lists)
    const wrong: Array<string> = []
    if (gauges.affiliates !== counts.affiliates)
      wrong.push(`affiliates ${gauges.affiliates} where the lists hold ${counts.affiliates}`)
    if (gauges.endpoints !== counts.endpoints)
      wrong.push(`endpoints ${gauges.endpoints} where the lists hold ${counts.endpoints}`)
    if (gauges.clusters < counts.clusters)
      wrong.push(`clusters ${gauges.clusters} where ${counts.clusters} clusters have affiliates`)
    if (wrong.length > 0)
      violations.push(
        report(checkpoint, `instance ${instance}'s gauges at ${gauges.at} ms show ${wrong.join(", ")}`, gauges.at, [
          gauges,
          final
        ])
      )
  }
  return violations
}

/** What a checkpoint is judged on besides its final record: the watches as they stood then, every node-view and every gauges record. */
interface Readings {
  readonly watches: ReadonlyMap<string, WatchReplay>
  readonly nodeViews: ReadonlyArray<NodeViewRecord>
  readonly gauges: ReadonlyArray<GaugeRecord>
}

/** One checkpoint: settled in time, and lists, watch views, Go nodes' views and gauges agree at its final record. */
const checkCheckpoint = (run: RunRecord, checkpoint: Checkpoint, readings: Readings): Array<Violation> => {
  const { quiesce, final } = checkpoint
  if (quiesce === undefined)
    return [report(checkpoint, "the run never settled: no quiesce record comes before it", final.at, [final])]
  const timing = settledInTime(run, checkpoint)
  const reference = referenceInstance(run, final)
  if (reference === undefined)
    return [...timing, report(checkpoint, "the final record lists no instance", final.at, [final])]
  return [
    ...timing,
    ...sameLists(run, checkpoint, reference),
    ...watchesMatch(checkpoint, readings.watches, reference),
    ...nodesMatch(readings.nodeViews, checkpoint, quiesce.at, reference),
    ...gaugesMatch(readings.gauges, run, checkpoint)
  ]
}

/** Checks that the run settled in time at every checkpoint and that lists, watch views, Go nodes' views and gauges agree at each. */
export const convergent = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<Violation> => {
  const run = runOf(history)
  if (run === undefined) return [{ validator: name, message: "the history has no run record" }]
  const checkpoints = checkpointsOf(history)
  const violations = unsettled(history)
  if (checkpoints.length === 0 && violations.length === 0)
    return [{ validator: name, message: "the run never settled: it has no quiesce record and no final record" }]
  const watches = replayAt(
    history,
    checkpoints.map((checkpoint) => checkpoint.final.at),
    judgedAt
  )
  const nodeViews = history.filter((record): record is NodeViewRecord => record.type === "node-view")
  const gauges = history.filter((record): record is GaugeRecord => record.type === "gauges")
  return [
    ...violations,
    ...checkpoints.flatMap((checkpoint) =>
      checkCheckpoint(run, checkpoint, { watches: watches[checkpoint.index]!, nodeViews, gauges })
    )
  ]
}
