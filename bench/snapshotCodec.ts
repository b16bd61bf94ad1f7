/**
 * Snapshot codec throughput: encodes and decodes a large state (default 5000
 * clusters × 20 affiliates, 1 KiB data, 4 endpoints of 16 bytes each), held
 * in the store's compact form, and prints the time of each. The scale row's
 * shape, with the file and the store, is `bench/snapshotScale.ts`.
 * Run: `node bench/snapshotCodec.ts [clusters] [affiliates]`.
 */
import { Affiliate } from "../src/core/server/Affiliate.ts"
import type { ClusterEntry } from "../src/core/server/SnapshotCodec.ts"
import { decode, encode } from "../src/core/server/SnapshotCodec.ts"

const clusters = Number(process.argv[2] ?? 5000)
const affiliates = Number(process.argv[3] ?? 20)
const now = Date.now()

const state: Array<ClusterEntry> = Array.from({ length: clusters }, (_, c) => ({
  id: `cluster-${c.toString(36)}-${"x".repeat(32)}`,
  affiliates: new Map(
    Array.from({ length: affiliates }, (_, a) => {
      const id = `affiliate-${a}-${"y".repeat(32)}`
      return [
        id,
        Affiliate.fromEntry({
          id,
          data: new Uint8Array(1024).fill(a),
          expiresAt: now + 1_800_000,
          endpoints: Array.from({ length: 4 }, (_, e) => ({
            data: new Uint8Array(16).fill(e),
            expiresAt: now + 900_000
          }))
        })
      ] as const
    })
  )
}))

const time = <A>(label: string, runs: number, f: () => A): A => {
  let result = f()
  const started = performance.now()
  for (let i = 0; i < runs; i++) result = f()
  const millis = (performance.now() - started) / runs
  console.log(`${label}: ${millis.toFixed(1)} ms`)
  return result
}

const encoded = time("encode", 5, () => encode(state, now))
const megabytes = encoded.bytes.length / 1e6
console.log(`snapshot: ${megabytes.toFixed(1)} MB, ${encoded.clusters} clusters, ${encoded.affiliates} affiliates`)
const decoded = time("decode", 5, () => decode(encoded.bytes, now))
if (decoded.skipped.length > 0 || decoded.clusters.length !== clusters) throw new Error("decode mismatch")
