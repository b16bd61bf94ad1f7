/**
 * `npm run bench`: our discovery service against the original Go service
 * (github.com/siderolabs/discovery-service v1.1.0, built from the Go module
 * proxy at the version test/interop/go/go.mod pins), on loopback, with the
 * same load from the same Go generator (test/interop/go/loadgen, over the
 * published discovery-api client stubs) in one run. Prints a table with both
 * figures and the ratio ours/original, then reference rows (the in-process
 * core alone, and a bare grpc-js echo server as the transport's ceiling), and
 * writes everything with the machine description to bench/results/.
 *
 * Options (all optional):
 *   --scale N            clusters of the scale row (default 100000; × 5 affiliates × 2 endpoints)
 *   --duration S         measured seconds per throughput run (default 3; the watch row's sustained phase too)
 *   --warmup S           warm-up seconds before each run (default 1)
 *   --repeat N           runs per unary row and server, interleaved; the table shows medians (default 3)
 *   --gc-interval S      GC period in the scale row (default 3)
 *   --restarts N         restarts from the snapshot in the scale row; load, start → ready and memory are their medians (default 3)
 *   --load-timeout S     most seconds the scale load may take per server (default 300)
 *   --only a,b           rows to run, of update,hello,watch,echo,core,handler,scale,redis,failover,reconnect,threads (default all)
 *   --redis-affiliates N affiliates loaded for the Redis memory row (default 100000)
 *   --failover-nodes N   Go nodes in the failover row (default 20)
 *   --out FILE           where to write the JSON (default bench/results/<timestamp>.json)
 *   --keep-logs          keep the servers' log files (printed at the end)
 *   --ours-arg=FLAG      one more flag for our server (repeatable), e.g. --ours-arg=--keepalive-min-time=0
 *
 * Every process started here is killed at the end, also on failure.
 */
import type { ChildProcess } from "node:child_process"
import { randomBytes } from "node:crypto"
import { spawn } from "node:child_process"
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { relative, resolve } from "node:path"
import { createInterface } from "node:readline"
import { defaultIoThreads } from "../src/cli/command.ts"
import { GoNodes } from "../test/interop/support/goNodes.ts"
import { type LogEvent, lastEvent, parseLog, seconds } from "./logs.ts"
import {
  binDir,
  epochMs,
  exited,
  figure,
  fileSize,
  freePort,
  goModule,
  killAll,
  machine,
  memory,
  option,
  readFrom,
  root,
  run,
  sleep,
  stop,
  table,
  track
} from "./support.ts"
import { affiliateWriter, watcherGroup } from "./reconnect.ts"
import { startTcpBalancer } from "./tcpBalancer.ts"

// ---------------------------------------------------------------- options

const argv = process.argv.slice(2)
const numberOption = (name: string, fallback: number): number => {
  const value = option(name)
  if (value === undefined) return fallback
  const n = Number(value)
  if (!Number.isFinite(n) || n <= 0) throw new Error(`--${name} must be a positive number, got ${value}`)
  return n
}

const allRows = [
  "update",
  "hello",
  "watch",
  "echo",
  "core",
  "handler",
  "scale",
  "redis",
  "failover",
  "reconnect",
  "threads"
] as const
type RowGroup = (typeof allRows)[number]
const only = option("only")?.split(",") ?? [...allRows]
const oursArgs = argv.filter((a) => a.startsWith("--ours-arg=")).map((a) => a.slice("--ours-arg=".length))
for (const name of only) if (!(allRows as ReadonlyArray<string>).includes(name)) throw new Error(`--only: ${name}?`)
const enabled = (group: RowGroup) => only.includes(group)

const options = {
  scale: Math.round(numberOption("scale", 100_000)),
  restarts: Math.round(numberOption("restarts", 3)),
  affiliatesPerCluster: 5,
  endpointsPerAffiliate: 2,
  dataBytes: 256,
  endpointBytes: 32,
  durationSeconds: numberOption("duration", 3),
  repeat: Math.round(numberOption("repeat", 3)),
  warmupSeconds: numberOption("warmup", 1),
  gcIntervalSeconds: numberOption("gc-interval", 3),
  loadTimeoutSeconds: numberOption("load-timeout", 300),
  loadConcurrency: 64,
  updateCallers: [1, 16, 128],
  helloCallers: 16,
  watchChannels: 10,
  watchStreamsPerChannel: 100,
  watchLatencyUpdates: 200,
  watchWindow: 16,
  redisAffiliates: Math.round(numberOption("redis-affiliates", 100_000)),
  failoverNodes: Math.round(numberOption("failover-nodes", 20)),
  stormWatchers: 1000,
  stormNodes: 50,
  stormMissed: [1, 4],
  stormRepeats: 3,
  /** Sealed data and endpoints about the size Talos nodes send. */
  stormDataBytes: 300,
  stormEndpointBytes: 32,
  only
}
const keepLogs = argv.includes("--keep-logs")

const notes = [
  "Load: every call carries an x-real-ip header, round-robin over 16384 labels of the IPv6 documentation " +
    "prefix 2001:db8::/32 (a header label only; no traffic goes there). The original trusts X-Real-IP and " +
    "rate-limits each address to 15 calls/s with bursts of 60 (hard-coded), so spreading the calls keeps every " +
    "address far below that and its limiter never delays a call. Ours runs with --rate-limit-rps=0.",
  "Both servers run as shipped otherwise: request log on (one line per call, written to a file), metrics " +
    "collected, landing and metrics ports off, plaintext h2c on 127.0.0.1. Ours: `npm start`'s command " +
    `(node scripts/start.mjs: the start-up bundle, built before the run as the Go binaries are) on ` +
    `Node ${process.version}; the original: its own binary, GOMAXPROCS = all cores.`,
  `AffiliateUpdate rows: each caller is its own connection and its own cluster of 5 affiliates, updated in turn ` +
    `with ${256} bytes of data that change on every call and two 32-byte endpoints, TTL 30 min. Calls/s are ` +
    "calls started in the measured window; p50/p99 are per-call round trips seen by the generator.",
  "The generator is one Go process on the same 2-core machine as the server; its CPU (user+sys seconds / wall " +
    "seconds, 1.0 = one core) is shown next to each row, as is the server's.",
  "Ratios are ours/original; `ahead` means ours is at least as good (higher throughput, lower latency, time, memory).",
  "Unary rows run --repeat times per server, interleaved; the table shows the median run (p50/p99: the median of " +
    "the runs' percentiles) and `spread` is ±half the range of the runs' calls/s. Every run is in the JSON."
]

// ---------------------------------------------------------------- processes

type Impl = "ours" | "original"
const impls: ReadonlyArray<Impl> = ["ours", "original"]

interface Server {
  readonly impl: Impl
  readonly child: ChildProcess
  readonly pid: number
  readonly address: string
  readonly logPath: string
  readonly spawnedAt: number
}

interface ServerSettings {
  readonly snapshotPath?: string
  readonly gcIntervalSeconds?: number
  readonly debug?: boolean
  /** More flags for our server (the state on Redis). */
  readonly extraArgs?: ReadonlyArray<string>
}

const workDir = mkdtempSync(resolve(tmpdir(), "discovery-bench-"))
const loadgen = resolve(binDir, "loadgen")
const original = resolve(binDir, "discovery-service")

const spawnServer = async (impl: Impl, name: string, settings: ServerSettings = {}): Promise<Server> => {
  const port = await freePort()
  const address = `127.0.0.1:${port}`
  const logPath = resolve(workDir, `${name}.log`)
  const log = openSync(logPath, "a")
  const gc = `${settings.gcIntervalSeconds ?? 60}s`
  const snapshots = settings.snapshotPath === undefined ? [] : [settings.snapshotPath]
  const common = (dash: string) => [
    `${dash}addr=${address}`,
    `${dash}landing-addr=`,
    `${dash}metrics-addr=`,
    `${dash}snapshots-enabled=${snapshots.length > 0}`,
    ...snapshots.flatMap((path) => [`${dash}snapshot-path=${path}`, `${dash}snapshot-interval=1h`]),
    `${dash}gc-interval=${gc}`,
    ...(settings.debug ? [`${dash}debug`] : [])
  ]
  const [command, args] =
    impl === "ours"
      ? [
          process.execPath,
          ["scripts/start.mjs", ...common("--"), "--rate-limit-rps=0", ...oursArgs, ...(settings.extraArgs ?? [])]
        ]
      : [original, common("-")]
  const spawnedAt = epochMs()
  const child = track(spawn(command, args, { cwd: root, stdio: ["ignore", log, log] }))
  closeSync(log)
  if (child.pid === undefined) throw new Error(`could not start ${impl}`)
  return { impl, child, pid: child.pid, address, logPath, spawnedAt }
}

const generator = async <A>(mode: string, args: ReadonlyArray<string>, timeoutSeconds: number): Promise<A> => {
  const out = await run(loadgen, [mode, ...args], (timeoutSeconds + 30) * 1000)
  const last = out.trim().split("\n").at(-1) ?? ""
  return JSON.parse(last) as A
}

/** Loads `clusters` clusters of the bench's affiliates into a server with the generator, as fast as it takes them. */
const loadAffiliates = (address: string, pid: number, clusters: number, prefix: string) =>
  generator<LoadResult>(
    "load",
    [
      `-addr=${address}`,
      `-clusters=${clusters}`,
      `-affiliates=${options.affiliatesPerCluster}`,
      `-endpoints=${options.endpointsPerAffiliate}`,
      `-data-size=${options.dataBytes}`,
      `-concurrency=${options.loadConcurrency}`,
      `-server-pid=${pid}`,
      `-prefix=${prefix}`,
      `-timeout=${options.loadTimeoutSeconds}s`
    ],
    options.loadTimeoutSeconds
  )

interface ReadyResult {
  readonly readyUnixNanos: number
  readonly attempts: number
}

/** Waits until Hello succeeds; returns ms from spawn to that moment. */
const waitReady = async (server: Server, timeoutSeconds = 60): Promise<number> => {
  const ready = generator<ReadyResult>(
    "ready",
    [`-addr=${server.address}`, `-timeout=${timeoutSeconds}s`],
    timeoutSeconds
  )
  const result = await Promise.race([
    ready,
    exited(server.child, (timeoutSeconds + 40) * 1000).then((gone) => {
      if (gone) throw new Error(`${server.impl} exited at start:\n${readFrom(server.logPath, 0, 8192)}`)
      return undefined
    })
  ])
  if (result === undefined) throw new Error(`${server.impl} not ready`)
  return result.readyUnixNanos / 1e6 - server.spawnedAt
}

/** Starts a server and waits until it answers Hello; the ms it took is returned with it. */
const startServer = async (impl: Impl, name: string, settings: ServerSettings = {}) => {
  const server = await spawnServer(impl, name, settings)
  const readyMs = await waitReady(server)
  return { server, readyMs }
}

// ---------------------------------------------------------------- results

interface Cpu {
  readonly generatorCpu: number
  readonly serverCpu: number
  readonly serverCpuSeconds?: number | undefined
  readonly otherCpu?: number | undefined
}
interface Latency {
  readonly p50Ms: number
  readonly p99Ms: number
  readonly maxMs: number
  readonly count: number
}
interface UnaryResult {
  readonly calls: number
  readonly perSecond: number
  readonly latency: Latency
  readonly errors: number
  readonly firstError?: string
  readonly cpu: Cpu
}
interface WatchResult {
  readonly setupSeconds: number
  readonly latencyToLastWatcher: Latency
  readonly latencyToFirstWatcher: Latency
  readonly latencyCpu: Cpu
  readonly sustainedUpdates: number
  readonly deliveriesPerSecond: number
  readonly cpu: Cpu
  readonly errors: number
  readonly firstError?: string
}
interface LoadResult {
  readonly calls: number
  readonly seconds: number
  readonly perSecond: number
  readonly errors: number
  readonly firstError?: string
  readonly cpu: Cpu
}

type Better = "higher" | "lower"

interface Row {
  readonly group: string
  readonly name: string
  readonly unit: string
  readonly better: Better
  ours?: number | undefined
  original?: number | undefined
  oursCpu?: Cpu | undefined
  originalCpu?: Cpu | undefined
  /** Every run's figure when the row was measured more than once. */
  oursRuns?: Array<number>
  originalRuns?: Array<number>
}

const rows: Array<Row> = []
const raw: Record<string, unknown> = {}
const problems: Array<string> = []

const row = (group: string, name: string, unit: string, better: Better): Row => {
  const existing = rows.find((r) => r.group === group && r.name === name)
  if (existing) return existing
  const created: Row = { group, name, unit, better }
  rows.push(created)
  return created
}

const put = (r: Row, impl: Impl, value: number | undefined, cpu?: Cpu) => {
  if (impl === "ours") {
    r.ours = value
    r.oursCpu = cpu
  } else {
    r.original = value
    r.originalCpu = cpu
  }
}

const check = (what: string, result: { readonly errors: number; readonly firstError?: string }) => {
  if (result.errors > 0) problems.push(`${what}: ${result.errors} errors, first: ${result.firstError}`)
}

const log = (text: string) => process.stderr.write(`[bench] ${text}\n`)

// ---------------------------------------------------------------- rows

const durationArgs = () => [`-warmup=${options.warmupSeconds}s`, `-duration=${options.durationSeconds}s`]
const rowTimeout = () => options.warmupSeconds + options.durationSeconds + 60

/** Alternates which server goes first, so neither always runs on a fresher machine. */
let turn = 0
const pair = async (f: (impl: Impl) => Promise<void>) => {
  const order = turn++ % 2 === 0 ? impls : [...impls].reverse()
  for (const impl of order) await f(impl)
}

const runId = Date.now().toString(36)

const medianOf = (values: ReadonlyArray<number>): number => {
  const sorted = [...values].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

const meanCpu = (cpus: ReadonlyArray<Cpu>): Cpu => ({
  generatorCpu: cpus.reduce((a, c) => a + c.generatorCpu, 0) / cpus.length,
  serverCpu: cpus.reduce((a, c) => a + c.serverCpu, 0) / cpus.length,
  otherCpu: cpus.reduce((a, c) => a + (c.otherCpu ?? 0), 0) / cpus.length
})

/** Runs a unary load `options.repeat` times per server, interleaved, and keeps every run. */
const unaryRuns = async (
  targets: ReadonlyArray<{ readonly impl: Impl; readonly address: string; readonly pid: number }>,
  mode: "update" | "hello",
  callers: number,
  label: string
): Promise<Map<Impl, Array<UnaryResult>>> => {
  const runs = new Map<Impl, Array<UnaryResult>>()
  for (let rep = 0; rep < options.repeat; rep++) {
    const order = (turn++ + rep) % 2 === 0 ? targets : [...targets].reverse()
    for (const target of order) {
      log(`${label}: ${target.impl} (run ${rep + 1}/${options.repeat})`)
      const result = await generator<UnaryResult>(
        mode,
        [
          `-addr=${target.address}`,
          `-callers=${callers}`,
          `-server-pid=${target.pid}`,
          `-prefix=${target.impl}-${mode}${callers}-${runId}`,
          ...durationArgs()
        ],
        rowTimeout()
      )
      check(`${label} (${target.impl})`, result)
      runs.set(target.impl, [...(runs.get(target.impl) ?? []), result])
    }
  }
  return runs
}

const unaryLabel = (mode: "update" | "hello", callers: number) =>
  mode === "update" ? `AffiliateUpdate, ${callers} caller${callers > 1 ? "s" : ""}` : `Hello, ${callers} callers`

const unaryRow = async (servers: Record<Impl, Server>, mode: "update" | "hello", callers: number) => {
  const label = unaryLabel(mode, callers)
  const group = mode === "update" ? "AffiliateUpdate (each caller its own connection and cluster)" : "Hello"
  const runs = await unaryRuns(
    impls.map((impl) => ({ impl, address: servers[impl].address, pid: servers[impl].pid })),
    mode,
    callers,
    label
  )
  for (const impl of impls) {
    const results = runs.get(impl) ?? []
    raw[`${mode}-${callers}-${impl}`] = results
    const throughput = row(group, `${label}: calls/s`, "calls/s", "higher")
    put(throughput, impl, medianOf(results.map((r) => r.perSecond)), meanCpu(results.map((r) => r.cpu)))
    throughput[impl === "ours" ? "oursRuns" : "originalRuns"] = results.map((r) => r.perSecond)
    put(row(group, `${label}: p50`, "ms", "lower"), impl, medianOf(results.map((r) => r.latency.p50Ms)))
    put(row(group, `${label}: p99`, "ms", "lower"), impl, medianOf(results.map((r) => r.latency.p99Ms)))
  }
}

/** One run of the generator's watch mode against `address` (comma-separated for several instances). */
const watchRun = (address: string, pids: string, prefix: string) =>
  generator<WatchResult>(
    "watch",
    [
      `-addr=${address}`,
      `-channels=${options.watchChannels}`,
      `-streams=${options.watchStreamsPerChannel}`,
      `-latency-updates=${options.watchLatencyUpdates}`,
      `-window=${options.watchWindow}`,
      `-duration=${options.durationSeconds}s`,
      `-server-pid=${pids}`,
      `-prefix=${prefix}`,
      "-timeout=120s"
    ],
    150
  )

const watchRow = async (servers: Record<Impl, Server>) => {
  const watchers = options.watchChannels * options.watchStreamsPerChannel
  const group = `Watch fan-out (one cluster, ${watchers} watchers on ${options.watchChannels} connections)`
  await pair(async (impl) => {
    const server = servers[impl]
    log(`watch fan-out: ${impl}`)
    const result = await watchRun(server.address, String(server.pid), `${impl}-${runId}`)
    raw[`watch-${impl}`] = result
    check(`watch (${impl})`, result)
    put(
      row(group, "update → last watcher: p50", "ms", "lower"),
      impl,
      result.latencyToLastWatcher.p50Ms,
      result.latencyCpu
    )
    put(row(group, "update → last watcher: p99", "ms", "lower"), impl, result.latencyToLastWatcher.p99Ms)
    put(row(group, "update → first watcher: p50", "ms", "lower"), impl, result.latencyToFirstWatcher.p50Ms)
    put(
      row(group, `sustained deliveries/s (${options.watchWindow} updates in flight)`, "deliveries/s", "higher"),
      impl,
      result.deliveriesPerSecond,
      result.cpu
    )
  })
}

interface GcPass {
  readonly startedAt: number
  readonly ms: number
}

/**
 * GC pass times from the servers' debug log line `garbage collection run`
 * (logged after the pass and the count of what is left; neither server logs a
 * duration). Ours runs a pass, then sleeps the interval (Schedule.spaced), so
 * a pass took (its line − the previous line − interval). The original's
 * passes start on a fixed ticker from its first pass at start-up (empty
 * state, well under a millisecond), so a pass took (its line − its tick).
 * Log times have millisecond resolution.
 */
const gcPasses = (impl: Impl, events: ReadonlyArray<LogEvent>, intervalMs: number): Array<GcPass> => {
  const lines = events.filter((e) => e.message === "garbage collection run").map((e) => e.at)
  const passes: Array<GcPass> = []
  if (impl === "ours") {
    for (let k = 1; k < lines.length; k++) {
      const startedAt = lines[k - 1]! + intervalMs
      passes.push({ startedAt, ms: lines[k]! - startedAt })
    }
  } else {
    const t0 = lines[0]
    if (t0 === undefined) return passes
    for (let k = 1; k < lines.length; k++) {
      const tick = Math.floor((lines[k]! - t0) / intervalMs)
      const startedAt = t0 + tick * intervalMs
      passes.push({ startedAt, ms: lines[k]! - startedAt })
    }
  }
  return passes
}

const median = (values: ReadonlyArray<number>): number | undefined => {
  if (values.length === 0) return undefined
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 2)]
}

const scaleRow = async (impl: Impl) => {
  const clusters = options.scale
  const affiliates = clusters * options.affiliatesPerCluster
  const group = `Scale (${clusters.toLocaleString("en-US")} clusters × ${options.affiliatesPerCluster} affiliates × ${options.endpointsPerAffiliate} endpoints, through the API)`
  const dir = resolve(workDir, `scale-${impl}`)
  mkdirSync(dir, { recursive: true })
  const snapshotPath = resolve(dir, "state.binpb")
  const intervalMs = options.gcIntervalSeconds * 1000

  // 1. A fresh server with snapshots on (saved at shutdown only) and debug logs, which carry the GC lines.
  log(`scale: ${impl}: start`)
  const { server } = await startServer(impl, `scale-${impl}`, {
    snapshotPath,
    gcIntervalSeconds: options.gcIntervalSeconds,
    debug: true
  })
  try {
    const empty = memory(server.pid)
    // Warm up the process and (in the original) its per-address limiter table before the baseline.
    await generator<UnaryResult>(
      "hello",
      [`-addr=${server.address}`, "-callers=16", "-warmup=0s", "-duration=1s", `-prefix=${impl}-warm`],
      10
    )
    await sleep(500)
    const before = memory(server.pid)

    log(`scale: ${impl}: loading ${affiliates.toLocaleString("en-US")} affiliates`)
    const load = await loadAffiliates(server.address, server.pid, clusters, "scale")
    const loadedAt = epochMs()
    raw[`scale-load-${impl}`] = load
    check(`scale load (${impl})`, load)
    const loaded = load.calls - load.errors
    if (loaded < affiliates) {
      problems.push(
        `scale (${impl}): only ${loaded} of ${affiliates} affiliates loaded in ${options.loadTimeoutSeconds} s`
      )
    }
    const logOffset = fileSize(server.logPath)

    // 2. GC passes that began after the load ended (and whose timing base did too).
    log(`scale: ${impl}: waiting for GC passes`)
    const head = parseLog(readFrom(server.logPath, 0, 256 * 1024), server.spawnedAt)
    const firstGc = head.find((e) => e.message === "garbage collection run")
    let passes: Array<GcPass> = []
    const deadline = Date.now() + intervalMs * 6 + 30_000
    while (Date.now() < deadline) {
      await sleep(500)
      const tail = parseLog(readFrom(server.logPath, logOffset), loadedAt)
      const events = impl === "original" && firstGc !== undefined ? [firstGc, ...tail] : tail
      passes = gcPasses(impl, events, intervalMs).filter((p) => p.startedAt >= loadedAt + 200)
      if (passes.length >= 3) break
    }
    await sleep(200)
    const after = memory(server.pid)

    // 3. Save at shutdown.
    log(`scale: ${impl}: stopping (final save)`)
    const savedCleanly = await stop(server.child, "SIGTERM", 60_000)
    const events = parseLog(readFrom(server.logPath, logOffset), loadedAt)
    const saved = lastEvent(events, "state saved")
    if (!savedCleanly) problems.push(`scale (${impl}): did not stop within 60 s after SIGTERM`)
    if (saved === undefined) problems.push(`scale (${impl}): no "state saved" line`)

    // 4. Restarts from the snapshot (killed, so the file stays as saved): spawn → first successful Hello.
    const restarts: Array<{
      readonly readyMs: number
      readonly memory: { rss: number; hwm: number }
      readonly loaded: LogEvent["fields"] | undefined
    }> = []
    for (let round = 0; round < options.restarts; round++) {
      log(`scale: ${impl}: restart from the snapshot (${round + 1}/${options.restarts})`)
      const restarted = await spawnServer(impl, `scale-${impl}-restart-${round}`, { snapshotPath })
      let readyMs: number
      let afterRestore: { rss: number; hwm: number }
      try {
        readyMs = await waitReady(restarted, 120)
        await sleep(500)
        afterRestore = memory(restarted.pid)
      } finally {
        await stop(restarted.child, "SIGKILL", 5000)
      }
      const loadedLine = lastEvent(
        parseLog(readFrom(restarted.logPath, 0, 1024 * 1024), restarted.spawnedAt),
        "state loaded"
      )
      if (loadedLine === undefined) problems.push(`scale (${impl}): no "state loaded" line`)
      restarts.push({ readyMs, memory: afterRestore, loaded: loadedLine?.fields })
    }
    const readyMs = median(restarts.map((r) => r.readyMs))
    const loadedMs = median(
      restarts.flatMap((r) => {
        const loadedSeconds = seconds(r.loaded?.duration)
        return loadedSeconds === undefined ? [] : [loadedSeconds * 1000]
      })
    )

    // What the server says it holds when it saves (the original can lose an affiliate to its GC race, quirk Q3).
    const held = typeof saved?.fields.affiliates === "number" ? saved.fields.affiliates : loaded
    if (held !== loaded) problems.push(`scale (${impl}): ${loaded} affiliates loaded, ${held} saved`)
    const perAffiliate = (rss: number, base: number) => (held > 0 ? (rss - base) / held : undefined)
    const gcMs = median(passes.map((p) => p.ms))
    const savedSeconds = seconds(saved?.fields.duration)
    raw[`scale-${impl}`] = {
      load,
      memoryAtStart: empty,
      memoryBefore: before,
      memoryAfterLoad: after,
      gcPasses: passes,
      saved: saved?.fields,
      restarts,
      snapshotFileBytes: fileSize(snapshotPath)
    }
    put(
      row(group, "load through the API (64 callers; debug logging on)", "calls/s", "higher"),
      impl,
      load.perSecond,
      load.cpu
    )
    put(
      row(group, "resident memory per affiliate (VmRSS after − before)", "bytes", "lower"),
      impl,
      perAffiliate(after.rss, before.rss)
    )
    put(
      row(
        group,
        `resident memory per affiliate, restarted from the snapshot (median of ${options.restarts})`,
        "bytes",
        "lower"
      ),
      impl,
      median(restarts.map((r) => perAffiliate(r.memory.rss, empty.rss) ?? Number.NaN))
    )
    put(row(group, `GC pass, nothing expired (median of ${passes.length})`, "ms", "lower"), impl, gcMs)
    put(
      row(group, "snapshot save (state saved: duration)", "ms", "lower"),
      impl,
      savedSeconds === undefined ? undefined : savedSeconds * 1000
    )
    put(row(group, "snapshot size", "bytes", "lower"), impl, fileSize(snapshotPath))
    put(
      row(group, `snapshot load (state loaded: duration; median of ${options.restarts})`, "ms", "lower"),
      impl,
      loadedMs
    )
    put(
      row(group, `start → ready with the snapshot (spawn → Hello OK; median of ${options.restarts})`, "ms", "lower"),
      impl,
      readyMs
    )
  } finally {
    await stop(server.child, "SIGKILL", 5000)
    rmSync(dir, { recursive: true, force: true })
  }
}

// ---------------------------------------------------------------- state on Redis

/** A redis-server of the bench's own, on a free loopback port in the work folder, without persistence. */
const startRedisServer = async () => {
  const port = await freePort()
  const dir = resolve(workDir, `redis-${port}`)
  mkdirSync(dir, { recursive: true })
  const child = track(
    spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no"],
      {
        stdio: "ignore"
      }
    )
  )
  for (let i = 0; i < 200; i++) {
    if ((await run("redis-cli", ["-p", String(port), "PING"], 5000).catch(() => "")).includes("PONG")) break
    await sleep(25)
  }
  return { port, pid: child.pid!, child, url: `redis://127.0.0.1:${port}` }
}

const redisMemory = async (port: number): Promise<number> => {
  const info = await run("redis-cli", ["-p", String(port), "INFO", "memory"], 5000)
  return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? Number.NaN)
}

/** A server (or several, their addresses comma-separated) measured under a name of its own. */
interface StateTarget {
  readonly name: string
  readonly impl: Impl
  readonly address: string
  readonly pids: string
}

/**
 * One unary load on every target, `--repeat` times interleaved: for each of
 * ours, its calls/s, p99 and server CPU per call, each beside the original
 * target's in the same run.
 */
const namedUnaryRows = async (
  group: string,
  targets: ReadonlyArray<StateTarget>,
  mode: "update" | "hello",
  callers: number,
  prefix: string
) => {
  const runs = new Map<string, Array<UnaryResult>>()
  for (let rep = 0; rep < options.repeat; rep++) {
    const order = (turn++ + rep) % 2 === 0 ? targets : [...targets].reverse()
    for (const target of order) {
      log(`${prefix}: ${unaryLabel(mode, callers)}: ${target.name} (run ${rep + 1}/${options.repeat})`)
      const result = await generator<UnaryResult>(
        mode,
        [
          `-addr=${target.address}`,
          `-callers=${callers}`,
          `-server-pid=${target.pids}`,
          `-prefix=${prefix}-${mode}-${target.name.replaceAll(" ", "-")}-${callers}-${rep}-${runId}`,
          ...durationArgs()
        ],
        rowTimeout()
      )
      check(`${prefix} ${target.name}, ${mode}, ${callers} callers`, result)
      runs.set(target.name, [...(runs.get(target.name) ?? []), result])
    }
  }
  const originalRuns = runs.get("original") ?? []
  for (const target of targets.filter((t) => t.impl === "ours")) {
    const results = runs.get(target.name) ?? []
    raw[`${prefix}-${mode}-${callers}-${target.name}`] = results
    const label = `${unaryLabel(mode, callers)}, ${target.name}`
    const throughput = row(group, `${label}: calls/s`, "calls/s", "higher")
    put(throughput, "ours", medianOf(results.map((r) => r.perSecond)), meanCpu(results.map((r) => r.cpu)))
    put(throughput, "original", medianOf(originalRuns.map((r) => r.perSecond)), meanCpu(originalRuns.map((r) => r.cpu)))
    throughput.oursRuns = results.map((r) => r.perSecond)
    throughput.originalRuns = originalRuns.map((r) => r.perSecond)
    const p99 = row(group, `${label}: p99`, "ms", "lower")
    put(p99, "ours", medianOf(results.map((r) => r.latency.p99Ms)))
    put(p99, "original", medianOf(originalRuns.map((r) => r.latency.p99Ms)))
    const cpuPerCall = (r: UnaryResult) =>
      (((r.cpu as Cpu & { serverCpuSeconds?: number }).serverCpuSeconds ?? 0) * 1e6) / r.calls
    const cpu = row(group, `${label}: server CPU per call`, "µs", "lower")
    put(cpu, "ours", medianOf(results.map(cpuPerCall)))
    put(cpu, "original", medianOf(originalRuns.map(cpuPerCall)))
  }
  raw[`${prefix}-${mode}-${callers}-original`] = originalRuns
}

/**
 * The watch load on every target: update → last watcher p50 and p99 and,
 * with `deliveries`, the sustained deliveries per second, each of ours
 * beside the original target's.
 */
const namedWatchRows = async (
  group: string,
  targets: ReadonlyArray<StateTarget>,
  prefix: string,
  deliveries: boolean
) => {
  const watches = new Map<string, WatchResult>()
  for (const target of targets) {
    log(`${prefix}: watch delivery: ${target.name}`)
    const result = await watchRun(
      target.address,
      target.pids,
      `${prefix}-watch-${target.name.replaceAll(" ", "-")}-${runId}`
    )
    check(`${prefix} watch ${target.name}`, result)
    raw[`${prefix}-watch-${target.name}`] = result
    watches.set(target.name, result)
  }
  const originalWatch = watches.get("original")
  for (const target of targets.filter((t) => t.impl === "ours")) {
    const result = watches.get(target.name)
    for (const [which, pick] of [
      ["p50", (w: WatchResult) => w.latencyToLastWatcher.p50Ms],
      ["p99", (w: WatchResult) => w.latencyToLastWatcher.p99Ms]
    ] as const) {
      const r = row(group, `watch delivery, ${target.name}: update → last watcher ${which}`, "ms", "lower")
      put(r, "ours", result === undefined ? undefined : pick(result), result?.latencyCpu)
      put(r, "original", originalWatch === undefined ? undefined : pick(originalWatch), originalWatch?.latencyCpu)
    }
    if (deliveries) {
      const r = row(group, `watch, ${target.name}: sustained deliveries/s`, "deliveries/s", "higher")
      put(r, "ours", result?.deliveriesPerSecond, result?.cpu)
      put(r, "original", originalWatch?.deliveriesPerSecond, originalWatch?.cpu)
    }
  }
}

/** Servers started for one group of rows, each with its own flags, to be killed together at its end. */
const serverGroup = () => {
  const started: Array<Server> = []
  const start = async (impl: Impl, name: string, extraArgs: ReadonlyArray<string> = []) => {
    const { server } = await startServer(impl, name, { extraArgs })
    started.push(server)
    return server
  }
  return { start, started }
}

/**
 * The rows of the I/O threads: every AffiliateUpdate, Hello and Watch load
 * for our server with `--io-threads 1`, with its default (auto) and with
 * the threads fixed at the cores available (at least 2), beside the
 * original in the same run, with server CPU per call (all threads of the
 * process).
 */
const threadsRows = async () => {
  const { start, started } = serverGroup()
  try {
    const one = await start("ours", "threads-one", ["--io-threads=1"])
    const standard = await start("ours", "threads-default")
    const fixed = await start("ours", "threads-fixed", [`--io-threads=${Math.max(2, defaultIoThreads())}`])
    const original = await start("original", "threads-original")
    const targets: ReadonlyArray<StateTarget> = [
      { name: "--io-threads 1", impl: "ours", address: one.address, pids: String(one.pid) },
      {
        name: `default (auto, 1 to ${defaultIoThreads()} I/O threads)`,
        impl: "ours",
        address: standard.address,
        pids: String(standard.pid)
      },
      {
        name: `--io-threads ${Math.max(2, defaultIoThreads())}`,
        impl: "ours",
        address: fixed.address,
        pids: String(fixed.pid)
      },
      { name: "original", impl: "original", address: original.address, pids: String(original.pid) }
    ]
    const group = "I/O threads (ours: as named; original: same run)"
    for (const callers of options.updateCallers) await namedUnaryRows(group, targets, "update", callers, "threads")
    await namedUnaryRows(group, targets, "hello", options.helloCallers, "threads")
    await namedWatchRows(group, targets, "threads", true)
  } finally {
    for (const server of started) await stop(server.child, "SIGKILL", 5000)
  }
}

/**
 * The rows of several instances sharing one Redis: AffiliateUpdate at each
 * caller count and watch delivery for our server in memory, one instance on
 * Redis and two instances on the same Redis (the generator's connections
 * spread over both, their CPU summed), each beside the original (in memory)
 * in the same run; then Redis's memory per affiliate.
 */
const redisRows = async () => {
  const redis = await startRedisServer()
  const { start, started } = serverGroup()
  try {
    const state = (prefix: string) => [`--state=${redis.url}`, `--state-key-prefix=${prefix}`]
    const memoryOurs = await start("ours", "state-memory")
    const original = await start("original", "state-original")
    const one = await start("ours", "state-redis-one", state("one:"))
    const twoA = await start("ours", "state-redis-two-a", state("two:"))
    const twoB = await start("ours", "state-redis-two-b", state("two:"))
    const targets: ReadonlyArray<StateTarget> = [
      { name: "in memory", impl: "ours", address: memoryOurs.address, pids: String(memoryOurs.pid) },
      { name: "one instance on Redis", impl: "ours", address: one.address, pids: String(one.pid) },
      {
        name: "two instances on Redis",
        impl: "ours",
        address: `${twoA.address},${twoB.address}`,
        pids: `${twoA.pid},${twoB.pid}`
      },
      { name: "original", impl: "original", address: original.address, pids: String(original.pid) }
    ]
    const group = "State on Redis (ours: as named; original: in memory, same run)"
    for (const callers of options.updateCallers) await namedUnaryRows(group, targets, "update", callers, "state")
    await namedWatchRows(group, targets, "state", false)
    const clusters = Math.max(1, Math.round(options.redisAffiliates / options.affiliatesPerCluster))
    const before = await redisMemory(redis.port)
    log(`state: loading ${(clusters * options.affiliatesPerCluster).toLocaleString("en-US")} affiliates into Redis`)
    const load = await loadAffiliates(one.address, one.pid, clusters, "state-memory")
    check("state memory load", load)
    const after = await redisMemory(redis.port)
    const loaded = load.calls - load.errors
    raw["state-redis-memory"] = { before, after, loaded, load }
    put(
      row(
        group,
        `Redis memory per affiliate (used_memory after − before, ${loaded.toLocaleString("en-US")} affiliates, ${options.endpointsPerAffiliate} endpoints, ${options.dataBytes} B data)`,
        "bytes",
        "lower"
      ),
      "ours",
      loaded > 0 ? (after - before) / loaded : undefined
    )
  } finally {
    for (const server of started) await stop(server.child, "SIGKILL", 5000)
    await stop(redis.child, "SIGKILL", 5000)
  }
}

/**
 * Real Go discovery-client nodes behind a TCP balancer over two instances on
 * one Redis, and a writer node on the second: once all see each other, the
 * first instance is killed (kill -9) and the writer publishes a change; each
 * node's time from the kill to seeing that change (its client reconnects
 * through the balancer to the instance left) is measured, polled every 50 ms.
 */
const failoverRow = async () => {
  const redis = await startRedisServer()
  const group = "State on Redis (ours: as named; original: in memory, same run)"
  const flags = [`--state=${redis.url}`, "--state-key-prefix=failover:"]
  const { server: victim } = await startServer("ours", "failover-a", { extraArgs: flags })
  const { server: survivor } = await startServer("ours", "failover-b", { extraArgs: flags })
  const balancer = await startTcpBalancer([victim.address, survivor.address])
  const go = new GoNodes(resolve(binDir, "nodes"))
  try {
    const key = randomBytes(32)
    const cluster = `failover-${runId}`
    const names = Array.from({ length: options.failoverNodes }, (_, i) => `n${i}`)
    log(`state: failover: ${names.length} Go nodes behind a balancer over two instances`)
    for (const name of names) {
      await go.start(name, { endpoint: `127.0.0.1:${balancer.port}`, cluster, key, ttl: "1m" })
      await go.set(name, { hostname: name })
    }
    await go.start("writer", { endpoint: survivor.address, cluster, key, ttl: "1m" })
    await go.set("writer", { hostname: "before" })
    for (const name of names) {
      await go.until(
        name,
        (peers) => peers.length === names.length && peers.some((p) => p.hostname === "before"),
        60_000
      )
    }
    victim.child.kill("SIGKILL")
    const killedAt = performance.now()
    await go.set("writer", { hostname: "after" })
    const times = await Promise.all(
      names.map(async (name) => {
        await go.until(name, (peers) => peers.some((p) => p.hostname === "after"), 60_000)
        return performance.now() - killedAt
      })
    )
    raw["state-failover"] = { nodes: names.length, millis: times }
    const sorted = [...times].sort((x, y) => x - y)
    put(
      row(group, `kill -9 of an instance → its nodes receive again (${names.length} Go nodes): median`, "ms", "lower"),
      "ours",
      medianOf(sorted)
    )
    put(
      row(
        group,
        `kill -9 of an instance → its nodes receive again (${names.length} Go nodes): last node`,
        "ms",
        "lower"
      ),
      "ours",
      sorted.at(-1)
    )
  } finally {
    await go.close()
    balancer.close()
    for (const server of [victim, survivor]) await stop(server.child, "SIGKILL", 5000)
    await stop(redis.child, "SIGKILL", 5000)
  }
}

// ---------------------------------------------------------------- reconnect storm

interface StormResult {
  readonly bytes: number
  readonly millis: number
  readonly resumed: number
}

let storms = 0

/** Runs a storm `options.stormRepeats` times: the median bytes and time, the fewest resumed. */
const stormRuns = async (once: () => Promise<StormResult>): Promise<StormResult & { runs: Array<StormResult> }> => {
  const runs: Array<StormResult> = []
  for (let i = 0; i < options.stormRepeats; i++) runs.push(await once())
  return {
    bytes: medianOf(runs.map((r) => r.bytes)),
    millis: medianOf(runs.map((r) => r.millis)),
    resumed: Math.min(...runs.map((r) => r.resumed)),
    runs
  }
}

/**
 * One reconnect storm: the watchers become current on `first`, lose their
 * connections (`lose`: drop them, or kill their instance), `missed` changes
 * are written through `writeTo`, and they come back on `second`, resuming or
 * not. Measured: bytes their new connections read and the time until every
 * watcher is current.
 */
const storm = async (
  first: string,
  second: string,
  writeTo: string,
  missed: number,
  resume: boolean,
  lose?: () => Promise<void>
): Promise<StormResult> => {
  const cluster = `storm-${runId}-${storms++}`
  const setup = affiliateWriter(first)
  const endpoint = () => randomBytes(options.stormEndpointBytes)
  for (let i = 0; i < options.stormNodes; i++) {
    await setup.update(cluster, `node-${i}`, randomBytes(options.stormDataBytes), [endpoint(), endpoint()])
  }
  setup.close()
  const group = watcherGroup(cluster, options.stormWatchers, 100)
  group.connect(first, false)
  await group.current(undefined, 60_000)
  const revision = group.watchers[0]!.position?.revision
  group.drop()
  await lose?.()
  const writer = affiliateWriter(writeTo)
  for (let i = 0; i < missed; i++) await writer.update(cluster, `node-${i}`, randomBytes(options.stormDataBytes), [])
  writer.close()
  const started = performance.now()
  group.connect(second, resume)
  await group.current(revision === undefined ? undefined : revision + missed, 60_000)
  const result = {
    millis: performance.now() - started,
    bytes: group.bytesRead(),
    resumed: group.watchers.filter((w) => w.start === "resumed").length
  }
  group.drop()
  return result
}

const reconnectRows = async () => {
  const group = `Reconnect storm: ${options.stormWatchers} watchers of a ${options.stormNodes}-node cluster come back`
  const report = (name: string, impl: Impl, result: StormResult) => {
    put(row(group, `${name}: bytes sent`, "KiB", "lower"), impl, result.bytes / 1024)
    put(row(group, `${name}: until all current`, "ms", "lower"), impl, result.millis)
    if (impl === "ours") put(row(group, `${name}: watches resumed`, "watches", "higher"), impl, result.resumed)
  }
  const results: Record<string, StormResult & { runs: Array<StormResult> }> = {}
  for (const impl of impls) {
    const { server } = await startServer(impl, `storm-${impl}`)
    try {
      for (const missed of options.stormMissed) {
        for (const resume of impl === "ours" ? [false, true] : [false]) {
          log(`reconnect: ${impl} in memory, ${missed} missed, ${resume ? "resuming" : "from snapshots"}`)
          const name = `in memory (server stays up), ${missed} missed, ${resume ? "resumed" : "snapshot"}`
          const result = await stormRuns(() => storm(server.address, server.address, server.address, missed, resume))
          results[`${impl} ${name}`] = result
          report(name, impl, result)
        }
      }
    } finally {
      await stop(server.child, "SIGTERM", 10_000)
    }
  }
  const redis = await startRedisServer()
  const flags = [`--state=${redis.url}`, "--state-key-prefix=storm:"]
  const { server: survivor } = await startServer("ours", "storm-survivor", { extraArgs: flags })
  try {
    for (const missed of options.stormMissed) {
      for (const resume of [false, true]) {
        log(`reconnect: ours on Redis, instance killed, ${missed} missed, ${resume ? "resuming" : "from snapshots"}`)
        const name = `on Redis (their instance killed), ${missed} missed, ${resume ? "resumed" : "snapshot"}`
        const result = await stormRuns(async () => {
          const { server: victim } = await startServer("ours", `storm-victim-${storms}`, { extraArgs: flags })
          const kill = async () => {
            victim.child.kill("SIGKILL")
            await exited(victim.child, 10_000)
          }
          return storm(victim.address, survivor.address, survivor.address, missed, resume, kill)
        })
        results[`ours ${name}`] = result
        report(name, "ours", result)
      }
    }
  } finally {
    await stop(survivor.child, "SIGKILL", 5000)
    await stop(redis.child, "SIGKILL", 5000)
  }
  raw.reconnect = results
  for (const missed of options.stormMissed) {
    for (const where of ["in memory (server stays up)", "on Redis (their instance killed)"]) {
      const snapshot = results[`ours ${where}, ${missed} missed, snapshot`]
      const resumed = results[`ours ${where}, ${missed} missed, resumed`]
      if (snapshot === undefined || resumed === undefined) continue
      put(
        row(group, `${where}, ${missed} missed: bytes of snapshots ÷ bytes resumed`, "×", "higher"),
        "ours",
        snapshot.bytes / resumed.bytes
      )
    }
  }
}

// ---------------------------------------------------------------- references

interface CoreResult {
  readonly store: { readonly perSecond: number }
  readonly state: { readonly perSecond: number }
  readonly fanOut: { readonly perSecond: number; readonly watchers: number }
}

interface Reference {
  readonly name: string
  readonly value: number | undefined
  readonly unit: string
  readonly comparedWith: string
  readonly ours: number | undefined
  generatorCpu?: number
  otherCpu?: number | undefined
}
const references: Array<Reference> = []

const oursValue = (name: string) => rows.find((r) => r.name === name)?.ours

const coreReference = async () => {
  log("reference: in-process core")
  const out = await run(
    process.execPath,
    ["bench/core.ts", "--warmup", String(options.warmupSeconds), "--duration", String(options.durationSeconds)],
    (options.warmupSeconds + options.durationSeconds) * 3000 + 60_000
  )
  const core = JSON.parse(out.trim().split("\n").at(-1)!) as CoreResult
  raw.core = core
  const best = Math.max(
    ...options.updateCallers.map((c) => oursValue(`AffiliateUpdate, ${c} caller${c > 1 ? "s" : ""}: calls/s`) ?? 0)
  )
  references.push(
    {
      name: "core: ClusterStore.update (synchronous, no validation)",
      value: core.store.perSecond,
      unit: "updates/s",
      comparedWith: "ours: best AffiliateUpdate calls/s",
      ours: best || undefined
    },
    {
      name: "core: ClusterState.update (Effect service, validation)",
      value: core.state.perSecond,
      unit: "updates/s",
      comparedWith: "ours: best AffiliateUpdate calls/s",
      ours: best || undefined
    },
    {
      name: `core: fan-out to ${core.fanOut.watchers} in-process watchers`,
      value: core.fanOut.perSecond,
      unit: "deliveries/s",
      comparedWith: "ours: sustained watch deliveries/s",
      ours: rows.find((r) => r.name.startsWith("sustained deliveries/s"))?.ours
    }
  )
}

/** The crossing between threads alone (`bench/crossing.ts`): a no-op call from a worker thread to the main thread. */
const crossingReference = async () => {
  log("reference: the crossing between threads alone")
  const out = await run(
    process.execPath,
    ["bench/crossing.ts", "--duration", String(options.durationSeconds)],
    options.durationSeconds * 8000 + 60_000
  )
  const result = JSON.parse(out.trim().split("\n").at(-1)!) as {
    readonly crossing: ReadonlyArray<{
      readonly inFlight: number
      readonly perSecond: number
      readonly cpuMicrosPerCall: number
    }>
    readonly floor: ReadonlyArray<{
      readonly kind: "post" | "shared"
      readonly perSecond: number
      readonly cpuMicrosPerCall: number
    }>
  }
  raw.crossing = result
  for (const row of result.crossing) {
    references.push({
      name: `crossing alone: a no-op call from a worker thread to the main thread and back, ${row.inFlight} in flight (process CPU ${row.cpuMicrosPerCall} µs a call)`,
      value: row.perSecond,
      unit: "calls/s",
      comparedWith: "–",
      ours: undefined
    })
  }
  for (const row of result.floor) {
    const how = row.kind === "post" ? "a MessagePort message each way" : "shared memory and Atomics.waitAsync"
    references.push({
      name: `crossing floor: an empty round trip between two threads over ${how}, 1 in flight (process CPU ${row.cpuMicrosPerCall} µs each)`,
      value: row.perSecond,
      unit: "round trips/s",
      comparedWith: "–",
      ours: undefined
    })
  }
}

interface HandlerRate {
  readonly nsPerCall: number
  readonly bestNsPerCall: number
}

const handlerReference = async () => {
  log("reference: service handlers without the transport")
  const logPath = resolve(workDir, "handler.log")
  const log_ = openSync(logPath, "w")
  const child = track(
    spawn(
      process.execPath,
      ["bench/handler.ts", "--warmup", String(options.warmupSeconds), "--duration", String(options.durationSeconds)],
      { cwd: root, stdio: ["ignore", log_, "pipe"] }
    )
  )
  closeSync(log_)
  let stderr = ""
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const finished = await exited(child, (options.warmupSeconds + options.durationSeconds) * 4000 + 60_000)
  rmSync(logPath, { force: true })
  if (!finished || child.exitCode !== 0) throw new Error(`bench/handler.ts failed:\n${stderr}`)
  const result = JSON.parse(stderr.trim().split("\n").at(-1)!) as { update: HandlerRate; hello: HandlerRate }
  raw.handler = result
  const best = () =>
    Math.max(...options.updateCallers.map((c) => oursValue(`${unaryLabel("update", c)}: calls/s`) ?? 0)) || undefined
  references.push(
    {
      name: "service alone, AffiliateUpdate (decode, handler, request log to a file, encode)",
      value: 1e9 / result.update.nsPerCall,
      unit: "calls/s",
      comparedWith: "ours: best AffiliateUpdate calls/s",
      ours: best()
    },
    {
      name: "service alone, Hello",
      value: 1e9 / result.hello.nsPerCall,
      unit: "calls/s",
      comparedWith: `ours: ${unaryLabel("hello", options.helloCallers)}`,
      ours: oursValue(`${unaryLabel("hello", options.helloCallers)}: calls/s`)
    }
  )
}

const echoReference = async () => {
  log("reference: grpc-js echo server")
  const port = await freePort()
  const child = track(
    spawn(process.execPath, ["bench/echoServer.ts", `127.0.0.1:${port}`], {
      cwd: root,
      stdio: ["ignore", "pipe", "inherit"]
    })
  )
  try {
    const lines = createInterface({ input: child.stdout! })
    const started = await Promise.race([
      new Promise<boolean>((r) => lines.once("line", () => r(true))),
      sleep(30_000).then(() => false)
    ])
    if (!started) throw new Error("echo server did not start")
    const address = `127.0.0.1:${port}`
    const cases: Array<["update" | "hello", number]> = [
      ...options.updateCallers.map((c): ["update", number] => ["update", c]),
      ["hello", options.helloCallers]
    ]
    for (const [mode, callers] of cases) {
      const label = unaryLabel(mode, callers)
      const runs = await unaryRuns([{ impl: "ours", address, pid: child.pid! }], mode, callers, `echo ${label}`)
      const results = runs.get("ours") ?? []
      raw[`echo-${mode}-${callers}`] = results
      references.push({
        name: `grpc-js echo (empty unary, no decode): ${label}`,
        value: medianOf(results.map((r) => r.perSecond)),
        unit: "calls/s",
        comparedWith: `ours: ${label}`,
        ours: oursValue(`${label}: calls/s`),
        generatorCpu: meanCpu(results.map((r) => r.cpu)).generatorCpu,
        otherCpu: meanCpu(results.map((r) => r.cpu)).otherCpu
      })
    }
  } finally {
    await stop(child, "SIGTERM", 5000)
  }
}

// ---------------------------------------------------------------- main

const build = async () => {
  mkdirSync(binDir, { recursive: true })
  for (const [name, target] of [
    ["discovery-service", "github.com/siderolabs/discovery-service/cmd/discovery-service"],
    ["loadgen", "./loadgen"],
    ["nodes", "./nodes"]
  ] as const) {
    log(`go build ${target}`)
    await run("go", ["build", "-o", resolve(binDir, name), target], 600_000, goModule)
  }
  log("node scripts/bundle.ts (our start-up bundle)")
  await run(process.execPath, ["scripts/bundle.ts"], 120_000, root)
}

const cpuCell = (cpu: Cpu | undefined, key: "generatorCpu" | "serverCpu") =>
  cpu === undefined ? "" : cpu[key].toFixed(2)

const report = (startedAt: Date, info: ReturnType<typeof machine>) => {
  const lines: Array<string> = []
  lines.push("")
  lines.push(`discovery service benchmark, ${startedAt.toISOString()}`)
  lines.push(
    `${info.cpuModel}, ${info.cores} cores, ${(info.memoryBytes / 2 ** 30).toFixed(1)} GiB, Linux ${info.kernel}`
  )
  lines.push(
    `Node ${info.node}; ${info.go}; commit ${info.commit}${info.uncommittedChanges ? " (with uncommitted changes)" : ""}`
  )
  lines.push("")
  const groups = [...new Set(rows.map((r) => r.group))]
  for (const group of groups) {
    lines.push(group)
    lines.push(
      table(
        ["row", "unit", "ours", "original", "ours/orig", "", "spread o/g", "gen CPU o/g", "srv CPU o/g"],
        rows
          .filter((r) => r.group === group)
          .map((r) => {
            const ratio =
              r.ours !== undefined && r.original !== undefined && r.original !== 0 ? r.ours / r.original : undefined
            const ahead =
              ratio === undefined ? "" : (r.better === "higher" ? ratio >= 1 : ratio <= 1) ? "ahead" : "behind"
            const cpu =
              r.oursCpu || r.originalCpu
                ? [
                    `${cpuCell(r.oursCpu, "generatorCpu")}/${cpuCell(r.originalCpu, "generatorCpu")}`,
                    `${cpuCell(r.oursCpu, "serverCpu")}/${cpuCell(r.originalCpu, "serverCpu")}`
                  ]
                : ["", ""]
            const spread = (runs: ReadonlyArray<number> | undefined, middle: number | undefined) =>
              runs === undefined || runs.length < 2 || !middle
                ? ""
                : `±${((50 * (Math.max(...runs) - Math.min(...runs))) / middle).toFixed(0)}%`
            const spreads =
              r.oursRuns || r.originalRuns ? `${spread(r.oursRuns, r.ours)}/${spread(r.originalRuns, r.original)}` : ""
            return [
              `  ${r.name}`,
              r.unit,
              figure(r.ours),
              figure(r.original),
              ratio === undefined ? "–" : `${ratio.toFixed(2)}×`,
              ahead,
              spreads,
              ...cpu
            ]
          })
      )
    )
    lines.push("")
  }
  if (references.length > 0) {
    lines.push("Reference rows (no Go server): how much of the ceiling the service keeps")
    lines.push(
      table(
        ["reference", "figure", "unit", "compared with", "ours", "ours/ref", "gen CPU"],
        references.map((r) => [
          `  ${r.name}`,
          figure(r.value),
          r.unit,
          r.comparedWith,
          figure(r.ours),
          r.ours !== undefined && r.value ? `${((100 * r.ours) / r.value).toFixed(1)}%` : "–",
          r.generatorCpu === undefined ? "" : r.generatorCpu.toFixed(2)
        ])
      )
    )
    lines.push("")
  }
  lines.push("Notes")
  for (const note of notes) lines.push(`- ${note}`)
  if (problems.length > 0) {
    lines.push("")
    lines.push("Problems during the run")
    for (const problem of problems) lines.push(`- ${problem}`)
  }
  return lines.join("\n")
}

const main = async () => {
  const startedAt = new Date()
  const info = machine()
  if (enabled("scale") && options.scale !== 100_000) {
    notes.push(`Scale row scaled to ${options.scale} clusters (--scale) instead of the issue's 100,000.`)
  }
  if (enabled("scale")) {
    notes.push(
      "Scale row: the load runs with both servers in debug logging (needed for the GC lines), so its calls/s are " +
        "informational. Resident memory is VmRSS after the load and a few GC passes minus VmRSS after start-up " +
        "and a 1 s warm-up, divided by the affiliates held (the count in `state saved`); it includes whatever garbage each runtime still " +
        "holds. GC pass: see gcPasses in bench/run.ts (debug log lines, 1 ms resolution, nothing expires). " +
        "Save: the shutdown save after SIGTERM (both log `state saved` with its duration), one per run. Load, " +
        `start → ready and memory after a restart: the medians of ${options.restarts} new processes on that ` +
        "snapshot with default logging, each killed once measured; ready is the first successful Hello, polled " +
        "every 2 ms from the spawn."
    )
  }
  await build()

  const servers = {} as Record<Impl, Server>
  const startup: Record<string, number> = {}
  try {
    if (enabled("update") || enabled("hello") || enabled("watch")) {
      for (const impl of impls) {
        log(`starting ${impl}`)
        const { server, readyMs } = await startServer(impl, impl)
        servers[impl] = server
        startup[impl] = readyMs
        put(row("Start-up", "start → ready, empty state (spawn → Hello OK)", "ms", "lower"), impl, readyMs)
      }
      if (enabled("update")) for (const callers of options.updateCallers) await unaryRow(servers, "update", callers)
      if (enabled("hello")) await unaryRow(servers, "hello", options.helloCallers)
      if (enabled("watch")) await watchRow(servers)
      for (const impl of impls) {
        const rss = memory(servers[impl].pid)
        raw[`memory-after-throughput-${impl}`] = rss
        await stop(servers[impl].child, "SIGTERM", 10_000)
      }
    }
    if (enabled("core")) await coreReference()
    if (enabled("handler")) await handlerReference()
    if (enabled("echo")) await echoReference()
    if (enabled("scale")) for (const impl of impls) await scaleRow(impl)
    if (enabled("redis")) await redisRows()
    if (enabled("threads")) await threadsRows()
    if (enabled("threads")) await crossingReference()
    if (enabled("failover")) await failoverRow()
    if (enabled("reconnect")) await reconnectRows()
  } finally {
    for (const impl of impls) if (servers[impl]) await stop(servers[impl].child, "SIGKILL", 5000)
  }

  const busy = [
    ...rows.flatMap((r) => [r.oursCpu?.otherCpu, r.originalCpu?.otherCpu]),
    ...references.map((r) => r.otherCpu)
  ].filter((other) => (other ?? 0) > 0.15)
  if (busy.length > 0) {
    problems.push(
      `other processes used more than 0.15 of a core during ${busy.length} measurement(s) ` +
        "(see otherCpu in the JSON); those figures are disturbed"
    )
  }
  const text = report(startedAt, info)
  process.stdout.write(`${text}\n`)
  const outPath =
    option("out") ??
    resolve(
      root,
      "bench/results",
      `${startedAt
        .toISOString()
        .replaceAll(":", "-")
        .replace(/\.\d+Z$/, "Z")}.json`
    )
  mkdirSync(resolve(outPath, ".."), { recursive: true })
  const json = {
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    machine: info,
    options,
    notes,
    problems,
    rows: rows.map((r) => ({
      ...r,
      ratio: r.ours !== undefined && r.original !== undefined && r.original !== 0 ? r.ours / r.original : undefined
    })),
    references,
    raw,
    table: text
  }
  writeFileSync(outPath, `${JSON.stringify(json, null, 2)}\n`)
  // The repository lints bench/**: format the file the way biome would (best effort).
  if (!relative(root, outPath).startsWith("..")) {
    await run(resolve(root, "node_modules/.bin/biome"), ["format", "--write", outPath], 60_000).catch((error) =>
      log(`could not format ${outPath}: ${error instanceof Error ? error.message : String(error)}`)
    )
  }
  process.stdout.write(`\nwritten: ${outPath}\n`)
}

try {
  await main()
} catch (error) {
  process.stderr.write(`[bench] failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
  process.exitCode = 1
} finally {
  killAll()
  if (keepLogs) process.stderr.write(`[bench] logs kept in ${workDir}\n`)
  else rmSync(workDir, { recursive: true, force: true })
}
