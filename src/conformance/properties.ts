/**
 * Runs the kit's model-based property against a server: `runs` random step
 * sequences from `seed` (fast-check), a failing one shrunk to a minimal
 * sequence and given back as a replayable script; or one script replayed as
 * it is.
 *
 * @since 0.1.0
 */
import { Cause, Clock, Effect, type Layer, ManagedRuntime } from "effect"
import fc from "fast-check"
import type { ClusterApi } from "../ports/ClusterApi.ts"
import { runSteps, type Step, stepsArbitrary } from "./wireModel.ts"

/**
 * The property's name, as reports give it.
 *
 * @category models
 * @since 0.1.0
 */
export const modelPropertyName =
  "random updates, deletes, lists and watches (opened and disconnected) agree with the model"

/**
 * A sequence that broke the property, as a file holds it for `--replay`.
 *
 * @category models
 * @since 0.1.0
 */
export interface ReplayScript {
  readonly property: string
  readonly seed: number
  readonly steps: ReadonlyArray<Step>
}

/**
 * How the property went.
 *
 * @category models
 * @since 0.1.0
 */
export interface PropertyResult {
  readonly name: string
  readonly status: "passed" | "failed"
  readonly runs: number
  readonly seed: number
  readonly reason?: string | undefined
  /** The shrunk sequence that fails, ready to replay. */
  readonly counterexample?: ReplayScript | undefined
  readonly millis: number
}

/**
 * How many sequences, from which seed.
 *
 * @category models
 * @since 0.1.0
 */
export interface PropertyOptions {
  readonly runs?: number | undefined
  readonly seed?: number | undefined
  /** The longest sequence (default 25 steps). */
  readonly maxSteps?: number | undefined
  /** How long a watch may take to reach the model after a step, in real time (default 2 s). */
  readonly settleMillis?: number | undefined
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/**
 * Checks the property against the server `layer` reaches (one client for
 * every run; each run uses clusters of its own).
 *
 * @category constructors
 * @since 0.1.0
 */
export const checkModelProperty = (
  layer: Layer.Layer<ClusterApi, unknown>,
  options: PropertyOptions = {}
): Effect.Effect<PropertyResult> =>
  Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    const seed = options.seed ?? (started % 2 ** 31) | 0
    const runs = options.runs ?? 30
    // interrupted, the check stops at its next run (and the current run with it) and its client is closed
    const details = yield* Effect.promise(async (signal) => {
      const runtime = ManagedRuntime.make(layer)
      try {
        return await fc.check(
          fc.asyncProperty(stepsArbitrary(options.maxSteps), async (steps) => {
            if (signal.aborted) throw new Error("interrupted")
            await runtime.runPromise(Effect.scoped(runSteps(steps, options.settleMillis)), { signal })
          }),
          { seed, numRuns: runs, endOnFailure: false }
        )
      } finally {
        await runtime.dispose()
      }
    })
    const millis = (yield* Clock.currentTimeMillis) - started
    if (!details.failed) return { name: modelPropertyName, status: "passed", runs: details.numRuns, seed, millis }
    const steps = details.counterexample?.[0] ?? []
    return {
      name: modelPropertyName,
      status: "failed",
      runs: details.numRuns,
      seed,
      reason: `${messageOf(details.errorInstance)} (shrunk ${details.numShrinks} times)`,
      counterexample: { property: modelPropertyName, seed, steps },
      millis
    }
  })

/**
 * Runs one saved sequence against the server `layer` reaches.
 *
 * @category constructors
 * @since 0.1.0
 */
export const replayScript = (
  layer: Layer.Layer<ClusterApi, unknown>,
  script: ReplayScript
): Effect.Effect<PropertyResult> =>
  Effect.gen(function* () {
    const started = yield* Clock.currentTimeMillis
    const exit = yield* Effect.exit(Effect.scoped(runSteps(script.steps)).pipe(Effect.provide(layer)))
    const millis = (yield* Clock.currentTimeMillis) - started
    const base = { name: `${script.property} (replayed)`, runs: 1, seed: script.seed, millis }
    return exit._tag === "Success"
      ? { ...base, status: "passed" }
      : {
          ...base,
          status: "failed",
          reason: messageOf(Cause.squash(exit.cause)),
          counterexample: script
        }
  })
