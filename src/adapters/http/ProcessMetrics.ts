/**
 * Process and Node.js runtime metrics under the standard Prometheus names
 * (those of the Go client's process collector and of prom-client's Node
 * defaults), computed when the registry is read. The Linux-only ones (file
 * descriptors, virtual memory) are registered only where `/proc` exists.
 *
 * @since 0.1.0
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { monitorEventLoopDelay } from "node:perf_hooks"
import { getHeapSpaceStatistics } from "node:v8"
import type { Scope } from "effect"
import { Effect, Metric } from "effect"
import * as Collected from "./collected.ts"

const counter = (name: string, description: string) => Metric.counter(name, { description, incremental: true })
const gauge = (name: string, description: string) => Metric.gauge(name, { description })

/** Reads the soft "Max open files" limit from /proc/self/limits. */
const maxFds = (): number => {
  const line = readFileSync("/proc/self/limits", "utf8")
    .split("\n")
    .find((l) => l.startsWith("Max open files"))
  const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0]
  return soft === undefined || soft === "unlimited" ? Number.POSITIVE_INFINITY : Number(soft)
}

/** Reads VmSize from /proc/self/status, in bytes. */
const virtualMemory = (): number => {
  const match = /^VmSize:\s+(\d+) kB$/m.exec(readFileSync("/proc/self/status", "utf8"))
  return match === null ? Number.NaN : Number(match[1]) * 1024
}

const lagStatistics = ["min", "max", "mean", "stddev", "p50", "p90", "p99"] as const

/**
 * Registers the process and runtime series in the current metric registry
 * until the scope closes (which also stops the event-loop delay monitor).
 *
 * Series: `process_cpu_user_seconds_total`, `process_cpu_system_seconds_total`,
 * `process_cpu_seconds_total` (counters); `process_start_time_seconds`,
 * `process_resident_memory_bytes`, and on Linux `process_virtual_memory_bytes`,
 * `process_open_fds`, `process_max_fds` (gauges); `nodejs_heap_size_total_bytes`,
 * `nodejs_heap_size_used_bytes`, `nodejs_external_memory_bytes`,
 * `nodejs_heap_space_size_{total,used,available}_bytes{space}`,
 * `nodejs_eventloop_lag_{min,max,mean,stddev,p50,p90,p99}_seconds` (over the
 * time since the previous read) and `nodejs_version_info{version,major,minor,patch}`
 * (gauges).
 *
 * @category constructors
 * @since 0.1.0
 */
export const register: Effect.Effect<void, never, Scope.Scope> = Effect.gen(function* () {
  const cpu = Collected.oncePerSnapshot(() => process.cpuUsage())
  yield* Collected.counter(
    counter("process_cpu_user_seconds_total", "Total user CPU time spent in seconds."),
    () => cpu().user / 1e6
  )
  yield* Collected.counter(
    counter("process_cpu_system_seconds_total", "Total system CPU time spent in seconds."),
    () => cpu().system / 1e6
  )
  yield* Collected.counter(
    counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds."),
    () => (cpu().user + cpu().system) / 1e6
  )

  const startTime = Math.round(Date.now() - process.uptime() * 1000) / 1000
  yield* Collected.gauge(
    gauge("process_start_time_seconds", "Start time of the process since unix epoch in seconds."),
    () => startTime
  )
  yield* Collected.gauge(gauge("process_resident_memory_bytes", "Resident memory size in bytes."), () =>
    process.memoryUsage.rss()
  )
  if (existsSync("/proc/self/fd")) {
    yield* Collected.gauge(gauge("process_virtual_memory_bytes", "Virtual memory size in bytes."), virtualMemory)
    // readdir holds one descriptor of its own while it lists the directory.
    yield* Collected.gauge(
      gauge("process_open_fds", "Number of open file descriptors."),
      () => readdirSync("/proc/self/fd").length - 1
    )
    yield* Collected.gauge(gauge("process_max_fds", "Maximum number of open file descriptors."), maxFds)
  }

  const memory = Collected.oncePerSnapshot(() => process.memoryUsage())
  yield* Collected.gauge(
    gauge("nodejs_heap_size_total_bytes", "Process heap size from Node.js in bytes."),
    () => memory().heapTotal
  )
  yield* Collected.gauge(
    gauge("nodejs_heap_size_used_bytes", "Process heap size used from Node.js in bytes."),
    () => memory().heapUsed
  )
  yield* Collected.gauge(
    gauge("nodejs_external_memory_bytes", "Node.js external memory size in bytes."),
    () => memory().external
  )

  const spaces = Collected.oncePerSnapshot(() => new Map(getHeapSpaceStatistics().map((s) => [s.space_name, s])))
  for (const { space_name } of getHeapSpaceStatistics()) {
    const space = space_name.replace(/_space$/, "")
    const of = () => spaces().get(space_name)
    yield* Collected.gauge(
      Metric.withAttributes(
        gauge("nodejs_heap_space_size_total_bytes", "Process heap space size total from Node.js in bytes."),
        { space }
      ),
      () => of()?.space_size ?? 0
    )
    yield* Collected.gauge(
      Metric.withAttributes(
        gauge("nodejs_heap_space_size_used_bytes", "Process heap space size used from Node.js in bytes."),
        { space }
      ),
      () => of()?.space_used_size ?? 0
    )
    yield* Collected.gauge(
      Metric.withAttributes(
        gauge("nodejs_heap_space_size_available_bytes", "Process heap space size available from Node.js in bytes."),
        { space }
      ),
      () => of()?.space_available_size ?? 0
    )
  }

  const delay = yield* Effect.acquireRelease(
    Effect.sync(() => {
      const histogram = monitorEventLoopDelay({ resolution: 10 })
      histogram.enable()
      return histogram
    }),
    (histogram) => Effect.sync(() => histogram.disable())
  )
  // One read per scrape, then a reset, so each scrape covers the time since the previous one.
  const lag = Collected.oncePerSnapshot(() => {
    const seen = delay.count > 0
    const seconds = (nanos: number) => (seen ? nanos / 1e9 : 0)
    const values = {
      min: seconds(delay.min),
      max: seconds(delay.max),
      mean: seconds(delay.mean),
      stddev: seconds(delay.stddev),
      p50: seconds(delay.percentile(50)),
      p90: seconds(delay.percentile(90)),
      p99: seconds(delay.percentile(99))
    }
    delay.reset()
    return values
  })
  for (const statistic of lagStatistics) {
    yield* Collected.gauge(
      gauge(`nodejs_eventloop_lag_${statistic}_seconds`, `The ${statistic} of the recorded event loop delays.`),
      () => lag()[statistic]
    )
  }

  const [major, minor, patch] = process.versions.node.split(".")
  yield* Collected.gauge(
    Metric.withAttributes(gauge("nodejs_version_info", "Node.js version info."), {
      version: process.version,
      major: major ?? "",
      minor: minor ?? "",
      patch: patch ?? ""
    }),
    () => 1
  )
})
