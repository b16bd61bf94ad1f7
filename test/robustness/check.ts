/**
 * Checks a recorded run: `node test/robustness/check.ts <folder>` reads every
 * `*.jsonl` file in the folder, merges their records into one history sorted
 * by time, runs every validator over it and prints one line per validator
 * (passed, or how many violations and the first few). It exits 1 when any
 * validator found a violation and 2 when the folder cannot be read, so a
 * report kept from a failed run can be checked again after a fix.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import type { HistoryRecord, Violation } from "./history.ts"
import { timeOf } from "./history.ts"
import { validators } from "./validate/index.ts"

/** Violations printed per validator; the rest are counted. */
const shownViolations = 3

/** Every record of every `*.jsonl` file in `folder`: the run record first, then by time (a file's own order kept at equal times). */
export const readHistory = (folder: string): ReadonlyArray<HistoryRecord> => {
  const records: Array<HistoryRecord> = []
  const files = readdirSync(folder)
    .filter((file) => file.endsWith(".jsonl"))
    .sort()
  for (const file of files) {
    const lines = readFileSync(join(folder, file), "utf8").split("\n")
    lines.forEach((line, index) => {
      if (line.trim() === "") return
      try {
        records.push(JSON.parse(line) as HistoryRecord)
      } catch (error) {
        throw new Error(`${file}:${index + 1}: not a JSON record (${String(error)})`)
      }
    })
  }
  return records.sort((a, b) => (a.type === "run" ? -1 : b.type === "run" ? 1 : timeOf(a) - timeOf(b)))
}

const describeViolation = (violation: Violation): string =>
  violation.at === undefined ? violation.message : `${violation.message} [${violation.at} ms]`

/** The report: one line per validator, each failed one followed by its first few violations; and whether any failed. */
export const report = (
  history: ReadonlyArray<HistoryRecord>
): { readonly lines: Array<string>; readonly failed: boolean } => {
  const lines: Array<string> = []
  let failed = false
  const width = Math.max(...validators.map((validator) => validator.name.length))
  for (const validator of validators) {
    const violations = validator.check(history)
    const label = validator.name.padEnd(width)
    if (violations.length === 0) {
      lines.push(`${label}  passed`)
      continue
    }
    failed = true
    lines.push(`${label}  ${violations.length} violation${violations.length === 1 ? "" : "s"}: ${validator.statement}`)
    for (const violation of violations.slice(0, shownViolations))
      lines.push(`${" ".repeat(width)}  - ${describeViolation(violation)}`)
    if (violations.length > shownViolations)
      lines.push(`${" ".repeat(width)}  … and ${violations.length - shownViolations} more`)
  }
  return { lines, failed }
}

const main = (args: ReadonlyArray<string>): number => {
  const [folder] = args
  if (folder === undefined) {
    console.error("usage: node test/robustness/check.ts <folder of *.jsonl history files>")
    return 2
  }
  let history: ReadonlyArray<HistoryRecord>
  try {
    history = readHistory(folder)
  } catch (error) {
    console.error(`cannot read the history in ${folder}: ${error instanceof Error ? error.message : String(error)}`)
    return 2
  }
  const { lines, failed } = report(history)
  console.log(`${history.length} records from ${folder}`)
  for (const line of lines) console.log(line)
  return failed ? 1 : 0
}

if (import.meta.main) process.exitCode = main(process.argv.slice(2))
