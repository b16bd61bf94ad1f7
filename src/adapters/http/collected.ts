/**
 * Series whose value is computed when the metric registry is read, with
 * Effect's `Metric.registerUnsafe`: the exporter sees a fresh value on every
 * scrape and nothing has to be updated in between.
 *
 * @since 0.1.0
 */
import type { Scope } from "effect"
import { Effect, Metric } from "effect"

/**
 * Registers `metric` in the current registry with `get` as its value, until
 * the scope closes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const register = <Input, State>(
  metric: Metric.Metric<Input, State>,
  get: () => State
): Effect.Effect<void, never, Scope.Scope> =>
  Effect.flatMap(Effect.context<never>(), (context) =>
    Effect.acquireRelease(
      Effect.sync(() => Metric.registerUnsafe(metric, context, { get, update: () => {}, modify: () => {} })),
      (registration) => Effect.sync(() => registration.remove())
    )
  )

/**
 * Registers a gauge whose value is `get()`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const gauge = (metric: Metric.Gauge<number>, get: () => number): Effect.Effect<void, never, Scope.Scope> =>
  register(metric, () => ({ value: get() }))

/**
 * Registers a counter whose running total is `get()` (which must not
 * decrease).
 *
 * @category constructors
 * @since 0.1.0
 */
export const counter = (metric: Metric.Counter<number>, get: () => number): Effect.Effect<void, never, Scope.Scope> =>
  register(metric, () => ({ count: get(), incremental: true }))

/**
 * Wraps `read` so that it runs at most once per synchronous pass over the
 * registry. A snapshot reads every series in one synchronous loop, so the
 * value is dropped at the next microtask and series that share a source (four
 * counts from one walk of the state) read it once.
 *
 * @category constructors
 * @since 0.1.0
 */
export const oncePerSnapshot = <A>(read: () => A): (() => A) => {
  let current: { readonly value: A } | undefined
  return () => {
    if (current === undefined) {
      current = { value: read() }
      queueMicrotask(() => {
        current = undefined
      })
    }
    return current.value
  }
}
