/**
 * Runs conformance cases one after another outside a test framework (the
 * `conformance` command) and reports each: passed, failed (with what was
 * expected and what came), skipped (with why), or, for a case of our
 * deliberate improvements on a server that is not ours, "differs from the
 * original by design" — never a pass.
 *
 * @since 0.1.0
 */
import { AssertionError } from "node:assert"
import { Cause, Clock, Duration, Effect, Exit } from "effect"
import type { ConformanceCase } from "./cases.ts"

/**
 * How one case went.
 *
 * @category models
 * @since 0.1.0
 */
export type CaseStatus = "passed" | "failed" | "skipped" | "differs"

/**
 * One case's report.
 *
 * @category models
 * @since 0.1.0
 */
export interface CaseResult {
  readonly group: string
  readonly name: string
  readonly status: CaseStatus
  /** Why it failed, was skipped or differs. */
  readonly reason?: string | undefined
  /** What the failed check expected. */
  readonly expected?: unknown
  /** What came instead. */
  readonly actual?: unknown
  readonly millis: number
}

/**
 * What to run and how long a case may take.
 *
 * @category models
 * @since 0.1.0
 */
export interface RunOptions {
  /** Only the cases whose group or name contains this text (case-insensitive). */
  readonly only?: string | undefined
  /**
   * The longest a case may take, over the case's own limit (default: the
   * case's, else 60 s). Measured on Effect's clock: under `TestClock` it
   * never passes.
   */
  readonly timeout?: Duration.Input | undefined
  /** Told of each result as it comes (progress). */
  readonly onResult?: ((result: CaseResult) => void) | undefined
}

/**
 * Whether `one` is picked by `only`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const picked = (one: { readonly group: string; readonly name: string }, only: string | undefined): boolean =>
  only === undefined || `${one.group} ${one.name}`.toLowerCase().includes(only.toLowerCase())

const improvementOf = (name: string): string => /\(improvement: ([^)]*)\)/.exec(name)?.[1] ?? "a deliberate improvement"

/** What a failed case says: the check's message, with its expected and actual values when it was one. */
const failureOf = (cause: Cause.Cause<unknown>) => {
  const error = Cause.squash(cause)
  if (error instanceof AssertionError) {
    return { reason: error.message, expected: error.expected, actual: error.actual }
  }
  if (typeof error === "object" && error !== null && "_tag" in error) {
    const { _tag, message } = error as { readonly _tag: unknown; readonly message?: unknown }
    return { reason: `unexpected ${String(_tag)}${message === undefined ? "" : `: ${String(message)}`}` }
  }
  return { reason: error instanceof Error ? error.message : String(error) }
}

/**
 * Runs `one` and gives its report.
 *
 * @category constructors
 * @since 0.1.0
 */
export const runCase = <R>(
  one: ConformanceCase<R>,
  options: RunOptions = {}
): Effect.Effect<CaseResult, never, never> =>
  Effect.gen(function* () {
    const base = { group: one.group, name: one.name }
    if (one.unmet.length > 0) {
      return one.improvement && one.unmet.includes("not our server")
        ? {
            ...base,
            status: "differs",
            reason: `differs from the original by design (${improvementOf(one.name)})`,
            millis: 0
          }
        : { ...base, status: "skipped", reason: one.unmet.join("; "), millis: 0 }
    }
    const started = yield* Clock.currentTimeMillis
    const limit = Duration.fromInputUnsafe(options.timeout ?? one.timeout ?? "60 seconds")
    const exit = yield* Effect.scoped(one.run()).pipe(
      Effect.provide(one.layer),
      Effect.timeoutOrElse({
        duration: limit,
        orElse: () => Effect.fail(new Error(`timed out after ${Duration.format(Duration.fromInputUnsafe(limit))}`))
      }),
      Effect.exit
    )
    const millis = (yield* Clock.currentTimeMillis) - started
    return Exit.isSuccess(exit)
      ? { ...base, status: "passed", millis }
      : { ...base, status: "failed", ...failureOf(exit.cause), millis }
  }) as Effect.Effect<CaseResult, never, never>

/**
 * Runs the picked cases one after another and gives their reports, in order.
 *
 * @category constructors
 * @since 0.1.0
 */
export const runCases = <R>(
  cases: ReadonlyArray<ConformanceCase<R>>,
  options: RunOptions = {}
): Effect.Effect<ReadonlyArray<CaseResult>> =>
  Effect.forEach(
    cases.filter((one) => picked(one, options.only)),
    (one) => Effect.tap(runCase(one, options), (result) => Effect.sync(() => options.onResult?.(result)))
  )

/**
 * Counts of a run by status; the run holds when nothing failed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const summarize = (results: ReadonlyArray<CaseResult>): Record<CaseStatus, number> & { holds: boolean } => {
  const counts = { passed: 0, failed: 0, skipped: 0, differs: 0 }
  for (const result of results) counts[result.status]++
  return { ...counts, holds: counts.failed === 0 }
}
