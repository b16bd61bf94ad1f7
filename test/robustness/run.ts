/**
 * One robustness run of one scenario: start its shape, run the traffic
 * (writers, watchers, cap pressure, probes, Go nodes) while faults are
 * injected at random one after another, then stop the traffic, heal, wait
 * for the state to settle, record what every instance lists, stop every
 * process and check the history with every validator. The run folder keeps
 * the history (one JSON-lines file per client), the servers' logs and a
 * `report.json`; it is removed after a run that passed unless asked to keep it.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { readHistory } from "./check.ts"
import type { RunCluster } from "./cluster/index.ts"
import { startMemory, startRedis, startRedisCluster } from "./cluster/index.ts"
import { busyClusters as baseClusters, type Fault, faultByName, type Heal } from "./faults/index.ts"
import type { AffiliateRecord, GaugeRecord, RunRecord, Violation } from "./history.ts"
import type { Scenario } from "./scenarios.ts"
import { runCapPressure } from "./traffic/capPressure.ts"
import { startGoNodes, type RunningGoNodes } from "./traffic/goNodes.ts"
import { HistoryFiles } from "./traffic/historyFiles.ts"
import { gaugesOf, runProbes } from "./traffic/probes.ts"
import {
  affiliateRecord,
  fork,
  intBetween,
  pickOf,
  seeded,
  type TrafficContext,
  TrafficControl
} from "./traffic/traffic.ts"
import { type Watcher, startWatcher } from "./traffic/watcher.ts"
import { runWriter } from "./traffic/writer.ts"
import { WireClient } from "./traffic/wireClient.ts"
import { validators } from "./validate/index.ts"

/** What a run is asked to do. */
export interface RunOptions {
  readonly scenario: Scenario
  readonly seed: number
  /** How long the traffic and faults run, in milliseconds (settling comes after). */
  readonly durationMillis: number
  /** The run folder (created). */
  readonly dir: string
  /** Keep the run folder even when the run passed. */
  readonly keep?: boolean
  /** The Go nodes driver (built beforehand), when the scenario has Go nodes. */
  readonly goNodesBinary?: string | undefined
  readonly log: (line: string) => void
}

/** What a run found. */
export interface RunReport {
  readonly scenario: string
  readonly seed: number
  readonly dir: string
  readonly kept: boolean
  readonly trafficMillis: number
  /** Checkpoints the run held (after faults, and at its end). */
  readonly checkpoints: number
  /** The longest time from a checkpoint's pause to every view equal to List (the bound when they never were). */
  readonly settleMillis: number
  /** Records by type, faults by name and phase. */
  readonly counts: Readonly<Record<string, number>>
  readonly violations: ReadonlyArray<Violation>
  /** Violations by validator (every validator listed, with 0 when it passed). */
  readonly byValidator: Readonly<Record<string, number>>
}

/** The caps every instance of a run has: small, so the traffic reaches them. */
export const runCaps = { maxClusters: 12, maxWatches: 24 } as const

/** The bounds the validators judge a run by. */
export const runBounds = { convergeMillis: 20_000, aliveMillis: 15_000, deliveryMillis: 12_000 } as const

const startShape = (scenario: Scenario, dir: string): Promise<RunCluster> => {
  const own = scenario.flags ?? []
  const named = new Set(own.map((flag) => flag.split("=")[0]))
  const flags = [
    ...[`--max-clusters=${runCaps.maxClusters}`, `--max-watches=${runCaps.maxWatches}`, "--gc-interval=1s"].filter(
      (flag) => !named.has(flag.split("=")[0])
    ),
    ...own
  ]
  const options = { dir, instances: scenario.instances, flags }
  switch (scenario.shape.backend) {
    case "memory":
      return startMemory(options)
    case "redis": {
      const offset = scenario.shape.clockOffsetMillis
      return startRedis({
        ...options,
        persistence: scenario.shape.persistence,
        proxies: true,
        ...(offset === undefined ? {} : { clockOffset: { millis: offset } })
      })
    }
    case "redis-cluster":
      return startRedisCluster(options)
  }
}

const sameList = (a: ReadonlyArray<AffiliateRecord>, b: ReadonlyArray<AffiliateRecord>): boolean => {
  if (a.length !== b.length) return false
  const key = (affiliate: AffiliateRecord) =>
    `${affiliate.id}|${affiliate.data}|${[...affiliate.endpoints].sort().join(",")}`
  const keys = new Set(a.map(key))
  return b.every((affiliate) => keys.has(key(affiliate)))
}

/** Every instance's List of every cluster (an instance that does not answer is left out). */
const listEverything = async (
  context: TrafficContext,
  clusters: ReadonlyArray<string>
): Promise<Record<string, Record<string, ReadonlyArray<AffiliateRecord>>>> => {
  const lists: Record<string, Record<string, ReadonlyArray<AffiliateRecord>>> = {}
  await Promise.all(
    context.targets.map(async (target) => {
      const client = new WireClient(target.address, 3000)
      const byCluster: Record<string, ReadonlyArray<AffiliateRecord>> = {}
      try {
        for (const cluster of clusters) {
          const result = await client.list(cluster)
          if (!result.ok) return
          byCluster[cluster] = result.value.affiliates.map(affiliateRecord)
        }
        lists[target.name] = byCluster
      } finally {
        client.close()
      }
    })
  )
  return lists
}

/**
 * Whether every instance lists the same (`lists`), and every watcher, Go
 * node and gauge agrees with it: the gauges read when they all did, or
 * undefined.
 */
const settledOn = async (
  context: TrafficContext,
  clusters: ReadonlyArray<string>,
  lists: Readonly<Record<string, Readonly<Record<string, ReadonlyArray<AffiliateRecord>>>>>,
  watchers: ReadonlyArray<Watcher>,
  goNodes: RunningGoNodes | undefined
): Promise<ReadonlyArray<GaugeRecord> | undefined> => {
  const instances = Object.values(lists)
  if (instances.length !== context.targets.length) return undefined
  const first = instances[0]!
  for (const other of instances)
    for (const cluster of clusters) if (!sameList(first[cluster]!, other[cluster]!)) return undefined
  for (const watcher of watchers) {
    if (!watcher.settled()) return undefined
    if (!sameList([...watcher.state.view.values()], first[watcher.cluster]!)) return undefined
  }
  if (goNodes !== undefined) {
    const expected = (first[goNodes.cluster] ?? []).map((affiliate) => affiliate.id)
    for (const [node, seen] of await goNodes.views()) {
      if (
        seen.join() !==
        expected
          .filter((id) => id !== node)
          .sort()
          .join()
      )
        return undefined
    }
  }
  const held = Object.values(first)
  const affiliates = held.reduce((sum, list) => sum + list.length, 0)
  const endpoints = held.reduce(
    (sum, list) => sum + list.reduce((n, affiliate) => n + affiliate.endpoints.length, 0),
    0
  )
  const clustersHeld = held.filter((list) => list.length > 0).length
  const read: Array<GaugeRecord> = []
  for (const target of context.targets) {
    if ((await target.readyz()) !== 200) return undefined
    const gauges = await gaugesOf(target, context.files.now)
    if (gauges === undefined) return undefined
    if (gauges.affiliates !== affiliates || gauges.endpoints !== endpoints || gauges.clusters < clustersHeld) {
      return undefined
    }
    read.push(gauges)
  }
  return read
}

/** Runs `options.scenario` once and checks its history. */
export const runScenario = async (options: RunOptions): Promise<RunReport> => {
  const { scenario, log } = options
  mkdirSync(options.dir, { recursive: true })
  const files = new HistoryFiles(options.dir)
  const random = seeded(options.seed)
  const faultRandom = fork(random)
  log(`${scenario.name}: starting (seed ${options.seed}, folder ${options.dir})`)
  const cluster = await startShape(scenario, options.dir)
  const runRecord: RunRecord = {
    type: "run",
    scenario: scenario.name,
    seed: options.seed,
    backend: scenario.shape.backend,
    instances: cluster.instances.map((instance) => instance.name),
    caps: runCaps,
    clusterCapTolerance: scenario.shape.backend === "redis-cluster" ? 3 : 0,
    lossAllowed: scenario.lossAllowed,
    clockSkewMillis: cluster.clockSkewMillis,
    bounds: runBounds,
    startedAt: new Date().toISOString()
  }
  files.writer("run")(runRecord)

  const control = new TrafficControl()
  let probesDone = false
  const context: TrafficContext = {
    targets: cluster.instances.map((instance) => ({
      name: instance.name,
      address: instance.address,
      metricsPort: instance.metricsPort,
      readyz: () => instance.readyz()
    })),
    files,
    random,
    deadlineMillis: 2000,
    control,
    stopped: control.stopped
  }
  const runLog = files.writer("faults")
  const tasks: Array<Promise<unknown>> = []
  let goNodes: RunningGoNodes | undefined
  let watchers: Array<Watcher> = []
  const trafficStarted = Date.now()
  const settleTimes: Array<number> = []
  /**
   * Holds the traffic, lets everything settle (bounded), and records what
   * every instance lists, what the Go nodes see and the gauges: a checkpoint
   * the validators judge convergence and durability at.
   */
  const checkpoint = async () => {
    await control.pause()
    const write = files.writer("run")
    write({ type: "quiesce", at: files.now() })
    const quiesced = Date.now()
    const clusters = [...new Set([...baseClusters, ...clustersUsed(files), ...(goNodes ? [goNodes.cluster] : [])])]
    // the lists recorded are those everything was found to agree with (an expiry may change them while they are read)
    let lists = await listEverything(context, clusters)
    let listed = files.now()
    let gauges: ReadonlyArray<GaugeRecord> | undefined
    while (Date.now() - quiesced < runBounds.convergeMillis) {
      gauges = await settledOn(context, clusters, lists, watchers, goNodes)
      if (gauges !== undefined) break
      await new Promise((resolve) => setTimeout(resolve, 200))
      lists = await listEverything(context, clusters)
      listed = files.now()
    }
    settleTimes.push(Date.now() - quiesced)
    await goNodes?.record(listed)
    write({ type: "final", at: listed, lists })
    // the gauges that agreed with the lists, or (when nothing settled) what they show now
    for (const target of context.targets) {
      const shown = gauges?.find((each) => each.instance === target.name) ?? (await gaugesOf(target, files.now))
      if (shown !== undefined) write(shown)
    }
  }
  try {
    const probes = runProbes(context, "probe", () => probesDone)
    if (scenario.goNodes && options.goNodesBinary !== undefined) {
      goNodes = await startGoNodes(context, options.goNodesBinary, "go-nodes")
    }
    for (let i = 0; i < 3; i++) {
      tasks.push(
        runWriter(
          context,
          { name: `writer${i}`, clusters: baseClusters, affiliates: 6, pauseMillis: [20, 150] },
          fork(random)
        )
      )
    }
    watchers = baseClusters.flatMap((clusterId, i) => [
      startWatcher(
        context,
        { name: `watcher${i}a`, cluster: clusterId, reads: true, openMillis: [500, 8000] },
        fork(random)
      ),
      startWatcher(
        context,
        { name: `watcher${i}b`, cluster: clusterId, reads: true, openMillis: [2000, 20_000] },
        fork(random)
      ),
      startWatcher(
        context,
        { name: `slow${i}`, cluster: clusterId, reads: false, openMillis: [3000, 10_000] },
        fork(random)
      )
    ])
    tasks.push(runCapPressure(context, { name: "caps", clusters: baseClusters, burst: 12 }, fork(random)))

    const faultsOf: ReadonlyArray<Fault> = scenario.faults
      .map((name) => faultByName(name))
      .filter((fault): fault is Fault => fault?.available(cluster) === true)
    const until = Date.now() + options.durationMillis
    let lastProgress = Date.now()
    let injected = 0
    const progress = () => {
      const counts = files.counts()
      const injected = [...counts].filter(([key]) => key.endsWith(" inject")).reduce((sum, [, n]) => sum + n, 0)
      log(
        `${scenario.name}: ${Math.round((Date.now() - trafficStarted) / 1000)} s, ${counts.get("call") ?? 0} calls, ` +
          `${counts.get("watch-msg") ?? 0} watch messages, ${injected} faults`
      )
    }
    while (Date.now() < until) {
      const gap = intBetween(faultRandom, scenario.faultGapMillis[0], scenario.faultGapMillis[1])
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(gap, until - Date.now()))))
      if (Date.now() >= until || faultsOf.length === 0) continue
      const fault = pickOf(faultRandom, faultsOf)
      let heal: Heal
      try {
        heal = await fault.inject({
          cluster,
          random: faultRandom,
          record: runLog,
          now: files.now,
          log: (line) => log(`${scenario.name}: ${fault.name}: ${line}`)
        })
      } catch (error) {
        log(`${scenario.name}: ${fault.name} could not be injected: ${String(error)}`)
        continue
      }
      await new Promise((resolve) => setTimeout(resolve, intBetween(faultRandom, 500, 4000)))
      await heal()
      if (++injected % scenario.checkpointEvery === 0 && Date.now() < until) {
        await checkpoint()
        control.resume()
      }
      if (Date.now() - lastProgress > 10_000) {
        lastProgress = Date.now()
        progress()
      }
    }
    progress()
    await checkpoint()
    control.stop()
    await Promise.all(tasks)
    log(
      `${scenario.name}: ${settleTimes.length} checkpoints, settled within ${Math.max(...settleTimes)} ms (the last: ${settleTimes.at(-1)} ms)`
    )
    probesDone = true
    await probes
  } finally {
    control.stop()
    probesDone = true
    await Promise.all(watchers.map((watcher) => watcher.close()))
    await goNodes?.close()
    await Promise.allSettled(tasks)
    files.close()
    await cluster.stopAll()
  }

  const history = readHistory(options.dir)
  const violations = validators.flatMap((validator) => validator.check(history))
  const byValidator = Object.fromEntries(
    validators.map((validator) => [validator.name, violations.filter((v) => v.validator === validator.name).length])
  )
  const counts = Object.fromEntries(files.counts())
  const kept = violations.length > 0 || options.keep === true
  const report: RunReport = {
    scenario: scenario.name,
    seed: options.seed,
    dir: options.dir,
    kept,
    trafficMillis: options.durationMillis,
    checkpoints: settleTimes.length,
    settleMillis: Math.max(0, ...settleTimes),
    counts,
    violations,
    byValidator
  }
  writeFileSync(
    join(options.dir, "report.json"),
    `${JSON.stringify({ ...report, violations: violations.slice(0, 200) }, null, 2)}\n`
  )
  if (!kept) rmSync(options.dir, { recursive: true, force: true })
  return report
}

/** The clusters the cap pressure made up (their names are in its history file). */
const clustersUsed = (files: HistoryFiles): ReadonlyArray<string> => {
  files.flush()
  const history = readHistory(files.dir)
  const clusters = new Set<string>()
  for (const record of history) {
    if (record.type === "call" || record.type === "watch-open") clusters.add(record.cluster)
  }
  return [...clusters]
}
