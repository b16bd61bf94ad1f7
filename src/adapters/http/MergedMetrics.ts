/**
 * The I/O threads' metrics on the main thread's `/metrics`: each worker posts
 * the series of its own registry as plain data (`toWire`), and
 * `MergedMetrics` registers their sums in the main registry with
 * `Metric.registerUnsafe` (as `collected.ts` does), under the same names,
 * labels, help texts and types, so one scrape shows the totals of a
 * single-threaded server. The counts of a worker that exits are kept, so
 * totals never go down across restarts; its gauges go with it.
 *
 * @since 0.1.0
 */
import type { Scope } from "effect"
import { Context, Effect, Metric } from "effect"

/**
 * One series in a shape named by its Effect metric type.
 *
 * @category models
 * @since 0.1.0
 */
export interface WireSeriesOf<Type extends Metric.Metric.Type, State> {
  readonly id: string
  readonly type: Type
  readonly description: string | undefined
  readonly attributes: Readonly<Record<string, string>>
  readonly state: State
}

/**
 * The state of a frequency series, with its occurrences as `[word, count]`
 * pairs instead of the live `Map` of the snapshot.
 *
 * @category models
 * @since 0.1.0
 */
export interface WireFrequencyState {
  readonly occurrences: ReadonlyArray<readonly [string, number]>
}

/**
 * One series as a worker posts it to the main thread: plain data that
 * survives `structuredClone` (counts may be bigints, which it supports).
 *
 * @category models
 * @since 0.1.0
 */
export type WireSeries =
  | WireSeriesOf<"Counter", Metric.CounterState<number | bigint>>
  | WireSeriesOf<"Gauge", Metric.GaugeState<number | bigint>>
  | WireSeriesOf<"Histogram", Metric.HistogramState>
  | WireSeriesOf<"Frequency", WireFrequencyState>
  | WireSeriesOf<"Summary", Metric.SummaryState>

const seriesOf = (snapshot: Metric.Metric.Snapshot): WireSeries => {
  const base = { id: snapshot.id, description: snapshot.description, attributes: { ...snapshot.attributes } }
  switch (snapshot.type) {
    case "Counter":
      return { ...base, type: snapshot.type, state: snapshot.state }
    case "Gauge":
      return { ...base, type: snapshot.type, state: snapshot.state }
    case "Histogram":
      return { ...base, type: snapshot.type, state: snapshot.state }
    case "Frequency":
      return { ...base, type: snapshot.type, state: { occurrences: Array.from(snapshot.state.occurrences) } }
    case "Summary":
      return { ...base, type: snapshot.type, state: snapshot.state }
  }
}

/**
 * Converts a registry snapshot to what a worker posts.
 *
 * @category constructors
 * @since 0.1.0
 */
export const toWire = (snapshots: ReadonlyArray<Metric.Metric.Snapshot>): Array<WireSeries> => snapshots.map(seriesOf)

/**
 * The series of the registry of `context`, ready to post.
 *
 * @category constructors
 * @since 0.1.0
 */
export const snapshotWire = (context: Context.Context<never>): Array<WireSeries> =>
  toWire(Metric.snapshotUnsafe(context))

interface Entry {
  /** The series that set the key's type and buckets when it was registered; others are left out of the sum. */
  shape: WireSeries
  retired: WireSeries | undefined
  registration: Metric.Registration | undefined
  /** The main thread has its own series under this name and labels. */
  shadowed: boolean
}

const keyOf = (series: WireSeries): string =>
  JSON.stringify([series.id, Object.entries(series.attributes).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))])

const sameAttributes = (a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean => {
  const keys = Object.keys(a)
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key])
}

const sameShape = (a: WireSeries, b: WireSeries): boolean => {
  switch (a.type) {
    case "Counter":
      return b.type === "Counter" && typeof b.state.count === typeof a.state.count
    case "Gauge":
      return b.type === "Gauge" && typeof b.state.value === typeof a.state.value
    case "Histogram":
      return (
        b.type === "Histogram" &&
        b.state.buckets.length === a.state.buckets.length &&
        a.state.buckets.every(([le], i) => b.state.buckets[i]![0] === le)
      )
    case "Frequency":
      return b.type === "Frequency"
    case "Summary":
      return (
        b.type === "Summary" &&
        b.state.quantiles.length === a.state.quantiles.length &&
        a.state.quantiles.every(([q], i) => b.state.quantiles[i]![0] === q)
      )
  }
}

const add = (a: number | bigint, b: number | bigint): number | bigint =>
  typeof a === "bigint" || typeof b === "bigint" ? BigInt(a) + BigInt(b) : a + b

const larger = (a: number | undefined, b: number | undefined): number | undefined =>
  a === undefined ? b : b === undefined ? a : Math.max(a, b)

/**
 * The sum of two series of the same shape. A summary quantile is the larger
 * of the two, an upper bound of the quantile of the union (quantiles cannot
 * be merged exactly).
 */
const plus = (a: WireSeries, b: WireSeries): WireSeries => {
  switch (a.type) {
    case "Counter": {
      const other = (b as typeof a).state
      return { ...a, state: { count: add(a.state.count, other.count), incremental: a.state.incremental } }
    }
    case "Gauge":
      return { ...a, state: { value: add(a.state.value, (b as typeof a).state.value) } }
    case "Histogram": {
      const other = (b as typeof a).state
      return {
        ...a,
        state: {
          buckets: a.state.buckets.map(([le, count], i): [number, number] => [le, count + other.buckets[i]![1]]),
          count: a.state.count + other.count,
          min: Math.min(a.state.min, other.min),
          max: Math.max(a.state.max, other.max),
          sum: a.state.sum + other.sum
        }
      }
    }
    case "Frequency": {
      const occurrences = new Map(a.state.occurrences)
      for (const [word, count] of (b as typeof a).state.occurrences) {
        occurrences.set(word, (occurrences.get(word) ?? 0) + count)
      }
      return { ...a, state: { occurrences: Array.from(occurrences) } }
    }
    case "Summary": {
      const other = (b as typeof a).state
      return {
        ...a,
        state: {
          quantiles: a.state.quantiles.map(([q, value], i) => [q, larger(value, other.quantiles[i]![1])] as const),
          count: a.state.count + other.count,
          min: Math.min(a.state.min, other.min),
          max: Math.max(a.state.max, other.max),
          sum: a.state.sum + other.sum
        }
      }
    }
  }
}

/** What a retired worker leaves in the totals: no gauge, and no quantiles of its time window. */
const leftover = (series: WireSeries): WireSeries | undefined => {
  switch (series.type) {
    case "Gauge":
      return undefined
    case "Summary":
      return {
        ...series,
        state: { ...series.state, quantiles: series.state.quantiles.map(([q]) => [q, undefined] as const) }
      }
    default:
      return series
  }
}

const stateOf = (series: WireSeries): unknown =>
  series.type === "Frequency" ? { occurrences: new Map(series.state.occurrences) } : series.state

const metricOf = (series: WireSeries): Metric.Metric<never, unknown> => {
  const options = { description: series.description }
  switch (series.type) {
    case "Counter":
      return Metric.counter(series.id, { ...options, incremental: series.state.incremental })
    case "Gauge":
      return Metric.gauge(series.id, options)
    case "Histogram":
      return Metric.histogram(series.id, { ...options, boundaries: series.state.buckets.map(([le]) => le) })
    case "Frequency":
      return Metric.frequency(series.id, options)
    case "Summary":
      return Metric.summary(series.id, {
        ...options,
        maxAge: "1 minute",
        maxSize: 1,
        quantiles: series.state.quantiles.map(([q]) => q)
      })
  }
}

/**
 * The sums of the workers' series, registered in the main registry of the
 * context it is built with.
 *
 * The main thread must not create these series itself: a series it already
 * has under the same name and labels is left alone (the workers' values for
 * it are not exported), and one it creates later would lose its updates to
 * the merged registration.
 *
 * @category models
 * @since 0.1.0
 */
export class MergedMetrics {
  readonly #context: Context.Context<never>
  readonly #registry: Metric.MetricRegistry
  readonly #sources = new Map<number, Map<string, WireSeries>>()
  readonly #retiredSources = new Set<number>()
  readonly #entries = new Map<string, Entry>()
  #closed = false

  constructor(context: Context.Context<never>) {
    this.#context = context
    this.#registry = Context.get(context, Metric.MetricRegistry)
  }

  /** Replaces the series of worker `source` with its latest values; a retired source's late values are ignored. */
  update(source: number, series: ReadonlyArray<WireSeries>): void {
    if (this.#closed || this.#retiredSources.has(source)) return
    const previous = this.#sources.get(source)
    const next = new Map<string, WireSeries>()
    for (const one of series) {
      const key = keyOf(one)
      next.set(key, one)
      if (!this.#entries.has(key)) {
        this.#entries.set(key, { shape: one, retired: undefined, registration: undefined, shadowed: false })
      }
    }
    this.#sources.set(source, next)
    for (const key of next.keys()) this.#sync(key)
    if (previous !== undefined) for (const key of previous.keys()) if (!next.has(key)) this.#sync(key)
  }

  /** Forgets worker `source`: its counts stay in the totals, its gauges go. */
  retire(source: number): void {
    this.#retiredSources.add(source)
    const series = this.#sources.get(source)
    if (series === undefined) return
    this.#sources.delete(source)
    for (const [key, one] of series) {
      const entry = this.#entries.get(key)!
      const kept = sameShape(entry.shape, one) ? leftover(one) : undefined
      if (kept !== undefined) entry.retired = entry.retired === undefined ? kept : plus(entry.retired, kept)
      this.#sync(key)
    }
  }

  /** Removes every merged series from the registry and ignores later updates. */
  close(): void {
    this.#closed = true
    for (const entry of this.#entries.values()) entry.registration?.remove()
    this.#entries.clear()
    this.#sources.clear()
  }

  #total(key: string, entry: Entry): WireSeries | undefined {
    let sum = entry.retired
    for (const series of this.#sources.values()) {
      const live = series.get(key)
      if (live !== undefined && sameShape(entry.shape, live)) sum = sum === undefined ? live : plus(sum, live)
    }
    return sum
  }

  #ownedByMain(shape: WireSeries): boolean {
    for (const metadata of this.#registry.values()) {
      if (metadata.id === shape.id && sameAttributes(metadata.attributes ?? {}, shape.attributes)) return true
    }
    return false
  }

  /** Registers the key while it has a live or retired value, and only then. */
  #sync(key: string): void {
    const entry = this.#entries.get(key)
    if (entry === undefined || entry.shadowed) return
    if (entry.registration === undefined && entry.retired === undefined) {
      for (const series of this.#sources.values()) {
        const live = series.get(key)
        if (live !== undefined) {
          entry.shape = live
          break
        }
      }
    }
    const live = this.#total(key, entry) !== undefined
    if (live && entry.registration === undefined) this.#register(key, entry)
    else if (!live && entry.registration !== undefined) {
      entry.registration.remove()
      entry.registration = undefined
    }
  }

  #register(key: string, entry: Entry): void {
    if (this.#ownedByMain(entry.shape)) {
      entry.shadowed = true
      return
    }
    const metric = Metric.withAttributes(metricOf(entry.shape), entry.shape.attributes)
    const get = () => stateOf(this.#total(key, entry) ?? entry.shape)
    entry.registration = Metric.registerUnsafe(metric, this.#context, { get, update: () => {}, modify: () => {} })
  }
}

/**
 * Merges into the current metric registry until the scope closes.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make: Effect.Effect<MergedMetrics, never, Scope.Scope> = Effect.acquireRelease(
  Effect.map(Effect.context<never>(), (context) => new MergedMetrics(context)),
  (merged) => Effect.sync(() => merged.close())
)
