/**
 * The snapshot save and load of the scale row, in one process and without a
 * transport: 100,000 clusters × 5 affiliates (256 bytes of data, two 32-byte
 * endpoints, TTL 30 minutes, the row's IDs) stored through `ClusterStore.update`,
 * then saved (`encode` to one buffer, then a `FileSnapshotStore` write:
 * temporary file, fsync, rename; then as the service saves, each piece
 * written as it is encoded) and loaded (the whole file read, decoded and
 * restored with `ClusterStore.restore` into a new store, most clusters kept
 * packed as in the service; then read and decoded piece by piece), `--runs` times each. Prints each phase in ms (and
 * three GC passes that find nothing expired), and the resident, heap and
 * external bytes per affiliate after the updates, after the load (clusters
 * still packed) and once every cluster was used (unpacked).
 *
 * Run: `node --expose-gc bench/snapshotScale.ts [--clusters 100000] [--runs 2] [--dir /tmp]`.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Duration, Effect, Option } from "effect"
import * as FileSnapshotStore from "../src/adapters/storage/FileSnapshotStore.ts"
import { ClusterStore } from "../src/core/server/ClusterStore.ts"
import type { DecodedSnapshot } from "../src/core/server/SnapshotCodec.ts"
import { decode, encode, encodePieces, SnapshotDecoder } from "../src/core/server/SnapshotCodec.ts"

const flag = (name: string, fallback: string): string => {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? fallback : process.argv[index + 1]!
}

const clusterCount = Number(flag("clusters", "100000"))
const runs = Number(flag("runs", "2"))
const dir = mkdtempSync(join(flag("dir", tmpdir()), "snapshot-scale-"))
const affiliatesPerCluster = 5
const affiliates = clusterCount * affiliatesPerCluster
const collect = (globalThis as { gc?: () => void }).gc ?? (() => undefined)
const caps = { maxClusters: 10_000_000, maxWatches: 10 }

const blob = (seed: number, size: number): Uint8Array => {
  const bytes = new Uint8Array(size)
  let x = seed | 1
  for (let i = 0; i < size; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    bytes[i] = x & 0xff
  }
  return bytes
}

/** IDs as the server holds them: flat strings decoded from a request, not the cons strings a template makes. */
const utf8 = new TextDecoder()
const flat = (text: string): string => utf8.decode(new TextEncoder().encode(text))

const memory = () => {
  collect()
  collect()
  return process.memoryUsage()
}

const perAffiliate = (after: NodeJS.MemoryUsage, before: NodeJS.MemoryUsage) => ({
  rss: Math.round((after.rss - before.rss) / affiliates),
  heapUsed: Math.round((after.heapUsed - before.heapUsed) / affiliates),
  external: Math.round((after.external - before.external) / affiliates)
})

const ms = (from: number) => Math.round(performance.now() - from)

type Files = Effect.Success<ReturnType<typeof FileSnapshotStore.make>>

/** A new store holding the decoded clusters as the service restores them (most kept packed); the affiliates kept. */
const restore = (decoded: DecodedSnapshot, now: number) => {
  const restored = new ClusterStore(caps)
  let kept = 0
  for (const cluster of decoded.clusters) {
    kept += restored.restore(cluster.id, cluster.packed ?? cluster.affiliates, now)?.affiliates ?? 0
  }
  return { restored, kept }
}

/** Loads as the service does today: the whole file in one buffer, then decoded. */
const loadWhole = (files: Files) =>
  Effect.gen(function* () {
    const now = Date.now()
    let started = performance.now()
    const bytes = Option.getOrThrow(yield* files.load)
    const readMs = ms(started)
    started = performance.now()
    const decoded = decode(bytes, now)
    const decodeMs = ms(started)
    started = performance.now()
    const { restored, kept } = restore(decoded, now)
    const restoreMs = ms(started)
    console.log(JSON.stringify({ load: readMs + decodeMs + restoreMs, readMs, decodeMs, restoreMs, kept }))
    return restored
  })

/** Loads through `read`: the file decoded piece by piece as it is read, in one reused buffer. */
const loadInPieces = (files: Files) =>
  Effect.gen(function* () {
    const now = Date.now()
    let started = performance.now()
    const decoder = new SnapshotDecoder(now)
    yield* files.read((bytes, final) => decoder.feed(bytes, 0, bytes.length, final))
    const readAndDecodeMs = ms(started)
    started = performance.now()
    const { restored, kept } = restore(decoder.result(), now)
    const restoreMs = ms(started)
    console.log(JSON.stringify({ loadInPieces: readAndDecodeMs + restoreMs, readAndDecodeMs, restoreMs, kept }))
    return restored
  })

const main = Effect.gen(function* () {
  const files = yield* FileSnapshotStore.make({ path: join(dir, "state.binpb") })
  const base = memory()
  let store: ClusterStore | undefined = new ClusterStore(caps)
  const ttl = Duration.minutes(30)
  const expiresAt = Date.now() + 1_800_000
  let started = performance.now()
  for (let c = 0; c < clusterCount; c++) {
    const clusterId = flat(`scale-${c.toString().padStart(8, "0")}-4f1c2a9be07d3e5f60718293a4b5c`)
    for (let a = 0; a < affiliatesPerCluster; a++) {
      const seed = c * affiliatesPerCluster + a + 1
      store.update(
        {
          clusterId,
          affiliateId: flat(`node-${a}-0123456789abcdef0123456789abcdef01234`),
          data: blob(seed, 256),
          endpoints: [blob(seed * 7, 32), blob(seed * 11, 32)],
          ttl
        },
        expiresAt
      )
    }
  }
  const updateMs = ms(started)
  const stored = perAffiliate(memory(), base)
  const gcPassMs: Array<number> = []
  for (let run = 0; run < 3; run++) {
    started = performance.now()
    store.collectGarbage(Date.now())
    gcPassMs.push(ms(started))
  }
  console.log(JSON.stringify({ affiliates, updateMs, gcPassMs, perAffiliate: stored }))

  for (let run = 0; run < runs; run++) {
    const now = Date.now()
    started = performance.now()
    const encoded = encode(store.clusters.values(), now)
    const encodeMs = ms(started)
    started = performance.now()
    yield* files.save(encoded.bytes)
    const writeMs = ms(started)
    console.log(
      JSON.stringify({
        save: encodeMs + writeMs,
        encodeMs,
        writeMs,
        bytes: encoded.bytes.length,
        affiliates: encoded.affiliates
      })
    )
    // As the service saves: each piece written before the next is encoded.
    started = performance.now()
    let size = 0
    const pieces = encodePieces(store!.clusters.values(), now)
    yield* files.save(
      (function* () {
        size = (yield* pieces).size
      })()
    )
    console.log(JSON.stringify({ savePiecewise: ms(started), bytes: size }))
  }

  store = undefined
  const before = memory()
  let restored: ClusterStore | undefined
  for (let run = 0; run < runs; run++) {
    restored = undefined
    restored = yield* loadWhole(files)
    restored = undefined
    restored = yield* loadInPieces(files)
  }
  const after = memory()
  console.log(JSON.stringify({ restoredPerAffiliate: perAffiliate(after, before), stats: restored?.stats() }))
  // Every cluster used once, as reconnecting nodes would: each affiliate built, as a restore did before packing.
  started = performance.now()
  let unpacked = 0
  for (const cluster of restored!.clusters.values()) unpacked += cluster.affiliates.size
  const unpackMs = ms(started)
  console.log(JSON.stringify({ unpackMs, unpacked, usedPerAffiliate: perAffiliate(memory(), before) }))
})

try {
  await Effect.runPromise(main)
} finally {
  rmSync(dir, { recursive: true, force: true })
}
