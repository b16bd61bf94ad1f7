/**
 * Real Talos discovery clients in the run: the published Go
 * `discovery-client`, built from the module proxy as the interop tests build
 * it, one node per instance in a cluster of their own (their data is
 * encrypted with the cluster's key, which only they hold). They publish and
 * refresh themselves and watch the others, never resuming, as Talos nodes
 * do; every second the run records what each one sees.
 */
import { execFileSync } from "node:child_process"
import { mkdirSync } from "node:fs"
import { resolve } from "node:path"
import { GoNodes } from "../../interop/support/goNodes.ts"
import type { Time } from "../history.ts"
import { sleep, type TrafficContext } from "./traffic.ts"

const root = resolve(import.meta.dirname, "../../..")

/** Builds (or finds in Go's cache) the `nodes` driver of the interop tests; its path. */
export const buildGoNodes = (log: (line: string) => void): string => {
  const output = resolve(root, ".go-cache/bin/nodes")
  mkdirSync(resolve(root, ".go-cache/bin"), { recursive: true })
  const started = Date.now()
  execFileSync("go", ["build", "-o", output, "./nodes"], {
    cwd: resolve(root, "test/interop/go"),
    stdio: ["ignore", "inherit", "inherit"]
  })
  log(`go build ./nodes in ${Date.now() - started} ms`)
  return output
}

/** Go nodes running in the run. */
export interface RunningGoNodes {
  readonly cluster: string
  /** The nodes' names (their affiliate IDs). */
  readonly nodes: ReadonlyArray<string>
  /** What each node sees now (affiliate IDs, itself left out). */
  readonly views: () => Promise<ReadonlyMap<string, ReadonlyArray<string>>>
  /** Records what each node sees now, as of `at` (default: now). */
  readonly record: (at?: Time) => Promise<void>
  /** Stops recording and ends the nodes (their affiliates stay until they expire). */
  readonly close: () => Promise<void>
}

/** Starts one Go node per instance in `cluster` and records their views every second until `close`. */
export const startGoNodes = async (
  context: TrafficContext,
  binary: string,
  cluster: string
): Promise<RunningGoNodes> => {
  const go = new GoNodes(binary)
  const key = new Uint8Array(32).fill(7)
  const nodes = context.targets.map((target) => `go-${target.name}`)
  await Promise.all(
    context.targets.map((target, i) => go.start(nodes[i]!, { endpoint: target.address, cluster, key, ttl: "10s" }))
  )
  await Promise.all(nodes.map((node) => go.set(node, { hostname: node, addresses: ["10.0.0.1"] })))
  const write = context.files.writer("go-nodes")
  let closed = false
  const views = async () =>
    new Map(
      await Promise.all(
        nodes.map(async (node) => [node, (await go.state(node)).affiliates.map((seen) => seen.id).sort()] as const)
      )
    )
  const record = async (at: Time = context.files.now()) => {
    for (const [node, affiliates] of await views()) {
      write({ type: "node-view", node, affiliate: node, cluster, at, affiliates })
    }
  }
  const recording = (async () => {
    while (!closed) {
      await record()
      await sleep({ ...context, stopped: () => closed }, 1000)
    }
  })()
  return {
    cluster,
    nodes,
    views,
    record,
    close: async () => {
      closed = true
      await recording
      await go.close()
    }
  }
}
