/**
 * Start-up time of the service: spawn → first successful gRPC Hello (the
 * bench's `loadgen ready`, polled every 2 ms), empty state, landing and
 * metrics off, and spawn → exit of `--help`. Each variant runs `--repeat`
 * times, interleaved; the medians are printed.
 *
 *   npm exec -- node bench/startup.ts [--repeat N] [--only bench,start,help]
 *
 * Variants: `bench` is the bench's command (`node scripts/start.ts …`, the
 * start-up bundle), `start` is `npm start -- …` (npm's own start-up included),
 * `help` is `node scripts/start.ts --help`, `start-http` is `start` with the
 * landing page and the metrics endpoint on, `original` is the original
 * service's binary, `floor` is `bench/startupFloor.mjs` (a bare `node:http2`
 * server answering every call: the least any Node server can take), `exe`
 * is the single executable (`--executable FILE`, default
 * `build/discovery-service` as `npm run build:exe` writes it), and
 * `restart` (with `--snapshot
 * FILE`) is `bench` on a fresh copy of FILE with snapshots on, killed once
 * ready so that it never saves. `--roots DIR,DIR` runs every variant in each
 * checkout given (for example an unchanged copy made with `git archive HEAD`),
 * interleaved, to compare them on an equally busy machine; `--entries
 * FILE,FILE` runs the `bench`, `help` and `restart` variants with those entry
 * files instead of `scripts/start.ts` (`scripts/start.mjs`, or
 * `src/cli/main.ts` for the sources, say), and `--env K=V,K=V` sets variables
 * for every child (`NODE_COMPILE_CACHE=…`). Needs the Go generator built by
 * `npm run bench` (`.go-cache/bench/loadgen`).
 */
import { execFileSync, spawn } from "node:child_process"
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { binDir, epochMs, freePort, root, stop, track } from "./support.ts"

const argv = process.argv.slice(2)
const option = (name: string, fallback: string): string => {
  const index = argv.findIndex((a) => a === `--${name}` || a.startsWith(`--${name}=`))
  if (index === -1) return fallback
  const arg = argv[index]!
  return arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : (argv[index + 1] ?? fallback)
}
const repeat = Number(option("repeat", "5"))
const only = option("only", "bench,start,help").split(",")
const roots = option("roots", root)
  .split(",")
  .map((dir) => resolve(dir))
const entries = option("entries", "scripts/start.ts").split(",")
const env = {
  ...process.env,
  ...Object.fromEntries(
    option("env", "")
      .split(",")
      .filter((kv) => kv !== "")
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)])
  )
}
const snapshot = option("snapshot", "")
const executable = option("executable", "build/discovery-service")
const loadgen = resolve(binDir, "loadgen")
const original = resolve(binDir, "discovery-service")
if (!existsSync(loadgen)) throw new Error(`${loadgen} is missing: run \`npm run bench -- --only core\` once`)

const serviceFlags = (address: string) => [
  `--addr=${address}`,
  "--landing-addr=",
  "--metrics-addr=",
  "--snapshots-enabled=false",
  "--rate-limit-rps=0"
]

/** Spawn → Hello OK, in ms; the process is stopped with `signal` afterwards. */
const ready = async (
  cwd: string,
  command: string,
  args: (address: string) => Array<string>,
  signal: NodeJS.Signals = "SIGTERM"
): Promise<number> => {
  const address = `127.0.0.1:${await freePort()}`
  const spawnedAt = epochMs()
  const child = track(spawn(command, args(address), { cwd, env, stdio: "ignore", detached: true }))
  try {
    const out = await new Promise<string>((resolveOut, reject) => {
      const gen = track(spawn(loadgen, ["ready", `-addr=${address}`, "-timeout=30s"]))
      let text = ""
      gen.stdout?.on("data", (chunk) => {
        text += chunk
      })
      gen.on("exit", (code) => (code === 0 ? resolveOut(text) : reject(new Error(`loadgen exited ${code}`))))
    })
    const last = out.trim().split("\n").at(-1) ?? ""
    return (JSON.parse(last) as { readyUnixNanos: number }).readyUnixNanos / 1e6 - spawnedAt
  } finally {
    // npm start runs the service in a child of its own: signal the whole group we created.
    if (child.pid !== undefined) {
      try {
        process.kill(-child.pid, signal)
      } catch {}
    }
    await stop(child, signal, 5000)
  }
}

/** Spawn → exit of `--help`, in ms. */
const help = (cwd: string, entry: string): number => {
  const start = epochMs()
  execFileSync(process.execPath, [entry, "--help"], { cwd, env, stdio: "ignore" })
  return epochMs() - start
}

/** As `serviceFlags`, with the landing page and the metrics endpoint on (their defaults), on free ports. */
const httpFlags = (address: string) => [
  ...serviceFlags(address).filter((flag) => !flag.startsWith("--landing-addr") && !flag.startsWith("--metrics-addr")),
  "--landing-addr=127.0.0.1:0",
  "--metrics-addr=127.0.0.1:0"
]

const variants: Record<string, (cwd: string) => Promise<number>> = {
  original: (cwd) =>
    ready(cwd, original, (address) => [
      `-addr=${address}`,
      "-landing-addr=",
      "-metrics-addr=",
      "-snapshots-enabled=false"
    ]),
  floor: (cwd) => ready(cwd, process.execPath, (address) => ["bench/startupFloor.mjs", `--addr=${address}`]),
  start: (cwd) => ready(cwd, "npm", (address) => ["start", "--silent", "--", ...serviceFlags(address)]),
  exe: (cwd) => ready(cwd, resolve(cwd, executable), serviceFlags),
  "start-http": (cwd) => ready(cwd, "npm", (address) => ["start", "--silent", "--", ...httpFlags(address)])
}
/** `bench` restarting from a copy of the `--snapshot` file, made before the spawn and removed after the run. */
const restart = async (cwd: string, entry: string): Promise<number> => {
  const dir = mkdtempSync(join(tmpdir(), "startup-snapshot-"))
  try {
    const path = join(dir, "state.binpb")
    copyFileSync(snapshot, path)
    const flags = (address: string) => [
      ...serviceFlags(address).filter((flag) => !flag.startsWith("--snapshots-enabled")),
      "--snapshots-enabled=true",
      `--snapshot-path=${path}`,
      "--snapshot-interval=1h"
    ]
    return await ready(cwd, process.execPath, (address) => [entry, ...flags(address)], "SIGKILL")
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

for (const entry of entries) {
  const suffix = entries.length === 1 ? "" : ` ${entry}`
  variants[`bench${suffix}`] = (cwd) => ready(cwd, process.execPath, (address) => [entry, ...serviceFlags(address)])
  variants[`help${suffix}`] = async (cwd) => help(cwd, entry)
  if (snapshot !== "") variants[`restart${suffix}`] = (cwd) => restart(cwd, entry)
}

const median = (xs: ReadonlyArray<number>) => {
  const sorted = [...xs].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]!
}

const times: Record<string, Array<number>> = {}
for (let run = 0; run < repeat; run++) {
  for (const kind of only) {
    const chosen = Object.entries(variants).filter(([name]) => name.split(" ")[0] === kind)
    if (chosen.length === 0) throw new Error(`--only: ${kind}?`)
    for (const [name, variant] of chosen) {
      for (const dir of roots) {
        const key = `${name} ${dir}`
        times[key] = [...(times[key] ?? []), await variant(dir)]
      }
    }
  }
}
for (const [name, xs] of Object.entries(times)) {
  console.log(`median ${median(xs).toFixed(0).padStart(5)} ms  ${name}   runs ${xs.map((x) => x.toFixed(0)).join(" ")}`)
}
