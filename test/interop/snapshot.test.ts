/**
 * Snapshot files across implementations: the original Go service (v1.1.0)
 * loads a snapshot we wrote and serves its affiliates; the snapshot it writes
 * on shutdown loads in ours, record for record the bytes our encoder writes;
 * and the original `snapshot-decoder` prints the same JSON as ours.
 */
import { execFileSync, spawn } from "node:child_process"
import { once } from "node:events"
import { readFileSync, writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { createInterface } from "node:readline"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import * as GrpcClient from "../../src/adapters/grpc/GrpcClient.ts"
import { toJson } from "../../src/adapters/storage/SnapshotJson.ts"
import type { ClusterEntry } from "../../src/core/server/SnapshotCodec.ts"
import { decode, encode } from "../../src/core/server/SnapshotCodec.ts"
import { tempDir } from "../storage/fixtures/snapshots.ts"
import { buildGoBinaries } from "./support/goBuild.ts"
import { freePort, startOurServer } from "./support/processes.ts"

const root = resolve(import.meta.dirname, "../..")
const { dir, remove } = tempDir()
let goService = ""
let goDecoder = ""

beforeAll(() => {
  goService = buildGoBinaries().discoveryService
  goDecoder = join(root, ".go-cache/bin/snapshot-decoder")
  execFileSync("go", ["build", "-o", goDecoder, "github.com/siderolabs/discovery-service/cmd/snapshot-decoder"], {
    cwd: join(root, "test/interop/go"),
    stdio: ["ignore", "inherit", "inherit"]
  })
}, 600_000)

afterAll(remove)

const blob = (size: number, fill: number) => new Uint8Array(size).fill(fill)

/** Three clusters: two with affiliates and endpoints, one empty. TTLs from 1 to 30 minutes. */
const state = (now: number): Array<ClusterEntry> => [
  {
    id: "cluster-1",
    affiliates: new Map(
      ["a", "b", "c"].map((id, i) => [
        id,
        {
          id,
          data: blob(100 + i, i + 1),
          expiresAt: now + (i + 1) * 10 * 60_000,
          endpoints: [
            { data: blob(16, 0x10 + i), expiresAt: now + 60_000 },
            { data: blob(32, 0x20 + i), expiresAt: now + 5 * 60_000 }
          ]
        }
      ])
    )
  },
  {
    id: "cluster-2",
    affiliates: new Map([["z", { id: "z", data: blob(2048, 9), expiresAt: now + 30 * 60_000, endpoints: [] }]])
  },
  { id: "cluster-empty", affiliates: new Map() }
]

const runGo = async (path: string) => {
  const port = await freePort()
  const child = spawn(
    goService,
    [
      `-addr=127.0.0.1:${port}`,
      "-landing-addr=",
      "-metrics-addr=",
      "-gc-interval=1h",
      "-snapshots-enabled=true",
      `-snapshot-path=${path}`,
      "-snapshot-interval=1h"
    ],
    { stdio: ["ignore", "pipe", "pipe"] }
  )
  const output: Array<string> = []
  for (const stream of [child.stdout, child.stderr])
    createInterface({ input: stream }).on("line", (l) => output.push(l))
  const deadline = Date.now() + 20_000
  while (!output.some((line) => line.includes("API server starting"))) {
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`Go service did not start:\n${output.join("\n")}`)
    await new Promise((r) => setTimeout(r, 25))
  }
  return {
    address: `127.0.0.1:${port}`,
    output,
    stop: async () => {
      child.kill("SIGTERM")
      await once(child, "exit")
    }
  }
}

const plain = (views: ReadonlyArray<{ id: string; data: Uint8Array; endpoints: ReadonlyArray<Uint8Array> }>) =>
  views
    .map((v) => ({ id: v.id, data: Array.from(v.data), endpoints: v.endpoints.map((e) => Array.from(e)) }))
    .sort((x, y) => (x.id < y.id ? -1 : 1))

describe("snapshot files with the original Go service", () => {
  it("the original loads our snapshot, and we load the one it writes, with identical record bytes", async () => {
    const path = join(dir, "state.binpb")
    const written = Date.now()
    const ours = state(written)
    writeFileSync(path, encode(ours, written).bytes)

    const server = await runGo(path)
    const listed = await Effect.runPromise(
      Effect.gen(function* () {
        const api = yield* GrpcClient.make({ endpoint: server.address, tls: false })
        return {
          c1: yield* api.list({ clusterId: "cluster-1" }),
          c2: yield* api.list({ clusterId: "cluster-2" })
        }
      }).pipe(Effect.scoped)
    )
    await server.stop()
    const loadedLine = server.output.find((line) => line.includes("state loaded"))
    assert.isDefined(loadedLine, server.output.join("\n"))
    assert.include(loadedLine!, '"clusters":3')
    assert.include(loadedLine!, '"affiliates":4')
    assert.include(loadedLine!, '"endpoints":6')
    const toViews = (cluster: ClusterEntry) =>
      [...cluster.affiliates.values()].map((a) => ({
        id: a.id,
        data: a.data,
        endpoints: a.endpoints.map((e) => e.data)
      }))
    assert.deepStrictEqual(plain(listed.c1), plain(toViews(ours[0]!)))
    assert.deepStrictEqual(plain(listed.c2), plain(toViews(ours[1]!)))

    // What the original wrote on shutdown: every record is exactly what our encoder writes
    // for the same cluster and TTLs (only the order of clusters differs: Go's map order).
    const goBytes = new Uint8Array(readFileSync(path))
    const now = Date.now()
    const decoded = decode(goBytes, now)
    assert.deepStrictEqual(decoded.skipped, [])
    // The original's first GC pass, at start, removed the empty cluster.
    assert.deepStrictEqual(decoded.clusters.map((c) => c.id).sort(), ["cluster-1", "cluster-2"])
    const reencoded = decoded.clusters.map((cluster) => encode([cluster], now).bytes)
    let offset = 0
    for (const record of reencoded) {
      assert.deepStrictEqual(goBytes.subarray(offset, offset + record.length), record)
      offset += record.length
    }
    assert.strictEqual(offset, goBytes.length)
    // Time left is what we wrote, less the seconds the test took.
    for (const cluster of decoded.clusters) {
      const original = ours.find((c) => c.id === cluster.id)!
      for (const affiliate of cluster.affiliates.values()) {
        const before = original.affiliates.get(affiliate.id)!
        assert.isAtMost(Math.abs(affiliate.expiresAt - before.expiresAt), 10_000)
      }
    }

    // The original decoder and ours print the same JSON.
    const goJson = execFileSync(goDecoder, [`-snapshot-path=${path}`], { encoding: "utf8" })
    assert.deepStrictEqual(JSON.parse(goJson), JSON.parse(toJson(goBytes)))
  })

  it("a file the original wrote from its API loads in our service with the same affiliates and TTLs (±1 s)", async () => {
    const path = join(dir, "from-go.binpb")
    const ttls = [90, 600, 1800]
    const put = (address: string) =>
      Effect.runPromise(
        Effect.gen(function* () {
          const api = yield* GrpcClient.make({ endpoint: address, tls: false })
          for (const [i, ttl] of ttls.entries()) {
            yield* api.affiliateUpdate({
              clusterId: "go-written",
              affiliateId: `node-${i}`,
              data: blob(50 + i, i + 1),
              endpoints: [blob(16, 0x30 + i)],
              ttl: Duration.seconds(ttl)
            })
          }
          return yield* api.list({ clusterId: "go-written" })
        }).pipe(Effect.scoped)
      )
    const go = await runGo(path)
    const before = await put(go.address)
    await go.stop()
    const goSavedAt = Date.now()
    const goFile = decode(new Uint8Array(readFileSync(path)), goSavedAt)

    const ours = await startOurServer({ snapshotPath: path })
    const after = await Effect.runPromise(
      Effect.gen(function* () {
        const api = yield* GrpcClient.make({ endpoint: ours.address, tls: false })
        return yield* api.list({ clusterId: "go-written" })
      }).pipe(Effect.scoped)
    )
    await ours.stop()
    const ourSavedAt = Date.now()
    const ourFile = decode(new Uint8Array(readFileSync(path)), ourSavedAt)

    assert.deepStrictEqual(plain(after), plain(before))
    // Each file holds whole seconds left at its save, so the expiry instants they imply agree within 1 s
    // (plus the few milliseconds between a save and the moment the test sees the process exit).
    const expiries = (file: ReturnType<typeof decode>) =>
      new Map([...file.clusters[0]!.affiliates.values()].map((a) => [a.id, a.expiresAt]))
    const fromGo = expiries(goFile)
    const fromOurs = expiries(ourFile)
    assert.strictEqual(fromOurs.size, ttls.length)
    for (const [id, expiresAt] of fromGo) {
      assert.isAtMost(Math.abs(fromOurs.get(id)! - expiresAt), 1_100, id)
    }
  })

  it("the original leaves the old file in place when its state is empty at shutdown (Q13)", async () => {
    // Everything in this snapshot has expired: the original loads it, its first GC empties the
    // state, and its final save then writes nothing. (Ours writes an empty file instead.)
    const path = join(dir, "expired.binpb")
    const now = Date.now()
    const expired = encode(state(now - 3_600_000), now).bytes
    writeFileSync(path, expired)
    const server = await runGo(path)
    await server.stop()
    assert.deepStrictEqual(new Uint8Array(readFileSync(path)), expired)
  })
})
