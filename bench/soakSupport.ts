/**
 * Pieces of `npm run soak` (bench/soak.ts): its options, samples of the
 * server process (resident memory and CPU from /proc, heap and state from
 * its /metrics), the lines the Go load generator's `soak` mode prints, and
 * the judgement of memory after warm-up. Every wait is bounded.
 */
import { readFileSync } from "node:fs"
import { Duration } from "effect"
import { parseGoDuration } from "../src/cli/goDuration.ts"
import { memory } from "./support.ts"

/** What one soak runs; every field is a flag of `bench/soak.ts` (`--duration 2m`, `--watchers 500`, …). */
export interface SoakOptions {
  /** How long the writer writes (default 30m). */
  readonly durationMs: number
  /** Period of the rows of the table and of the memory judgement (default 5m). */
  readonly sampleMs: number
  /**
   * How long the warm-up lasts, a multiple of the sample (default a third of the duration, rounded down to
   * samples, at least one): memory is judged against the highest of the window that ends it.
   */
  readonly warmupMs: number
  /** Period of the finer samples and of the generator's progress lines (default sample / 6, between 1 s and 10 s). */
  readonly reportMs: number
  /** Longest wait for the deliveries in flight once the writer stops (default 30s). */
  readonly drainMs: number
  /** Watch streams (default 10000); a multiple of `streams`. */
  readonly watchers: number
  /** Watch streams per connection (default 100, the server's limit of concurrent streams). */
  readonly streams: number
  /** Clusters the watchers and the writer spread over (default 100). */
  readonly clusters: number
  /** Affiliates per cluster, updated in turn (default 5). */
  readonly affiliates: number
  /** AffiliateUpdates per second (default 50). */
  readonly rate: number
  /** Bytes of data per affiliate (default 256). */
  readonly dataBytes: number
  /** Largest change of resident memory after warm-up still judged flat, in percent (default 5). */
  readonly tolerancePercent: number
  /** Extra flags for the server (`--server-arg=--gc-interval=10s`, repeatable). */
  readonly serverArgs: ReadonlyArray<string>
  /** Where the JSON goes (default bench/results/soak-<timestamp>.json). */
  readonly out: string | undefined
  /** Keep the server's log even when the soak passes. */
  readonly keepLogs: boolean
}

const durationMs = (name: string, text: string): number => {
  const parsed = parseGoDuration(text)
  const ms = parsed === undefined ? Number.NaN : Duration.toMillis(parsed)
  if (!(ms > 0)) throw new Error(`--${name} must be a positive duration such as 30s, 2m or 1h30m, got ${text}`)
  return ms
}

/** Reads the soak's flags (`--name value` or `--name=value`). */
export const parseOptions = (argv: ReadonlyArray<string>): SoakOptions => {
  const values = (name: string): Array<string> => {
    const found: Array<string> = []
    argv.forEach((arg, i) => {
      if (arg === `--${name}` && i + 1 < argv.length) found.push(argv[i + 1]!)
      else if (arg.startsWith(`--${name}=`)) found.push(arg.slice(name.length + 3))
    })
    return found
  }
  const text = (name: string): string | undefined => values(name).at(-1)
  const count = (name: string, fallback: number): number => {
    const value = text(name)
    if (value === undefined) return fallback
    const n = Number(value)
    if (!Number.isInteger(n) || n <= 0) throw new Error(`--${name} must be a positive integer, got ${value}`)
    return n
  }
  const positive = (name: string, fallback: number): number => {
    const value = text(name)
    if (value === undefined) return fallback
    const n = Number(value)
    if (!(n > 0)) throw new Error(`--${name} must be a positive number, got ${value}`)
    return n
  }
  const duration = durationMs("duration", text("duration") ?? "30m")
  const sample = durationMs("sample", text("sample") ?? "5m")
  const report = text("report")
  const warmupText = text("warmup")
  const warmup =
    warmupText === undefined
      ? Math.max(sample, Math.floor(duration / 3 / sample) * sample)
      : durationMs("warmup", warmupText)
  if (warmup % sample !== 0) throw new Error(`--warmup (${warmupText}) must be a multiple of --sample`)
  const options: SoakOptions = {
    durationMs: duration,
    sampleMs: sample,
    warmupMs: warmup,
    reportMs: report === undefined ? Math.min(10_000, Math.max(1000, sample / 6)) : durationMs("report", report),
    drainMs: durationMs("drain", text("drain") ?? "30s"),
    watchers: count("watchers", 10_000),
    streams: count("streams", 100),
    clusters: count("clusters", 100),
    affiliates: count("affiliates", 5),
    rate: positive("rate", 50),
    dataBytes: Math.max(16, count("data-size", 256)),
    tolerancePercent: positive("tolerance", 5),
    serverArgs: values("server-arg"),
    out: text("out"),
    keepLogs: argv.includes("--keep-logs")
  }
  if (options.watchers % options.streams !== 0) {
    throw new Error(`--watchers (${options.watchers}) must be a multiple of --streams (${options.streams})`)
  }
  if (options.streams > 100) throw new Error("--streams: the server allows 100 concurrent streams per connection")
  return options
}

/** The user+system CPU seconds of a process so far, from /proc/PID/stat (clock ticks of 10 ms). */
export const cpuSeconds = (pid: number): number => {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return (Number(fields[11]) + Number(fields[12])) / 100
}

/** The gauges of the server's /metrics that a sample keeps. */
const gauges = {
  heapUsed: "nodejs_heap_size_used_bytes",
  heapTotal: "nodejs_heap_size_total_bytes",
  external: "nodejs_external_memory_bytes",
  lagP99: "nodejs_eventloop_lag_p99_seconds",
  lagMax: "nodejs_eventloop_lag_max_seconds",
  subscriptions: "discovery_state_subscriptions",
  clusters: "discovery_state_clusters",
  affiliates: "discovery_state_affiliates"
} as const

/** One look at the server process. */
export interface ProcessSample {
  /** When, in ms since the epoch. */
  readonly at: number
  readonly rss: number
  readonly hwm: number
  readonly cpuSeconds: number
  /** The gauges of {@link gauges}, absent when /metrics did not answer in time. */
  readonly metrics: Partial<Record<keyof typeof gauges, number>>
}

/** The unlabelled gauges of a Prometheus text page. */
export const parseMetrics = (page: string): Partial<Record<keyof typeof gauges, number>> => {
  const values = new Map<string, number>()
  for (const line of page.split("\n")) {
    const match = /^([a-z_:][a-z0-9_:]*) (\S+)$/i.exec(line)
    if (match) values.set(match[1]!, Number(match[2]))
  }
  const picked: Partial<Record<keyof typeof gauges, number>> = {}
  for (const [key, name] of Object.entries(gauges) as Array<[keyof typeof gauges, string]>) {
    const value = values.get(name)
    if (value !== undefined && Number.isFinite(value)) picked[key] = value
  }
  return picked
}

/** Samples the server: /proc at once, then /metrics (at most 2 s; left out when it does not answer). */
export const sampleServer = async (pid: number, metricsPort: number | undefined): Promise<ProcessSample> => {
  const at = Date.now()
  const { rss, hwm } = memory(pid)
  const cpu = cpuSeconds(pid)
  let metrics: ProcessSample["metrics"] = {}
  if (metricsPort !== undefined) {
    try {
      const response = await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(2000) })
      metrics = parseMetrics(await response.text())
    } catch {
      metrics = {}
    }
  }
  return { at, rss, hwm, cpuSeconds: cpu, metrics }
}

/** Delivery latency figures of the generator (update sent → delta received), in ms. */
export interface Latency {
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  readonly count: number
}

/** A progress line of `loadgen soak`; counts without "Total" are the interval's. */
export interface SoakInterval {
  readonly type: "interval"
  readonly phase: "write" | "drain"
  /** Seconds since the writer started, at the end of the interval. */
  readonly seconds: number
  readonly updates: number
  readonly updatesTotal: number
  readonly deliveries: number
  readonly deliveriesTotal: number
  readonly expectedTotal: number
  readonly inFlight: number
  readonly latency: Latency
  readonly openWatchers: number
  readonly watchErrors: number
  readonly reconnects: number
  readonly outOfOrder: number
  readonly gaps: number
  readonly unexpected: number
  readonly writerErrors: number
  readonly serverCpuSeconds: number
  readonly generatorCpuSeconds: number
  /** Busy time of the whole machine since boot. */
  readonly machineCpuSeconds: number
}

/** The last line of `loadgen soak`. */
export interface SoakResult {
  readonly type: "result"
  readonly watchers: number
  readonly clusters: number
  readonly connections: number
  readonly setupSeconds: number
  readonly writerSeconds: number
  readonly updates: number
  readonly updatesPerSecond: number
  readonly deliveries: number
  readonly expected: number
  readonly missing: number
  readonly surplus: number
  readonly shortfalls?: ReadonlyArray<{
    readonly cluster: string
    readonly watchers: number
    readonly updates: number
    readonly expected: number
    readonly received: number
  }>
  readonly drained: boolean
  readonly drainSeconds: number
  readonly outOfOrder: number
  readonly gaps: number
  readonly unexpected: number
  readonly watchErrors: number
  readonly firstWatchError?: string
  readonly reconnects: number
  readonly writerErrors: number
  readonly writerFailed: number
  readonly firstWriterError?: string
  readonly maxLatencyMs: number
  readonly cpu: {
    readonly generatorCpu: number
    readonly serverCpu: number
    readonly otherCpu: number
  }
}

/** Any line of `loadgen soak`. */
export type SoakLine =
  | { readonly type: "ready"; readonly watchers: number; readonly setupSeconds: number }
  | SoakInterval
  | SoakResult

/** Resident memory after warm-up against the figure at its end. */
export interface MemoryJudgement {
  readonly baseline: number
  readonly later: ReadonlyArray<number>
  /** The largest |later / baseline − 1|, in percent; undefined with no later sample. */
  readonly maxChangePercent: number | undefined
  /** The same change with its sign: negative when the largest change is a fall. */
  readonly extremePercent: number | undefined
  /** True within the tolerance, false beyond it, undefined when there is nothing to judge. */
  readonly flat: boolean | undefined
}

/** Judges the samples taken after the warm-up sample `baseline`. */
export const judgeMemory = (
  baseline: number,
  later: ReadonlyArray<number>,
  tolerancePercent: number
): MemoryJudgement => {
  if (later.length === 0) {
    return { baseline, later, maxChangePercent: undefined, extremePercent: undefined, flat: undefined }
  }
  const changes = later.map((rss) => (rss / baseline - 1) * 100)
  const extreme = changes.reduce((a, b) => (Math.abs(b) > Math.abs(a) ? b : a))
  const change = Math.abs(extreme)
  return { baseline, later, maxChangePercent: change, extremePercent: extreme, flat: change <= tolerancePercent }
}

/** The least-squares slope of `points` (x in hours), or undefined with fewer than two points. */
export const slopePerHour = (points: ReadonlyArray<readonly [hours: number, value: number]>): number | undefined => {
  if (points.length < 2) return undefined
  const n = points.length
  const mx = points.reduce((s, [x]) => s + x, 0) / n
  const my = points.reduce((s, [, y]) => s + y, 0) / n
  const sxx = points.reduce((s, [x]) => s + (x - mx) ** 2, 0)
  if (sxx === 0) return undefined
  return points.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0) / sxx
}

/** `m:ss` (or `h:mm:ss`) of a number of seconds. */
export const clock = (seconds: number): string => {
  const total = Math.max(0, Math.round(seconds))
  const h = Math.floor(total / 3600)
  const m = Math.floor((total % 3600) / 60)
  const s = String(total % 60).padStart(2, "0")
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${s}` : `${m}:${s}`
}
