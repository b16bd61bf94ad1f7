/**
 * Packed clusters are read back with shared scratch state; it must not keep
 * what it read alive: neither the last map of affiliates it built, nor
 * buffers the size of the largest record it ever read.
 */
import { setFlagsFromString } from "node:v8"
import { runInNewContext } from "node:vm"
import { assert, describe, it } from "@effect/vitest"
import { ClusterStore } from "../../src/core/server/ClusterStore.ts"
import { decode, encode } from "../../src/core/server/SnapshotCodec.ts"
import { affiliateEntry, clusterEntry, now } from "../storage/fixtures/snapshots.ts"

setFlagsFromString("--expose-gc")
const gc: () => void = runInNewContext("gc")
const collect = async () => {
  for (let i = 0; i < 4; i++) {
    gc()
    await new Promise((resolve) => setTimeout(resolve, 0))
  }
}

/** A one-cluster snapshot whose affiliate holds `size` bytes. */
const snapshot = (size: number): Uint8Array =>
  encode([clusterEntry("c1", [affiliateEntry("a1", new Uint8Array(size).fill(7), 60)])], now).bytes

/** A store restored from `bytes`, with its cluster used once. */
const usedStore = (bytes: Uint8Array): ClusterStore => {
  const store = new ClusterStore()
  for (const cluster of decode(bytes, now).clusters) {
    assert.isDefined(cluster.packed)
    store.restore(cluster.id, cluster.packed!, now)
  }
  assert.strictEqual(store.list("c1").length, 1)
  return store
}

describe("packed clusters' memory", () => {
  it("lets the affiliates it unpacked go with their store", async () => {
    const unpacked = new WeakRef(usedStore(snapshot(16)).clusters.get("c1")!.affiliates)
    await collect()
    assert.isUndefined(unpacked.deref())
  })

  it("keeps no buffer the size of a large record it unpacked", async () => {
    const size = 8 * 1024 * 1024
    const bytes = snapshot(size)
    await collect()
    const before = process.memoryUsage().arrayBuffers
    const store = usedStore(bytes)
    store.delete({ clusterId: "c1", affiliateId: "a1" }, 0)
    await collect()
    assert.isBelow(process.memoryUsage().arrayBuffers - before, size / 4)
  })
})
