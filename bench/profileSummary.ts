/**
 * Summarises a V8 `.cpuprofile` (from `node --cpu-prof`): the functions with
 * the most self time, and the ones with the most inclusive time (a function's
 * own samples plus its callees', counted once per stack even when recursive),
 * with file and line.
 *
 * Run: `node bench/profileSummary.ts FILE.cpuprofile [top=30] [filter] [under]`;
 * the optional filter keeps only functions whose label contains it (`""` for
 * all), and `under` counts only samples with a frame whose label contains it
 * on the stack (for example `GrpcServer.ts:374`, one handler's calls).
 */
import { readFileSync } from "node:fs"

interface CallFrame {
  readonly functionName: string
  readonly url: string
  readonly lineNumber: number
}
interface ProfileNode {
  readonly id: number
  readonly callFrame: CallFrame
  readonly hitCount?: number
  readonly children?: ReadonlyArray<number>
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

const [file, topText, filterText, under] = process.argv.slice(2)
const filter = filterText === "" ? undefined : filterText
if (file === undefined) throw new Error("usage: node bench/profileSummary.ts FILE.cpuprofile [top] [filter]")
const top = Number(topText ?? 30)
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile

const byId = new Map(profile.nodes.map((n) => [n.id, n]))
const parent = new Map<number, number>()
for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id)

const label = (frame: CallFrame) => {
  const url = frame.url.replace(/^file:\/\//, "").replace(/^.*\/node_modules\//, "~/")
  const where = url === "" ? "" : ` ${url.replace(/^.*\/work\/main\//, "")}:${frame.lineNumber + 1}`
  return `${frame.functionName || "(anonymous)"}${where}`
}

const within = (id: number): boolean => {
  if (under === undefined) return true
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    if (label(byId.get(at)!.callFrame).includes(under)) return true
  }
  return false
}

const sampleTime = new Map<number, number>()
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i]!
  if (!within(id)) continue
  sampleTime.set(id, (sampleTime.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
}
const total = [...sampleTime.values()].reduce((a, b) => a + b, 0)

const self = new Map<string, number>()
const inclusive = new Map<string, number>()
for (const [id, time] of sampleTime) {
  const node = byId.get(id)!
  const own = label(node.callFrame)
  self.set(own, (self.get(own) ?? 0) + time)
  const seen = new Set<string>()
  for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
    const name = label(byId.get(at)!.callFrame)
    if (seen.has(name)) continue
    seen.add(name)
    inclusive.set(name, (inclusive.get(name) ?? 0) + time)
  }
}

const print = (title: string, map: Map<string, number>) => {
  console.log(`\n${title} (of ${(total / 1000).toFixed(0)} ms sampled)`)
  const entries = [...map].filter(([name]) => filter === undefined || name.includes(filter))
  for (const [name, time] of entries.sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(
      `${((100 * time) / total).toFixed(1).padStart(5)}%  ${(time / 1000).toFixed(0).padStart(6)} ms  ${name}`
    )
  }
}

print("self time", self)
print("inclusive time", inclusive)
