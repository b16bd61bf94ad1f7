/**
 * The *resumable* validator: a server resumes a watch only where its watcher
 * asked and only where that watcher had been, and then goes on from the next
 * revision. Answering a resume point with a fresh snapshot is always allowed;
 * resuming another point, or a point the watcher never reached, would leave
 * the watcher with a view the server never had.
 */
import type { HistoryRecord, Violation } from "../history.ts"
import { isDelta, pointKey, replay, showPoint, type Step } from "../model.ts"

/** The validator's name, as its violations carry it. */
export const name = "resumable"

/** The rule, in one line. */
export const statement =
  "A watch answered with `resumed` asked for that exact (epoch, revision), its watcher had reached that point, and its next delta is revision + 1 of that epoch; a snapshot answer is always allowed."

const describeWatch = (step: Step): string =>
  `watch ${step.log.open.watch} (watcher ${step.watcher}, instance ${step.log.open.instance}, cluster ${step.log.open.cluster})`

const checkResumed = (step: Step, reached: ReadonlySet<string>): Array<Violation> => {
  const { open } = step.log
  const message = step.message
  const resume = open.resume
  const report = (text: string): Violation => ({
    validator: name,
    message: `${describeWatch(step)}: ${text}`,
    at: message.at,
    records: [open, message]
  })
  if (resume === undefined) return [report(`resumed at ${showPoint(message)} though it asked for no resume point`)]
  const violations: Array<Violation> = []
  if (resume.epoch !== message.epoch || resume.revision !== message.revision)
    violations.push(report(`asked to resume after ${showPoint(resume)} but was resumed at ${showPoint(message)}`))
  else if (!reached.has(pointKey(resume)))
    violations.push(
      report(
        `was resumed at ${showPoint(resume)}, a point its watcher never reached (the server resumed a history the watcher never saw)`
      )
    )
  const next = step.log.messages[1]
  if (next !== undefined && isDelta(next) && (next.epoch !== message.epoch || next.revision !== message.revision + 1))
    violations.push({
      validator: name,
      message: `${describeWatch(step)}: resumed at ${showPoint(message)}, its next delta is ${showPoint(next)} rather than ${showPoint({ epoch: message.epoch, revision: message.revision + 1 })}`,
      at: next.at,
      records: [open, message, next]
    })
  return violations
}

/** Checks every resumed start against the point asked for, the points its watcher reached, and the delta after it. */
export const resumable = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<Violation> => {
  const violations: Array<Violation> = []
  const reached = new Map<string, Set<string>>()
  replay(history, (step) => {
    const points = reached.get(step.watcher) ?? new Set<string>()
    reached.set(step.watcher, points)
    if (step.index === 0 && step.kind === "resumed") violations.push(...checkResumed(step, points))
    if (step.complete && step.point !== undefined && step.kind !== "snapshot-part") points.add(pointKey(step.point))
  })
  return violations
}
