/**
 * Property test of packed clusters: a store restored from a snapshot keeps
 * most clusters packed (their affiliates still in the record's bytes) until
 * first used. Whatever is done to it — updates, deletes, lists, watches, GC
 * passes, stats and saves, in any order and at any time — it must answer
 * exactly as a store restored from the same snapshot with every affiliate
 * built at once.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { ClusterStore } from "../../src/core/server/ClusterStore.ts"
import { ResourceExhausted } from "../../src/ports/DiscoveryError.ts"
import { decode, encode } from "../../src/core/server/SnapshotCodec.ts"
import type { WatchSink } from "../../src/ports/ClusterApi.ts"
import { generatedEntry, now } from "../storage/fixtures/snapshots.ts"
import { plainEvent, plainList, updateRequest } from "./fixtures/discovery.ts"

const second = 1000
const clusterIds = ["c0", "c1", "c2", "c3"]
const affiliateIds = ["a0", "a1", "a2", "é"]
const blob = fc.uint8Array({ maxLength: 12 })
/** TTLs in seconds: some already past, some passing while the steps run. */
const ttl = fc.integer({ min: -3, max: 20 })

/** A snapshot of up to four clusters, affiliate IDs sometimes repeated within one. */
const snapshot = fc
  .uniqueArray(
    fc.record({
      id: fc.constantFrom(...clusterIds),
      affiliates: fc.array(
        fc.record({
          id: fc.constantFrom(...affiliateIds),
          data: blob,
          ttl,
          endpoints: fc.array(fc.record({ data: blob, ttl }), { maxLength: 3 })
        }),
        { maxLength: 4 }
      )
    }),
    { selector: (cluster) => cluster.id, maxLength: 4 }
  )
  .map((clusters) => encode(clusters.map(generatedEntry), now).bytes)

const step = fc.oneof(
  fc.record({
    _tag: fc.constant("update" as const),
    cluster: fc.constantFrom(...clusterIds),
    affiliate: fc.constantFrom(...affiliateIds),
    data: fc.option(blob, { nil: undefined }),
    endpoints: fc.array(blob, { maxLength: 2 }),
    ttl: fc.integer({ min: 1, max: 20 })
  }),
  fc.record({
    _tag: fc.constant("delete" as const),
    cluster: fc.constantFrom(...clusterIds),
    affiliate: fc.constantFrom(...affiliateIds)
  }),
  fc.record({ _tag: fc.constant("list" as const), cluster: fc.constantFrom(...clusterIds) }),
  fc.record({ _tag: fc.constant("watch" as const), cluster: fc.constantFrom(...clusterIds) }),
  fc.record({ _tag: fc.constant("gc" as const) }),
  fc.record({ _tag: fc.constant("stats" as const) }),
  fc.record({ _tag: fc.constant("save" as const) }),
  fc.record({ _tag: fc.constant("wait" as const), seconds: fc.integer({ min: 0, max: 8 }) })
)

/** A watcher that records everything it is sent. */
const recorder = (): WatchSink & { readonly events: Array<unknown> } => {
  const events: Array<unknown> = []
  return {
    events,
    offer: (delta) => events.push(plainEvent(delta)) > 0,
    end: (error) => {
      events.push({ end: error._tag })
    }
  }
}

/** A store restored from `bytes` at `now` as the service does (most clusters packed), or with every affiliate built. */
const restored = (bytes: Uint8Array, pack: boolean): ClusterStore => {
  const store = new ClusterStore()
  for (const cluster of decode(bytes, now, { pack }).clusters) {
    store.restore(cluster.id, cluster.packed ?? cluster.affiliates, now)
  }
  return store
}

describe("packed clusters", () => {
  it("answer every operation as clusters built at once do", () => {
    let packedSeen = 0
    fc.assert(
      fc.property(snapshot, fc.array(step, { maxLength: 25 }), (bytes, steps) => {
        const packed = restored(bytes, true)
        const built = restored(bytes, false)
        for (const cluster of packed.clusters.values()) if (cluster.packed !== undefined) packedSeen++
        const watchers: Record<"packed" | "built", Array<ReturnType<typeof recorder>>> = { packed: [], built: [] }
        let time = now
        const both = <A>(run: (store: ClusterStore, side: "packed" | "built") => A): void => {
          assert.deepStrictEqual(run(packed, "packed"), run(built, "built"))
        }
        for (const s of steps) {
          switch (s._tag) {
            case "update": {
              const request = updateRequest({
                clusterId: s.cluster,
                affiliateId: s.affiliate,
                data: s.data,
                endpoints: s.endpoints
              })
              both((store) => {
                const result = store.update(request, time + s.ttl * second)
                return result instanceof ResourceExhausted ? result._tag : result.cause
              })
              break
            }
            case "delete":
              both((store) => store.delete({ clusterId: s.cluster, affiliateId: s.affiliate }, time))
              break
            case "list":
              both((store) => plainList(store.list(s.cluster)))
              break
            case "watch":
              both((store, side) => {
                const sink = recorder()
                watchers[side].push(sink)
                const subscription = store.subscribe(s.cluster, sink)
                return subscription._tag === "Snapshot" ? plainList(subscription.affiliates) : subscription._tag
              })
              break
            case "gc":
              both((store) => store.collectGarbage(time))
              break
            case "stats":
              both((store) => store.stats())
              break
            case "save":
              both((store) => Array.from(encode(store.clusters.values(), time).bytes))
              break
            case "wait":
              time += s.seconds * second
              break
          }
        }
        both((store) => [...store.clusters.keys()])
        both((store) => store.stats())
        both((store) => Array.from(encode(store.clusters.values(), time).bytes))
        both((_, side) => watchers[side].map((w) => w.events))
      }),
      { numRuns: 500 }
    )
    assert.isAbove(packedSeen, 100, "the runs restored enough packed clusters")
  })
})
