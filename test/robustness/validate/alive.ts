/**
 * The *alive* validator: once a fault heals and no other fault is in the
 * way, every instance is serving again within the run's bound: its `/readyz`
 * answers 200 and a List call answers. A heal that another fault overlaps
 * (one still active, or one injected within the bound) is not judged.
 */
import type { FaultRecord, HistoryRecord, ProbeRecord, Violation } from "../history.ts"
import { finalOf, runEnd, runOf } from "../model.ts"

/** The validator's name, as its violations carry it. */
export const name = "alive"

/** The rule, in one line. */
export const statement =
  "After a fault heals, unless another fault is active or injected within aliveMillis, every instance answers a probe with readyz 200 and a List within aliveMillis (or by the run's last final record)."

const faultKey = (fault: FaultRecord): string => JSON.stringify([fault.name, fault.target ?? ""])

/** The heals that left no fault active. */
const quietHeals = (faults: ReadonlyArray<FaultRecord>): Array<FaultRecord> => {
  const active = new Map<string, number>()
  const heals: Array<FaultRecord> = []
  for (const fault of faults) {
    const key = faultKey(fault)
    const count = active.get(key) ?? 0
    if (fault.phase === "inject") active.set(key, count + 1)
    else {
      if (count <= 1) active.delete(key)
      else active.set(key, count - 1)
      if (active.size === 0) heals.push(fault)
    }
  }
  return heals
}

/** Checks that every instance is ready and answering within aliveMillis of each heal no other fault overlaps. */
export const alive = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<Violation> => {
  const run = runOf(history)
  if (run === undefined) return [{ validator: name, message: "the history has no run record" }]
  const bound = run.bounds.aliveMillis
  // The end of the run: its last checkpoint's final record.
  const final = finalOf(history)
  const end = runEnd(history)
  const faults = history
    .filter((record): record is FaultRecord => record.type === "fault")
    .sort((a, b) => a.at - b.at || (a.phase === b.phase ? 0 : a.phase === "heal" ? -1 : 1))
  const probes = history.filter((record): record is ProbeRecord => record.type === "probe")
  const violations: Array<Violation> = []
  for (const heal of quietHeals(faults)) {
    const next = faults.find((fault) => fault.phase === "inject" && fault.at >= heal.at)
    if (next !== undefined && next.at <= heal.at + bound) continue
    const deadline = Math.min(heal.at + bound, final?.at ?? Number.POSITIVE_INFINITY)
    if (final === undefined && end < deadline) continue
    for (const instance of run.instances) {
      const window = probes.filter((probe) => probe.instance === instance && probe.at > heal.at && probe.at <= deadline)
      if (window.some((probe) => probe.readyz === 200 && probe.answered)) continue
      // a heal during the final reading, when probes have stopped: the instance answering its List there shows it alive
      if (window.length === 0 && final !== undefined && deadline === final.at && final.lists[instance] !== undefined) {
        continue
      }
      const seen =
        window.length === 0
          ? "no probe at all"
          : window
              .slice(-3)
              .map(
                (probe) =>
                  `readyz ${probe.readyz ?? "no answer"}, List ${probe.answered ? "answered" : "did not answer"} at ${probe.at} ms`
              )
              .join("; ")
      violations.push({
        validator: name,
        message: `instance ${instance} was not ready and answering within ${bound} ms of the heal of fault ${heal.name}${heal.target === undefined ? "" : ` on ${heal.target}`} at ${heal.at} ms (until ${deadline} ms): ${seen}`,
        at: deadline,
        records: [heal, ...window.slice(-3)]
      })
    }
  }
  return violations
}
