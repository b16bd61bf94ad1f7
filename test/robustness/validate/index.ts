/**
 * All the validators, in the order a report lists them, and `validate`, which
 * runs them all over one history. Each validator is a pure function from a
 * history to the violations it finds, with a one-line statement of its rule.
 */
import type { HistoryRecord, Violation } from "../history.ts"
import { alive, name as aliveName, statement as aliveStatement } from "./alive.ts"
import { bounded, name as boundedName, statement as boundedStatement } from "./bounded.ts"
import { convergent, name as convergentName, statement as convergentStatement } from "./convergent.ts"
import { durable, name as durableName, statement as durableStatement } from "./durable.ts"
import { oneHistory, name as oneHistoryName, statement as oneHistoryStatement } from "./oneHistory.ts"
import { ordered, name as orderedName, statement as orderedStatement } from "./ordered.ts"
import { reliable, name as reliableName, statement as reliableStatement } from "./reliable.ts"
import { resumable, name as resumableName, statement as resumableStatement } from "./resumable.ts"

/** One validator: its name (as its violations carry it), its rule in one line, and its check. */
export interface Validator {
  readonly name: string
  readonly statement: string
  readonly check: (history: ReadonlyArray<HistoryRecord>) => ReadonlyArray<Violation>
}

/** Every validator, in report order. */
export const validators: ReadonlyArray<Validator> = [
  { name: orderedName, statement: orderedStatement, check: ordered },
  { name: oneHistoryName, statement: oneHistoryStatement, check: oneHistory },
  { name: reliableName, statement: reliableStatement, check: reliable },
  { name: resumableName, statement: resumableStatement, check: resumable },
  { name: convergentName, statement: convergentStatement, check: convergent },
  { name: durableName, statement: durableStatement, check: durable },
  { name: boundedName, statement: boundedStatement, check: bounded },
  { name: aliveName, statement: aliveStatement, check: alive }
]

/** Runs every validator over `history` and returns all their violations, validator by validator. */
export const validate = (history: ReadonlyArray<HistoryRecord>): ReadonlyArray<Violation> =>
  validators.flatMap((validator) => validator.check(history))
