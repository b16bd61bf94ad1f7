/**
 * `npm run soak`: the long soak of the reliability scripts. Starts the service
 * the way `npm start` does (scripts/start.mjs) on loopback, opens --watchers
 * Watch streams over --clusters clusters with the Go load generator
 * (test/interop/go/loadgen, mode `soak`: real discovery-api stubs, 100 streams
 * per connection, each stream its own x-real-ip label so the rate limiter
 * stays on), and has it write --rate AffiliateUpdates per second over those
 * clusters for --duration. Every update must reach every watcher of its
 * cluster, in order; the highest resident memory of each --sample window after
 * the warm-up (--warmup, default a third of the run) must stay within
 * --tolerance of the highest of the window that ends the warm-up (a full
 * collection can lower the memory at one instant for a while, which is why
 * peaks are compared). Prints a row per --sample and
 * a one-line verdict, and writes everything with the machine description to
 * bench/results/soak-<timestamp>.json. Exits 0 on PASS, 1 otherwise.
 *
 *   --duration 30m   --sample 5m   --report (sample/6, 1–10 s)   --drain 30s
 *   --watchers 10000 --streams 100 --clusters 100 --affiliates 5 --rate 50 --data-size 256
 *   --tolerance 5    --warmup (a third of --duration)   --server-arg=FLAG (repeatable)   --out FILE   --keep-logs
 */
import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { relative, resolve } from "node:path"
import { createInterface } from "node:readline"
import {
  clock,
  judgeMemory,
  type MemoryJudgement,
  type ProcessSample,
  parseOptions,
  type SoakInterval,
  type SoakLine,
  type SoakResult,
  sampleServer,
  slopePerHour
} from "./soakSupport.ts"
import {
  binDir,
  exited,
  figure,
  goModule,
  killAll,
  machine,
  readFrom,
  root,
  run,
  sleep,
  stop,
  table,
  track
} from "./support.ts"

const options = parseOptions(process.argv.slice(2))
const workDir = mkdtempSync(resolve(tmpdir(), "discovery-soak-"))
const loadgen = resolve(binDir, "loadgen")
const mib = (bytes: number | undefined) => (bytes === undefined ? undefined : bytes / 2 ** 20)
const log = (text: string) => process.stderr.write(`[soak] ${text}\n`)
/** A change in percent with its sign. */
const signed = (percent: number) => `${percent >= 0 ? "+" : ""}${percent.toFixed(1)} %`
/** A count for the table: whole, thousands separated. */
const count = (value: number | undefined): string =>
  value === undefined ? "–" : Math.round(value).toLocaleString("en-US")

interface Server {
  readonly child: ChildProcess
  readonly pid: number
  readonly address: string
  readonly metricsPort: number | undefined
  readonly logPath: string
  readonly args: ReadonlyArray<string>
}

/** Starts the service as `npm start` does, on ports the system picks; waits (at most 60 s) for it to listen. */
const startServer = async (): Promise<Server> => {
  const logPath = resolve(workDir, "server.log")
  const fd = openSync(logPath, "a")
  const args = [
    "scripts/start.mjs",
    "--addr=127.0.0.1:0",
    "--landing-addr=",
    "--metrics-addr=127.0.0.1:0",
    "--snapshots-enabled=false",
    "--trust-x-real-ip",
    ...options.serverArgs
  ]
  const child = track(spawn(process.execPath, args, { cwd: root, stdio: ["ignore", fd, fd] }))
  closeSync(fd)
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`the server exited at start:\n${readFrom(logPath, 0, 8192)}`)
    }
    const line = readFrom(logPath, 0, 1 << 20)
      .split("\n")
      .find((l) => l.includes('"discovery service listening"'))
    if (line !== undefined) {
      const annotations = (JSON.parse(line) as { annotations: { port: number; metrics_port?: number } }).annotations
      return {
        child,
        pid: child.pid!,
        address: `127.0.0.1:${annotations.port}`,
        metricsPort: annotations.metrics_port,
        logPath,
        args
      }
    }
    await sleep(50)
  }
  throw new Error(`the server did not listen within 60 s:\n${readFrom(logPath, 0, 8192)}`)
}

/** What the server's log says besides successful calls: levels, failed calls by method and code, other messages. */
const summarizeLog = (path: string) => {
  const levels: Record<string, number> = {}
  const failedCalls: Record<string, number> = {}
  const messages: Record<string, number> = {}
  const notJson: Array<string> = []
  let lines = 0
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line === "") continue
    lines++
    let entry: { message?: unknown; level?: unknown; annotations?: { code?: unknown } }
    try {
      entry = JSON.parse(line)
    } catch {
      if (notJson.length < 20) notJson.push(line)
      continue
    }
    const level = String(entry.level)
    levels[level] = (levels[level] ?? 0) + 1
    const message = String(entry.message)
    const code = entry.annotations?.code
    if (message.startsWith("/")) {
      if (code !== "OK")
        failedCalls[`${message} ${String(code)}`] = (failedCalls[`${message} ${String(code)}`] ?? 0) + 1
    } else if (message !== "discovery service listening") {
      messages[`${level} ${message}`] = (messages[`${level} ${message}`] ?? 0) + 1
    }
  }
  return { lines, levels, failedCalls, messages, notJson }
}

/** A sample at the end of row `index` (k × --sample after the writer started; -1: after the load ended). */
interface CoarseSample {
  readonly index: number
  readonly seconds: number
  readonly sample: ProcessSample
}

interface Row {
  readonly index: number
  readonly label: string
  readonly seconds: number
  readonly rss: number
  /** The lowest and highest resident memory of the finer samples in the window. */
  readonly rssLow: number | undefined
  readonly rssHigh: number | undefined
  readonly heapUsed: number | undefined
  /** The lowest heap in use of the finer samples in the window: what survives the collections, near enough. */
  readonly heapLow: number | undefined
  readonly external: number | undefined
  readonly serverCpu: number | undefined
  /** Cores the rest of the machine kept busy over the window (neither the server nor the generator). */
  readonly otherCpu: number | undefined
  readonly updatesPerSecond: number | undefined
  readonly deliveriesPerSecond: number | undefined
  readonly p99Ms: number | undefined
  readonly maxMs: number | undefined
  readonly inFlight: number | undefined
  readonly watchErrors: number | undefined
  readonly subscriptions: number | undefined
}

/** A finer sample, `seconds` after the writer started. */
interface FineSample {
  readonly seconds: number
  readonly sample: ProcessSample
}

/**
 * One row per coarse sample: the process at that moment, the range of the
 * finer samples since the previous row, and the load over the generator's
 * intervals whose middle falls in the row's window.
 */
const rows = (
  coarse: ReadonlyArray<CoarseSample>,
  fine: ReadonlyArray<FineSample>,
  intervals: ReadonlyArray<SoakInterval>
): Array<Row> => {
  const reportSeconds = options.reportMs / 1000
  const windowEnd = (c: CoarseSample) => (c.index < 0 ? Number.POSITIVE_INFINITY : (c.index * options.sampleMs) / 1000)
  return coarse.map((c, i): Row => {
    const previous = coarse[i - 1]
    const inWindow = intervals.filter((line) => {
      const middle = line.seconds - reportSeconds / 2
      return previous !== undefined && middle > windowEnd(previous) && middle <= windowEnd(c)
    })
    const wall = previous === undefined ? 0 : (c.sample.at - previous.sample.at) / 1000
    const covered = inWindow.reduce(
      (s, line) => s + line.seconds - (intervals[intervals.indexOf(line) - 1]?.seconds ?? 0),
      0
    )
    const last = inWindow.at(-1)
    const before = inWindow.length === 0 ? undefined : intervals[intervals.indexOf(inWindow[0]!) - 1]
    const other =
      before === undefined || last === undefined
        ? undefined
        : (last.machineCpuSeconds -
            before.machineCpuSeconds -
            (last.serverCpuSeconds - before.serverCpuSeconds) -
            (last.generatorCpuSeconds - before.generatorCpuSeconds)) /
          (last.seconds - before.seconds)
    const sum = (pick: (line: SoakInterval) => number) => inWindow.reduce((s, line) => s + pick(line), 0)
    const writing = inWindow.filter((line) => line.latency.count > 0)
    const samples = fine.filter((f) => previous !== undefined && f.seconds > previous.seconds && f.seconds <= c.seconds)
    const rssAll = [...samples.map((f) => f.sample.rss), c.sample.rss]
    const heaps = [...samples, c].flatMap((f) => f.sample.metrics.heapUsed ?? [])
    return {
      index: c.index,
      label: c.index < 0 ? `after ${clock(c.seconds)}` : clock(c.seconds),
      seconds: c.seconds,
      rss: c.sample.rss,
      rssLow: previous === undefined ? undefined : Math.min(...rssAll),
      rssHigh: previous === undefined ? undefined : Math.max(...rssAll),
      heapUsed: c.sample.metrics.heapUsed,
      heapLow: previous === undefined || heaps.length === 0 ? undefined : Math.min(...heaps),
      external: c.sample.metrics.external,
      serverCpu: previous === undefined ? undefined : (c.sample.cpuSeconds - previous.sample.cpuSeconds) / wall,
      otherCpu: other === undefined ? undefined : Math.max(0, other),
      updatesPerSecond: inWindow.length === 0 ? undefined : sum((l) => l.updates) / covered,
      deliveriesPerSecond: inWindow.length === 0 ? undefined : sum((l) => l.deliveries) / covered,
      p99Ms: writing.length === 0 ? undefined : Math.max(...writing.map((l) => l.latency.p99Ms)),
      maxMs: writing.length === 0 ? undefined : Math.max(...writing.map((l) => l.latency.maxMs)),
      inFlight: last === undefined ? undefined : Math.max(0, last.inFlight),
      watchErrors: last?.watchErrors,
      subscriptions: c.sample.metrics.subscriptions
    }
  })
}

/** The table; "peak vs warm-up" compares each window's highest resident memory with the warm-up's last window's. */
const renderRows = (all: ReadonlyArray<Row>, baseline: number | undefined, warmIndex: number): string =>
  table(
    [
      "t",
      "RSS MiB",
      "peak vs warm-up",
      "RSS range",
      "heap MiB",
      "heap low",
      "ext MiB",
      "srv CPU",
      "other CPU",
      "updates/s",
      "deliveries/s",
      "p99 ms",
      "max ms",
      "in flight",
      "watch errs",
      "watches"
    ],
    all.map((r) => [
      r.label,
      figure(mib(r.rss)),
      baseline === undefined || r.index <= warmIndex ? "" : signed(((r.rssHigh ?? r.rss) / baseline - 1) * 100),
      r.rssLow === undefined ? "" : `${figure(mib(r.rssLow))}–${figure(mib(r.rssHigh))}`,
      figure(mib(r.heapUsed)),
      figure(mib(r.heapLow)),
      figure(mib(r.external)),
      r.serverCpu === undefined ? "" : r.serverCpu.toFixed(2),
      r.otherCpu === undefined ? "" : r.otherCpu.toFixed(2),
      figure(r.updatesPerSecond),
      figure(r.deliveriesPerSecond),
      figure(r.p99Ms),
      figure(r.maxMs),
      count(r.inFlight),
      count(r.watchErrors),
      count(r.subscriptions)
    ])
  )

interface Check {
  readonly name: string
  readonly ok: boolean
  readonly detail: string
}

const checksOf = (
  result: SoakResult | undefined,
  crash: string | undefined,
  answered: boolean,
  exit: { readonly code: number | null; readonly signal: string | null; readonly ms: number } | undefined,
  memory: MemoryJudgement | undefined
): Array<Check> => {
  const checks: Array<Check> = [
    { name: "no crash", ok: crash === undefined, detail: crash ?? "the server ran throughout" }
  ]
  if (result === undefined) {
    checks.push({ name: "load finished", ok: false, detail: "the load generator gave no result" })
  } else {
    checks.push(
      {
        name: "every delivery",
        ok: result.missing === 0 && result.surplus === 0 && result.expected > 0,
        detail:
          `${count(result.deliveries)} of ${count(result.expected)} deliveries ` +
          `(${count(result.missing)} missing, ${count(result.surplus)} extra)`
      },
      {
        name: "in order",
        ok: result.outOfOrder === 0 && result.gaps === 0 && result.unexpected === 0,
        detail: `${result.outOfOrder} out of order, ${result.gaps} skipped, ${result.unexpected} unexpected messages`
      },
      {
        name: "no watcher ended",
        ok: result.watchErrors === 0,
        detail:
          `${result.watchErrors} watch errors, ${result.reconnects} reconnects` +
          (result.firstWatchError ? ` (first: ${result.firstWatchError})` : "")
      },
      {
        name: "every update accepted",
        ok: result.writerErrors === 0 && result.writerFailed === 0,
        detail:
          `${result.writerErrors} failed calls, ${result.writerFailed} updates given up` +
          (result.firstWriterError ? ` (first: ${result.firstWriterError})` : "")
      }
    )
  }
  checks.push(
    { name: "answers afterwards", ok: answered, detail: answered ? "Hello answered" : "Hello failed" },
    {
      name: "exit 0 on SIGTERM",
      ok: exit?.code === 0,
      detail: exit === undefined ? "not stopped" : `code ${exit.code}, signal ${exit.signal}, ${exit.ms} ms`
    }
  )
  if (memory?.flat !== undefined) {
    checks.push({
      name: "memory flat",
      ok: memory.flat,
      detail:
        `largest change after warm-up ${signed(memory.extremePercent!)} (limit ±${options.tolerancePercent} %)` +
        (memory.extremePercent! < -options.tolerancePercent ? ": a fall, memory given back rather than grown" : "")
    })
  }
  return checks
}

const main = async () => {
  const startedAt = new Date()
  const info = machine()
  mkdirSync(binDir, { recursive: true })
  log("go build ./loadgen")
  await run("go", ["build", "-o", loadgen, "./loadgen"], 600_000, goModule)
  log("node scripts/bundle.ts (the start-up bundle npm start runs)")
  await run(process.execPath, ["scripts/bundle.ts"], 120_000, root)

  const serverStartedAt = Date.now()
  const server = await startServer()
  log(`server pid ${server.pid} on ${server.address}, metrics on ${server.metricsPort}; log ${server.logPath}`)
  let stopping = false
  let crash: string | undefined
  let generator: ChildProcess | undefined
  server.child.once("exit", (code, signal) => {
    if (stopping) return
    crash = `the server exited (code ${code}, signal ${signal})`
    log(crash)
    generator?.kill("SIGKILL")
  })

  const samples: Array<ProcessSample> = []
  const coarse: Array<CoarseSample> = []
  const intervals: Array<SoakInterval> = []
  let result: SoakResult | undefined
  let readyAt: number | undefined
  /** Seconds from the writer's start (from the server's start until the watchers are open). */
  const since = (at: number) => (at - (readyAt ?? serverStartedAt)) / 1000
  const take = async () => {
    if (crash !== undefined || stopping) return undefined
    try {
      return await sampleServer(server.pid, server.metricsPort)
    } catch {
      return undefined
    }
  }
  let sampling = false
  const sampler = setInterval(async () => {
    if (sampling) return
    sampling = true
    const sample = await take()
    if (sample !== undefined) samples.push(sample)
    sampling = false
  }, options.reportMs)
  const timers: Array<NodeJS.Timeout> = []
  const coarseCount = Math.floor(options.durationMs / options.sampleMs)

  const setupTimeoutSeconds = Math.max(120, options.drainMs / 1000 + 60)
  const args = [
    "soak",
    `-addr=${server.address}`,
    `-server-pid=${server.pid}`,
    `-channels=${options.watchers / options.streams}`,
    `-streams=${options.streams}`,
    `-clusters=${options.clusters}`,
    `-affiliates=${options.affiliates}`,
    `-rate=${options.rate}`,
    `-duration=${options.durationMs}ms`,
    `-report=${options.reportMs}ms`,
    `-drain=${options.drainMs}ms`,
    `-data-size=${options.dataBytes}`,
    `-timeout=${setupTimeoutSeconds}s`,
    `-prefix=soak-${startedAt.getTime().toString(36)}`
  ]
  log(`loadgen ${args.join(" ")}`)
  generator = track(spawn(loadgen, args, { cwd: root, stdio: ["ignore", "pipe", "pipe"] }))
  let stderr = ""
  generator.stderr!.on("data", (chunk: Buffer) => {
    if (stderr.length < 64 * 1024) stderr += chunk.toString()
  })
  createInterface({ input: generator.stdout! }).on("line", (text) => {
    let line: SoakLine
    try {
      line = JSON.parse(text) as SoakLine
    } catch {
      log(`loadgen: ${text}`)
      return
    }
    if (line.type === "ready") {
      readyAt = Date.now()
      log(
        `${line.watchers} watchers open in ${line.setupSeconds.toFixed(1)} s; writing for ${clock(options.durationMs / 1000)}`
      )
      for (let k = 0; k <= coarseCount; k++) {
        // The last row is taken just before the writer stops, while every watcher is still open.
        const at = Math.min(k * options.sampleMs, options.durationMs - Math.min(1000, options.reportMs / 2))
        timers.push(
          setTimeout(async () => {
            const sample = await take()
            if (sample !== undefined) coarse.push({ index: k, seconds: since(sample.at), sample })
          }, at)
        )
      }
    } else if (line.type === "interval") {
      intervals.push(line)
      log(
        `${clock(line.seconds)} ${line.phase}: ${count(line.updatesTotal)} updates, ` +
          `${count(line.deliveriesTotal)}/${count(line.expectedTotal)} deliveries, p99 ${figure(line.latency.p99Ms)} ms, ` +
          `watch errors ${line.watchErrors}, RSS ${figure(mib(samples.at(-1)?.rss))} MiB`
      )
    } else {
      result = line
    }
  })

  const bound = setupTimeoutSeconds * 1000 + options.durationMs + 120_000
  const finished = await exited(generator, bound)
  if (!finished) {
    log(`the load generator did not finish within ${bound} ms; killing it`)
    generator.kill("SIGKILL")
    await exited(generator, 5000)
  }
  for (const timer of timers) clearTimeout(timer)
  clearInterval(sampler)
  while (sampling) await sleep(10)
  const fine: Array<FineSample> = samples.map((sample) => ({ seconds: since(sample.at), sample }))
  if (result === undefined && crash === undefined) log(`the load generator failed:\n${stderr}`)

  const end = await take()
  if (end !== undefined) coarse.push({ index: -1, seconds: since(end.at), sample: end })
  coarse.sort((a, b) => a.seconds - b.seconds)

  let answered = false
  if (crash === undefined) {
    answered = await run(loadgen, ["ready", `-addr=${server.address}`, "-timeout=10s"], 40_000).then(
      () => true,
      () => false
    )
  }
  let exit: { code: number | null; signal: string | null; ms: number } | undefined
  if (crash === undefined) {
    stopping = true
    const signalledAt = Date.now()
    await stop(server.child, "SIGTERM", 15_000)
    exit = { code: server.child.exitCode, signal: server.child.signalCode, ms: Date.now() - signalledAt }
  }
  const serverLog = summarizeLog(server.logPath)

  const table_ = rows(coarse, fine, intervals)
  const warm = coarse.find((c) => c.index === 1)
  // Each window is judged by its highest resident memory: a sample at one instant may fall just after a full
  // collection, which V8 and glibc give back only for a while, so the windows' peaks are what a leak would raise.
  const warmIndex = Math.round(options.warmupMs / options.sampleMs)
  const warmRow = table_.find((r) => r.index === warmIndex)
  const memoryJudgement =
    warm === undefined || warmRow === undefined
      ? undefined
      : judgeMemory(
          warmRow.rssHigh ?? warmRow.rss,
          table_.filter((r) => r.index > warmIndex).map((r) => r.rssHigh ?? r.rss),
          options.tolerancePercent
        )
  const writerEnd = options.durationMs / 1000
  const afterWarmUp = fine.filter((f) => warm !== undefined && f.seconds >= warm.seconds && f.seconds <= writerEnd)
  const trend = {
    rssMiBPerHour: slopePerHour(afterWarmUp.map((f) => [f.seconds / 3600, mib(f.sample.rss)!] as const)),
    heapUsedMiBPerHour: slopePerHour(
      afterWarmUp
        .filter((f) => f.sample.metrics.heapUsed !== undefined)
        .map((f) => [f.seconds / 3600, mib(f.sample.metrics.heapUsed)!] as const)
    ),
    rssMinMiB: afterWarmUp.length === 0 ? undefined : mib(Math.min(...afterWarmUp.map((f) => f.sample.rss))),
    rssMaxMiB: afterWarmUp.length === 0 ? undefined : mib(Math.max(...afterWarmUp.map((f) => f.sample.rss))),
    peakRssMiB: mib(end?.hwm ?? fine.at(-1)?.sample.hwm),
    heapLowWarmUpMiB: mib(table_.find((r) => r.index === 1)?.heapLow),
    heapLowLastMiB: mib(table_.findLast((r) => r.index > 1)?.heapLow)
  }
  const checks = checksOf(result, crash, answered, exit, memoryJudgement)
  const pass = checks.every((c) => c.ok)
  const memoryText =
    memoryJudgement === undefined
      ? "memory not judged (no sample after the warm-up)"
      : memoryJudgement.flat === undefined
        ? `RSS ${figure(mib(memoryJudgement.baseline))} MiB after warm-up, not judged (needs --duration ≥ 2 × --sample)`
        : `RSS ${figure(mib(memoryJudgement.baseline))} MiB after warm-up, largest change then ` +
          `${signed(memoryJudgement.extremePercent!)} (limit ±${options.tolerancePercent} %)`
  const verdict =
    `soak ${
      pass
        ? "PASS"
        : `FAIL (${checks
            .filter((c) => !c.ok)
            .map((c) => c.name)
            .join(", ")})`
    }: ` +
    `${count(options.watchers)} watchers × ${clock(options.durationMs / 1000)}, ` +
    (result === undefined
      ? "no load result"
      : `${count(result.updates)} updates → ${count(result.deliveries)}/${count(result.expected)} deliveries, ` +
        `${count(result.missing)} missing, ${result.outOfOrder + result.gaps} out of order, ` +
        `${result.watchErrors} watcher ends`) +
    `; ${memoryText}; ${exit === undefined ? crash : `exit ${exit.code} on SIGTERM`}`

  const lines: Array<string> = []
  lines.push("")
  lines.push(`discovery service soak, ${startedAt.toISOString()}`)
  lines.push(
    `${info.cpuModel}, ${info.cores} cores, ${(info.memoryBytes / 2 ** 30).toFixed(1)} GiB, Linux ${info.kernel}; ` +
      `Node ${info.node}; ${info.go}; commit ${info.commit}${info.uncommittedChanges ? " (with uncommitted changes)" : ""}`
  )
  lines.push(
    `${count(options.watchers)} watchers (${options.watchers / options.streams} connections × ${options.streams}) over ` +
      `${options.clusters} clusters of ${options.affiliates} affiliates; writer ${options.rate} updates/s for ` +
      `${clock(options.durationMs / 1000)}; a row every ${clock(options.sampleMs / 1000)} (the first ` +
      `${clock(options.warmupMs / 1000)} are the warm-up; "after": once the generator closed its watchers); ` +
      "p99/max: update sent → delta received, " +
      "worst interval of the window; other CPU: cores the rest of the machine kept busy"
  )
  lines.push("")
  lines.push(renderRows(table_, warmRow?.rssHigh, warmIndex))
  lines.push("")
  if (result !== undefined) {
    lines.push(
      `load: watchers open in ${result.setupSeconds.toFixed(1)} s; ${figure(result.updatesPerSecond)} updates/s; ` +
        `drain ${result.drainSeconds.toFixed(2)} s; max latency ${figure(result.maxLatencyMs)} ms; CPU over the ` +
        `writing (cores): server ${result.cpu.serverCpu.toFixed(2)}, generator ${result.cpu.generatorCpu.toFixed(2)}, ` +
        `other processes ${result.cpu.otherCpu.toFixed(2)}`
    )
  }
  lines.push(
    `memory from the warm-up to the writer's end (${afterWarmUp.length} samples over ` +
      `${clock((afterWarmUp.at(-1)?.seconds ?? 0) - (afterWarmUp[0]?.seconds ?? 0))}): RSS ${figure(trend.rssMinMiB)}–${figure(trend.rssMaxMiB)} MiB, ` +
      `trend ${figure(trend.rssMiBPerHour)} MiB/h (heap used ${figure(trend.heapUsedMiBPerHour)} MiB/h); ` +
      `peak RSS ${figure(trend.peakRssMiB)} MiB; heap low-water ${figure(trend.heapLowWarmUpMiB)} MiB in the ` +
      `warm-up window, ${figure(trend.heapLowLastMiB)} MiB in the last` +
      (trend.heapLowWarmUpMiB !== undefined && trend.heapLowLastMiB !== undefined
        ? ` (${signed((trend.heapLowLastMiB / trend.heapLowWarmUpMiB - 1) * 100)})`
        : "")
  )
  lines.push(
    `server log: ${serverLog.lines} lines ${JSON.stringify(serverLog.levels)}; failed calls ` +
      `${JSON.stringify(serverLog.failedCalls)}; other messages ${JSON.stringify(serverLog.messages)}` +
      (serverLog.notJson.length > 0 ? `; not JSON: ${serverLog.notJson.slice(0, 3).join(" | ")}` : "")
  )
  for (const check of checks) lines.push(`  ${check.ok ? "ok  " : "FAIL"} ${check.name}: ${check.detail}`)
  lines.push("")
  lines.push(verdict)
  const text = lines.join("\n")
  process.stdout.write(`${text}\n`)

  const outPath =
    options.out ??
    resolve(
      root,
      "bench/results",
      `soak-${startedAt
        .toISOString()
        .replaceAll(":", "-")
        .replace(/\.\d+Z$/, "Z")}.json`
    )
  mkdirSync(resolve(outPath, ".."), { recursive: true })
  const json = {
    kind: "soak",
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    machine: info,
    options,
    server: { args: server.args, exit, crash, answeredAfterwards: answered, log: serverLog },
    verdict: { pass, line: verdict, checks, memory: memoryJudgement, trend },
    rows: table_,
    result,
    generatorStderr: stderr === "" ? undefined : stderr,
    intervals,
    samples: fine.map((f) => ({ seconds: f.seconds, ...f.sample })),
    table: text
  }
  writeFileSync(outPath, `${JSON.stringify(json, null, 2)}\n`)
  if (!relative(root, outPath).startsWith("..")) {
    await run(resolve(root, "node_modules/.bin/biome"), ["format", "--write", outPath], 60_000).catch(() => undefined)
  }
  process.stdout.write(`\nwritten: ${outPath}\n`)
  if (!pass || options.keepLogs) process.stdout.write(`server log kept: ${server.logPath}\n`)
  return pass
}

let pass = false
try {
  pass = await main()
} catch (error) {
  process.stderr.write(`[soak] failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
} finally {
  killAll()
  if (pass && !options.keepLogs) rmSync(workDir, { recursive: true, force: true })
}
process.exitCode = pass ? 0 : 1
