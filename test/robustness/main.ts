/**
 * `npm run robustness`: runs robustness scenarios (see `scenarios.ts`) one
 * after another, each starting its own Redis, instances and clients on
 * loopback and stopping them by PID, and checks each history with every
 * validator. Prints progress while it runs and one summary line per
 * scenario; exits 1 when any validator found a violation (the run's folder,
 * with its history and the servers' logs, is kept and named).
 */
import { mkdirSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { parseArgs } from "node:util"
import { type RunReport, runScenario } from "./run.ts"
import { type Scenario, scenarioByName, scenarios } from "./scenarios.ts"
import { buildGoNodes } from "./traffic/goNodes.ts"
import { validators } from "./validate/index.ts"

const help = `Usage: npm run robustness -- [options] [scenario ...]

Runs the named scenarios (all of them when none is named) one after another,
injecting faults at random while clients call and watch, then checks the
recorded history with every validator.

Options:
  --minutes N   total time of traffic and faults, shared by the scenarios (default 2)
  --seed S      seed of the first scenario (default: random); the next ones use S+1, S+2, …
  --dir PATH    where run folders go (default: a folder under the OS temp directory)
  --keep        keep every run folder, not only those of failed runs
  --list        list the scenarios and the validators, and exit
  --help        this text

Scenarios:
${scenarios.map((scenario) => `  ${scenario.name.padEnd(18)} ${scenario.description}`).join("\n")}
`

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    minutes: { type: "string", default: "2" },
    seed: { type: "string" },
    dir: { type: "string" },
    keep: { type: "boolean", default: false },
    list: { type: "boolean", default: false },
    help: { type: "boolean", default: false }
  }
})

if (values.help) {
  process.stdout.write(help)
  process.exit(0)
}
if (values.list) {
  for (const scenario of scenarios) process.stdout.write(`${scenario.name}: ${scenario.description}\n`)
  for (const validator of validators) process.stdout.write(`validator ${validator.name}: ${validator.statement}\n`)
  process.exit(0)
}

const chosen: Array<Scenario> = []
for (const name of positionals) {
  const scenario = scenarioByName(name)
  if (scenario === undefined) {
    process.stderr.write(`unknown scenario ${JSON.stringify(name)}; --list shows them\n`)
    process.exit(2)
  }
  chosen.push(scenario)
}
if (chosen.length === 0) chosen.push(...scenarios)
const minutes = Number(values.minutes)
if (!(minutes > 0)) {
  process.stderr.write(`--minutes must be a positive number, not ${JSON.stringify(values.minutes)}\n`)
  process.exit(2)
}
const firstSeed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed)
const root = values.dir ?? join(tmpdir(), `discovery-robustness-${new Date().toISOString().replace(/[:.]/g, "-")}`)
mkdirSync(root, { recursive: true })
const log = (line: string) => process.stderr.write(`[robustness ${new Date().toISOString().slice(11, 19)}] ${line}\n`)

const goNodesBinary = chosen.some((scenario) => scenario.goNodes) ? buildGoNodes(log) : undefined
const reports: Array<RunReport> = []
const each = (minutes * 60_000) / chosen.length
for (const [i, scenario] of chosen.entries()) {
  const seed = firstSeed + i
  const report = await runScenario({
    scenario,
    seed,
    durationMillis: each,
    dir: join(root, `${scenario.name}-${seed}`),
    keep: values.keep,
    goNodesBinary,
    log
  })
  reports.push(report)
  const failed = Object.entries(report.byValidator).filter(([, count]) => count > 0)
  log(
    `${scenario.name}: ${failed.length === 0 ? "passed" : `FAILED (${failed.map(([name, n]) => `${name} ${n}`).join(", ")})`}` +
      ` — ${JSON.stringify(report.counts)}${report.kept ? `; kept in ${report.dir}` : ""}`
  )
  for (const violation of report.violations.slice(0, 10)) log(`  ${violation.validator}: ${violation.message}`)
}
const violations = reports.reduce((sum, report) => sum + report.violations.length, 0)
const total = (key: string) => reports.reduce((sum, report) => sum + (report.counts[key] ?? 0), 0)
const faults = new Map<string, number>()
for (const report of reports) {
  for (const [key, count] of Object.entries(report.counts)) {
    const name = /^fault (.+) inject$/.exec(key)?.[1]
    if (name !== undefined) faults.set(name, (faults.get(name) ?? 0) + count)
  }
}
log(
  `done: ${reports.length} scenarios, ${Math.round(reports.reduce((sum, report) => sum + report.trafficMillis, 0) / 60_000)} minutes of traffic, ` +
    `${total("call")} calls, ${total("watch-open")} watches, ${total("watch-msg")} watch messages, ` +
    `${reports.reduce((sum, report) => sum + report.checkpoints, 0)} checkpoints, faults: ` +
    `${[...faults].map(([name, count]) => `${name} ${count}`).join(", ")}; ${violations} violations`
)
process.exit(violations === 0 ? 0 : 1)
