/**
 * `npm run abuse`: what a hostile or careless client can do to our service,
 * on loopback, with the figures that say whether it holds. One service
 * process (the bundle `npm start` runs, default flags but a 20 s idle
 * timeout so the run stays short) takes, in turn:
 *
 *   hostile   malformed requests on all five RPCs (default 200,000): every one must get a status,
 *             and a valid Hello from another address must be served after each batch
 *   unfinished  1,000 AffiliateUpdate streams that send all but the last bytes of 4 MiB, on 1 and
 *             then on 10 connections, each time on a service of its own: resident memory must stay
 *             under the request budget + 200 MiB while another client is served
 *   idle      4,000 silent connections, 2,000 with half an HTTP/2 preface, 2,000 idle sessions:
 *             the server must close them (handshake deadline 10 s, idle deadline 20 s here)
 *   ping      a client pinging as fast as it can: sent away with GOAWAY ENHANCE_YOUR_CALM
 *   log       failing calls from one address for 10 s: the log lines written stay bounded
 *   kill      kill -9 at random points while the service saves a 10,000-cluster snapshot every
 *             50 ms (default 50 runs): no file may be corrupt
 *
 * Options: --only a,b (phases above), --hostile N, --kill-runs N, --quick (a
 * run of about a minute at smaller sizes), --out FILE (default
 * bench/results/abuse-<timestamp>.json). Every process started is killed at
 * the end, also on failure.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import {
  hostileMessages,
  idleConnections,
  killDuringSaves,
  logFlood,
  pingFlood,
  unfinishedRequests
} from "./attacks.ts"
import { counter, startService } from "./serviceProcess.ts"
import { killAll, machine, option, root, table } from "./support.ts"

const argv = process.argv.slice(2)
const quick = argv.includes("--quick")
const phases = ["hostile", "unfinished", "idle", "ping", "log", "kill"] as const
const only = option("only")?.split(",") ?? [...phases]
for (const name of only) if (!(phases as ReadonlyArray<string>).includes(name)) throw new Error(`--only: ${name}?`)
const enabled = (phase: (typeof phases)[number]) => only.includes(phase)
const sizes = {
  hostile: Number(option("hostile") ?? (quick ? 20_000 : 200_000)),
  streams: quick ? 300 : 1000,
  idle: quick
    ? { silent: 400, halfPreface: 200, idleSessions: 200 }
    : { silent: 4000, halfPreface: 2000, idleSessions: 2000 },
  killRuns: Number(option("kill-runs") ?? (quick ? 10 : 50)),
  killClusters: quick ? 2000 : 10_000
}

const mib = (n: number) => `${n.toFixed(0)} MiB`
const dir = mkdtempSync(join(tmpdir(), "discovery-abuse-"))
const results: Record<string, unknown> = {}
const rows: Array<Array<string>> = []
const row = (phase: string, figure: string, value: string, verdict: string) =>
  rows.push([phase, figure, value, verdict])
const pass = (ok: boolean) => (ok ? "ok" : "FAILED")
let failures = 0
const check = (ok: boolean) => {
  if (!ok) failures++
  return pass(ok)
}

const main = async () => {
  const service = await startService(dir, ["--idle-timeout=20s"], { metrics: true })
  const budgetMiB = Number(/"request_memory_budget":(\d+)/.exec(readFileSync(service.logPath, "utf8"))?.[1]) / 2 ** 20
  const started = service.rssMiB()
  console.log(
    `service pid ${service.pid} on 127.0.0.1:${service.port}; resident ${mib(started)} at start; request budget ${mib(budgetMiB)}`
  )
  results.rssAtStartMiB = started

  if (enabled("hostile")) {
    console.log(`hostile: ${sizes.hostile} malformed requests…`)
    const figures = await hostileMessages(service.port, sizes.hostile)
    results.hostile = { ...figures, rssAfterMiB: service.rssMiB(), alive: service.alive() }
    row("hostile", "requests sent", String(figures.sent), "")
    row("hostile", "answered with a status", String(figures.sent - figures.unanswered), check(figures.unanswered === 0))
    row(
      "hostile",
      "statuses",
      Object.entries(figures.outcomes)
        .map(([k, n]) => `${k} ${n}`)
        .join(", "),
      ""
    )
    row(
      "hostile",
      "valid Hello after each batch",
      `${figures.validOk}/${figures.validAfterBatches}`,
      check(figures.validOk === figures.validAfterBatches)
    )
    row("hostile", "server crashed", service.alive() ? "no" : "yes", check(service.alive()))
  }

  if (enabled("unfinished")) {
    for (const connections of [1, 10]) {
      console.log(`unfinished: ${connections} × ${sizes.streams} streams of 4 MiB, on a service of its own…`)
      const fresh = await startService(dir, [], { name: `unfinished-${connections}` })
      const figures = await unfinishedRequests(fresh, { connections, streams: sizes.streams })
      row(
        `unfinished ${connections}×${sizes.streams}`,
        "service alive after",
        fresh.alive() ? "yes" : "no",
        check(fresh.alive())
      )
      await fresh.stop()
      results[`unfinished${connections}`] = figures
      const limit = budgetMiB + 200
      const label = `unfinished ${connections}×${sizes.streams}`
      row(
        label,
        "resident before / peak / after",
        `${mib(figures.rssBeforeMiB)} / ${mib(figures.rssPeakMiB)} / ${mib(figures.rssAfterMiB)}`,
        check(figures.rssPeakMiB < limit)
      )
      row(
        label,
        "attacker's streams",
        Object.entries(figures.outcomes)
          .map(([k, n]) => `${k} ${n}`)
          .join(", "),
        ""
      )
      row(
        label,
        "another client's Hellos OK",
        `${figures.normalOk}/${figures.normalCalls}`,
        check(figures.normalOk === figures.normalCalls)
      )
    }
  }

  if (enabled("idle")) {
    console.log(`idle: ${JSON.stringify(sizes.idle)}…`)
    const figures = await idleConnections(service, { ...sizes.idle, waitMillis: 45_000 })
    results.idle = figures
    row(
      "idle",
      "silent TCP closed",
      `${figures.silentClosed}/${figures.silent}`,
      check(figures.silentClosed === figures.silent)
    )
    row(
      "idle",
      "half preface closed",
      `${figures.halfPrefaceClosed}/${figures.halfPreface}`,
      check(figures.halfPrefaceClosed === figures.halfPreface)
    )
    row(
      "idle",
      "idle sessions closed",
      `${figures.idleSessionsClosed}/${figures.idleSessions}`,
      check(figures.idleSessionsClosed === figures.idleSessions)
    )
    row(
      "idle",
      "resident before / peak / after; all closed after",
      `${mib(figures.rssBeforeMiB)} / ${mib(figures.rssPeakMiB)} / ${mib(figures.rssAfterMiB)}; ${(figures.waitedMillis / 1000).toFixed(1)} s`,
      ""
    )
  }

  if (enabled("ping")) {
    console.log("ping: flooding…")
    const figures = await pingFlood(service.port, 20_000)
    results.ping = figures
    row(
      "ping",
      "pings acknowledged before GOAWAY",
      `${figures.acknowledged} (code ${figures.goawayCode}, ${figures.goawayData})`,
      check(figures.goawayCode === 11 && figures.goawayData === "too_many_pings" && figures.sessionClosed)
    )
  }

  if (enabled("log")) {
    console.log("log: failing calls for 10 s…")
    const figures = await logFlood(service, 10_000, () =>
      counter(service, "discovery_server_log_lines_suppressed_total")
    )
    results.log = figures
    row(
      "log",
      "failed calls / lines written / held back",
      `${figures.failed} / ${figures.failureLines} / ${figures.suppressed}`,
      check(
        figures.failureLines <= 10 + Math.ceil(figures.elapsedMillis / 1000) &&
          figures.failureLines + figures.suppressed >= figures.failed
      )
    )
    row(
      "log",
      "log bytes written",
      `${figures.logBytes} (${(figures.logBytes / Math.max(1, figures.failed)).toFixed(1)} per failed call)`,
      ""
    )
  }

  results.rssAtEndMiB = service.rssMiB()
  const code = await service.stop()
  row("service", "exit code after SIGTERM", String(code), check(code === 0))

  if (enabled("kill")) {
    console.log(`kill: ${sizes.killRuns} × kill -9 during saves of ${sizes.killClusters} clusters…`)
    const figures = await killDuringSaves(dir, { runs: sizes.killRuns, clusters: sizes.killClusters })
    results.kill = figures
    row("kill -9", "corrupt snapshot files", `${figures.corrupt} of ${figures.runs}`, check(figures.corrupt === 0))
    row(
      "kill -9",
      "runs whose service saved before the kill",
      `${figures.saved} of ${figures.runs}`,
      check(figures.saved > 0)
    )
    row("kill -9", "runs that left the temporary file", String(figures.leftTemporary), "")
  }

  console.log()
  console.log(table(["phase", "figure", "value", "verdict"], rows))
  const out =
    option("out") ??
    resolve(root, "bench/results", `abuse-${new Date().toISOString().replaceAll(":", "-").slice(0, 19)}Z.json`)
  mkdirSync(resolve(out, ".."), { recursive: true })
  writeFileSync(out, `${JSON.stringify({ machine: machine(), sizes, results, failures }, null, 2)}\n`)
  console.log(
    `\n${failures === 0 ? "every check passed" : `${failures} check(s) FAILED`}; figures in ${relative(root, out)}`
  )
}

main()
  .catch((error) => {
    console.error(error)
    failures++
  })
  .finally(() => {
    killAll()
    rmSync(dir, { recursive: true, force: true })
    process.exit(failures === 0 ? 0 : 1)
  })
