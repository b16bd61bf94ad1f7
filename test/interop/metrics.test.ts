/**
 * Dashboards keep working: the metric families that our server exports under
 * the original's names are scraped from both servers after the same calls,
 * and must agree on type, label names and histogram buckets.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { GrpcClient } from "../../src/adapters/grpc/index.ts"
import { ClusterApi } from "../../src/ports/ClusterApi.ts"
import { buildGoBinaries } from "./support/goBuild.ts"
import { freePort, type ServerProcess, startGoServer, startOurServer } from "./support/processes.ts"

interface Family {
  readonly type: string
  readonly labels: ReadonlyArray<string>
  readonly buckets: ReadonlyArray<string>
}

const compared = /^(discovery_state_|discovery_server_|discovery_storage_|grpc_server_)/

/** Families under those prefixes that only we export, each for a feature the original lacks (README, Operations). */
const ourOwn = new Set(["discovery_server_log_lines_suppressed_total", "discovery_state_backend_available"])

/** The families of a Prometheus text exposition: type, label names seen, and histogram `le` values. */
const families = (text: string): Map<string, Family> => {
  const types = new Map<string, string>()
  const labels = new Map<string, Set<string>>()
  const buckets = new Map<string, Set<string>>()
  for (const line of text.split("\n")) {
    const type = /^# TYPE (\S+) (\S+)$/.exec(line)
    if (type) {
      types.set(type[1]!, type[2]!)
      continue
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? /.exec(line)
    if (!sample || line.startsWith("#")) continue
    const name = sample[1]!.replace(/_(bucket|sum|count)$/, (suffix, _, offset, whole: string) =>
      types.has(whole.slice(0, offset)) ? "" : suffix
    )
    const pairs = [...(sample[2] ?? "").matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)]
    const keys = labels.get(name) ?? new Set<string>()
    for (const [, key, value] of pairs) {
      if (key === "le") (buckets.get(name) ?? buckets.set(name, new Set()).get(name)!).add(value!)
      else keys.add(key!)
    }
    labels.set(name, keys)
  }
  const result = new Map<string, Family>()
  for (const [name, type] of types) {
    if (!compared.test(name)) continue
    result.set(name, {
      type,
      labels: [...(labels.get(name) ?? [])].sort(),
      buckets: [...(buckets.get(name) ?? [])].sort((a, b) => Number(a) - Number(b))
    })
  }
  return result
}

const exercise = (address: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const api = yield* ClusterApi
      yield* api.hello({ clusterId: "metrics", clientVersion: "v1.8.3" })
      yield* api.affiliateUpdate({ clusterId: "metrics", affiliateId: "a", endpoints: [], ttl: Duration.minutes(1) })
      yield* api.list({ clusterId: "metrics" })
    }).pipe(Effect.provide(GrpcClient.layer({ endpoint: address, tls: false })))
  )

const scrape = async (port: number, until: (text: string) => boolean): Promise<string> => {
  const deadline = Date.now() + 15_000
  for (;;) {
    const text = await fetch(`http://127.0.0.1:${port}/metrics`).then(
      (r) => r.text(),
      () => ""
    )
    if (until(text) || Date.now() > deadline) return text
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe("metrics compared with the original's", () => {
  const servers: Array<ServerProcess> = []
  let ours: Map<string, Family>
  let theirs: Map<string, Family>

  beforeAll(async () => {
    const scratch = mkdtempSync(join(tmpdir(), "discovery-metrics-"))
    // An existing (empty) snapshot file, so both servers count a successful load and set the load gauges.
    for (const name of ["go.binpb", "ours.binpb"]) writeFileSync(join(scratch, name), new Uint8Array(0))
    const [goPort, ourPort] = [await freePort(), await freePort()]
    const go = await startGoServer(buildGoBinaries().discoveryService, {
      metricsPort: goPort,
      snapshotPath: join(scratch, "go.binpb")
    })
    servers.push(go)
    const own = await startOurServer({ metricsPort: ourPort, snapshotPath: join(scratch, "ours.binpb") })
    servers.push(own)
    await exercise(go.address)
    await exercise(own.address)
    const ready = (text: string) =>
      text.includes("discovery_state_clusters") && text.includes("grpc_server_handled_total")
    theirs = families(await scrape(goPort, ready))
    ours = families(await scrape(ourPort, ready))
  }, 600_000)

  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()))
  })

  it("exports every family of the original with the same type, label names and buckets", () => {
    assert.isAbove(theirs.size, 10, "the original's families were scraped")
    for (const [name, family] of theirs) {
      assert.deepStrictEqual(ours.get(name), family, name)
    }
  })

  it("exports no family under those prefixes that the original lacks, but for the listed ones of our own", () => {
    assert.deepStrictEqual(
      [...ours.keys()].filter((name) => !theirs.has(name) && !ourOwn.has(name)),
      []
    )
    for (const name of ourOwn) assert.isTrue(ours.has(name), `${name} is exported`)
  })
})
