/**
 * The *bounded* validator: the protocol's limits and the run's caps hold at
 * every moment. No list or known watch view holds more than 1024 affiliates
 * or an affiliate with more than 64 endpoints; no instance holds more open
 * watches than its cap; no more clusters are watched, or counted by the
 * gauges, than the cap on clusters (plus the run's tolerance) allows.
 */
import type { AffiliateRecord, HistoryRecord, RunRecord, Time, Violation, WatchOpenRecord } from "../history.ts"
import { openInterval, replay, runEnd, runOf, showIds, type WatchLog, watchLogs } from "../model.ts"

/** The validator's name, as its violations carry it. */
export const name = "bounded"

/** The rule, in one line. */
export const statement =
  "No list or watch view holds more than 1024 affiliates or an affiliate with more than 64 endpoints, no instance has more than maxWatches watches open at once, and no more than maxClusters + clusterCapTolerance clusters are watched or counted at once (a watch of a cluster a flush or a restart from an older file wiped counts until then, one served after it from a copy it left behind not at all)."

/** Affiliates per cluster (the protocol's limit). */
export const maxAffiliates = 1024

/** Distinct endpoints per affiliate (the protocol's limit). */
export const maxEndpoints = 64

const overfull = (affiliates: Iterable<AffiliateRecord>): AffiliateRecord | undefined => {
  for (const affiliate of affiliates) if (new Set(affiliate.endpoints).size > maxEndpoints) return affiliate
  return undefined
}

const checkList = (
  affiliates: ReadonlyArray<AffiliateRecord>,
  what: string,
  record: HistoryRecord,
  at: Time
): Array<Violation> => {
  const violations: Array<Violation> = []
  const count = new Set(affiliates.map((affiliate) => affiliate.id)).size
  if (count > maxAffiliates)
    violations.push({
      validator: name,
      message: `${what} holds ${count} affiliates (over ${maxAffiliates})`,
      at,
      records: [record]
    })
  const wide = overfull(affiliates)
  if (wide !== undefined)
    violations.push({
      validator: name,
      message: `${what} holds affiliate ${wide.id} with ${new Set(wide.endpoints).size} endpoints (over ${maxEndpoints})`,
      at,
      records: [record]
    })
  return violations
}

const checkLists = (history: ReadonlyArray<HistoryRecord>): Array<Violation> =>
  history.flatMap((record) => {
    if (record.type === "call" && record.op === "list" && record.affiliates !== undefined)
      return checkList(
        record.affiliates,
        `a List of cluster ${record.cluster} on ${record.instance} at ${record.end} ms`,
        record,
        record.end
      )
    if (record.type === "final")
      return Object.entries(record.lists).flatMap(([instance, lists]) =>
        Object.entries(lists).flatMap(([cluster, list]) =>
          checkList(list, `the final list of cluster ${cluster} on ${instance} at ${record.at} ms`, record, record.at)
        )
      )
    return []
  })

const checkViews = (history: ReadonlyArray<HistoryRecord>): Array<Violation> => {
  const violations: Array<Violation> = []
  const reported = new Set<string>()
  replay(history, (step) => {
    if (reported.has(step.log.open.watch)) return
    const watch = `watch ${step.log.open.watch} (watcher ${step.watcher}, instance ${step.log.open.instance}, cluster ${step.log.open.cluster})`
    const wide = overfull(step.message.affiliates)
    let text: string | undefined
    if (wide !== undefined)
      text = `${watch} received affiliate ${wide.id} with ${new Set(wide.endpoints).size} endpoints (over ${maxEndpoints}) at ${step.message.at} ms`
    else if (step.known && step.view.size > maxAffiliates)
      text = `${watch} holds ${step.view.size} affiliates (over ${maxAffiliates}) at ${step.message.at} ms`
    if (text === undefined) return
    reported.add(step.log.open.watch)
    violations.push({ validator: name, message: text, at: step.message.at, records: [step.log.open, step.message] })
  })
  return violations
}

interface Change {
  readonly at: Time
  readonly delta: 1 | -1
  readonly open: WatchOpenRecord
}

/** The watches' opens and ends in time order, ends first at equal times; `until` may end a watch earlier. */
const changes = (
  history: ReadonlyArray<HistoryRecord>,
  keep: (open: WatchOpenRecord) => boolean,
  until: (log: WatchLog, from: Time, to: Time) => Time = (_, __, to) => to
): Array<Change> => {
  const end = runEnd(history)
  const all: Array<Change> = []
  for (const log of watchLogs(history)) {
    const interval = openInterval(log, end)
    if (interval === undefined || !keep(log.open)) continue
    const to = until(log, interval.from, interval.to)
    all.push({ at: interval.from, delta: 1, open: log.open }, { at: to, delta: -1, open: log.open })
  }
  return all.sort((a, b) => a.at - b.at || a.delta - b.delta)
}

/** Faults that take from Redis what counts the clusters (a flush, a restart from an older file). */
const wipes = new Set(["redis-flushall", "redis-rewind"])

/**
 * When a watch open from `from` to `to` stops counting toward the cap on
 * clusters: at its end, or when a fault wiped what Redis counts clusters
 * with (its cluster is then no longer held, and the watch is cut off within
 * the probe's second: the other validators check that it is). A watch that
 * starts after a wipe in an epoch seen before it was served by a copy the
 * wipe left behind, and does not count at all.
 */
const countedUntil = (history: ReadonlyArray<HistoryRecord>) => {
  const wiped = history.flatMap((record) =>
    record.type === "fault" && record.phase === "inject" && wipes.has(record.name) ? [record.at] : []
  )
  const firstSeen = new Map<string, Time>()
  for (const record of history) {
    if (record.type === "watch-msg" && !firstSeen.has(record.epoch)) firstSeen.set(record.epoch, record.at)
  }
  return (log: WatchLog, from: Time, to: Time): Time => {
    const epoch = log.messages[0]?.epoch
    const born = epoch === undefined ? from : (firstSeen.get(epoch) ?? from)
    if (wiped.some((at) => born < at && at <= from)) return from
    return wiped.find((at) => at > from && at < to) ?? to
  }
}

const checkWatchCounts = (history: ReadonlyArray<HistoryRecord>, run: RunRecord): Array<Violation> =>
  run.instances.flatMap((instance) => {
    const open = new Set<WatchOpenRecord>()
    for (const change of changes(history, (watch) => watch.instance === instance)) {
      if (change.delta === -1) {
        open.delete(change.open)
        continue
      }
      open.add(change.open)
      if (open.size > run.caps.maxWatches)
        return [
          {
            validator: name,
            message: `instance ${instance} had ${open.size} watches open at ${change.at} ms (cap ${run.caps.maxWatches}): ${showIds([...open].map((watch) => watch.watch))}`,
            at: change.at,
            records: [...open].slice(-4)
          }
        ]
    }
    return []
  })

const checkClusterCounts = (history: ReadonlyArray<HistoryRecord>, run: RunRecord): Array<Violation> => {
  const cap = run.caps.maxClusters + run.clusterCapTolerance
  const groups = run.backend === "memory" ? run.instances.map((instance) => [instance]) : [run.instances]
  return groups.flatMap((instances) => {
    const watching = new Map<string, number>()
    const counted = changes(history, (watch) => instances.includes(watch.instance), countedUntil(history))
    for (const change of counted) {
      const count = (watching.get(change.open.cluster) ?? 0) + change.delta
      if (count === 0) watching.delete(change.open.cluster)
      else watching.set(change.open.cluster, count)
      if (change.delta === 1 && watching.size > cap)
        return [
          {
            validator: name,
            message: `${watching.size} clusters had a watch open${run.backend === "memory" ? ` on ${instances[0]}` : ""} at ${change.at} ms (cap ${run.caps.maxClusters} + tolerance ${run.clusterCapTolerance}): ${showIds(watching.keys())}`,
            at: change.at,
            records: [change.open]
          }
        ]
    }
    return []
  })
}

const checkGauges = (history: ReadonlyArray<HistoryRecord>, run: RunRecord): Array<Violation> =>
  history.flatMap((record) => {
    if (record.type !== "gauges") return []
    const wrong: Array<string> = []
    if (record.clusters > run.caps.maxClusters + run.clusterCapTolerance)
      wrong.push(`${record.clusters} clusters (cap ${run.caps.maxClusters} + tolerance ${run.clusterCapTolerance})`)
    if (record.watches > run.caps.maxWatches) wrong.push(`${record.watches} watches (cap ${run.caps.maxWatches})`)
    return wrong.length === 0
      ? []
      : [
          {
            validator: name,
            message: `instance ${record.instance}'s gauges at ${record.at} ms show ${wrong.join(" and ")}`,
            at: record.at,
            records: [record]
          }
        ]
  })

/** Checks the protocol's limits on every list and view, and the run's caps on watches and clusters at every moment. */
export const bounded = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<Violation> => {
  const run = runOf(history)
  if (run === undefined) return [{ validator: name, message: "the history has no run record" }]
  return [
    ...checkLists(history),
    ...checkViews(history),
    ...checkWatchCounts(history, run),
    ...checkClusterCounts(history, run),
    ...checkGauges(history, run)
  ]
}
