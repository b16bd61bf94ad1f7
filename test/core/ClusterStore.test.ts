import { assert, describe, it } from "@effect/vitest"
import { ClusterStore } from "../../src/core/server/ClusterStore.ts"
import type { ChangeRecord } from "../../src/ports/ChangeCause.ts"
import { decode, encode, encodePieces } from "../../src/core/server/SnapshotCodec.ts"
import { joinPieces } from "../../src/ports/SnapshotStore.ts"
import type { WatchDelta, WatchSink } from "../../src/ports/ClusterApi.ts"
import type { SubscriptionLost, Unavailable } from "../../src/ports/DiscoveryError.ts"
import { ResourceExhausted } from "../../src/ports/DiscoveryError.ts"
import {
  gcCounts,
  blob,
  endpoint,
  type PlainEvent,
  plainAffiliate,
  plainEvent,
  plainList,
  updateRequest,
  utf8
} from "./fixtures/discovery.ts"

const now = 1_000_000
const minute = 60_000

/** A sink that holds up to `capacity` deltas until drained, like a watcher's buffer. */
interface TestSink extends WatchSink {
  readonly events: Array<WatchDelta>
  failure: SubscriptionLost | Unavailable | undefined
}

const newQueue = (capacity = 32): TestSink => {
  const sink: TestSink = {
    events: [],
    failure: undefined,
    offer: (delta) => sink.events.length < capacity && sink.events.push(delta) > 0,
    end: (error) => {
      sink.failure = error
    }
  }
  return sink
}

/** Takes what a sink holds right now, and its failure if it has one. */
const drain = (queue: TestSink): { events: Array<PlainEvent>; failure: unknown } => ({
  events: queue.events.splice(0).map(plainEvent),
  failure: queue.failure
})

const subscribe = (store: ClusterStore, clusterId: string, queue: TestSink) => {
  const result = store.subscribe(clusterId, queue)
  if (result instanceof ResourceExhausted) throw new Error(`subscribe failed: ${result.message}`)
  if (result._tag !== "Snapshot") throw new Error("a watch without a resume point started resumed")
  return result
}

/** Fails the test when an update was refused. */
const assertApplied = (result: ChangeRecord | ResourceExhausted): void => {
  if (result instanceof ResourceExhausted) assert.fail(result.message)
}

/** The refusal of an update, if it was refused. */
const failureOf = (result: ChangeRecord | ResourceExhausted): ResourceExhausted | undefined =>
  result instanceof ResourceExhausted ? result : undefined

/** A store holding af1 (data, expiring at +1m) in c1. */
const withAffiliate = (): ClusterStore => {
  const store = new ClusterStore()
  assertApplied(store.update(updateRequest({ affiliateId: "af1", data: utf8("data1") }), now + minute))
  return store
}

const af = plainAffiliate

describe("ClusterStore", () => {
  describe("clusters", () => {
    it("collects nothing from an empty store", () => {
      const store = new ClusterStore()
      assert.deepStrictEqual(gcCounts(store.collectGarbage(now)), {
        removedClusters: 0,
        removedAffiliates: 0,
        trimmedAffiliates: 0
      })
      assert.deepStrictEqual(store.stats(), { clusters: 0, affiliates: 0, endpoints: 0, watches: 0 })
    })

    it("creates a cluster for its first affiliate", () => {
      const store = withAffiliate()
      assert.deepStrictEqual(plainList(store.list("c1")), [af("af1", "data1")])
      assert.deepStrictEqual(store.stats(), { clusters: 1, affiliates: 1, endpoints: 0, watches: 0 })
    })

    it("does not create a cluster on list or on delete", () => {
      const store = new ClusterStore()
      assert.deepStrictEqual(store.list("nowhere"), [])
      store.delete({ clusterId: "nowhere", affiliateId: "a1" }, now)
      assert.strictEqual(store.stats().clusters, 0)
    })

    it("drops a cluster as soon as its last affiliate is deleted", () => {
      const store = withAffiliate()
      store.delete({ clusterId: "c1", affiliateId: "af1" }, now)
      assert.strictEqual(store.stats().clusters, 0)
    })

    it("keeps an empty cluster while it is watched and drops it when the watch ends", () => {
      const store = new ClusterStore()
      const queue = newQueue()
      subscribe(store, "c1", queue)
      assert.deepStrictEqual(gcCounts(store.collectGarbage(now)), {
        removedClusters: 0,
        removedAffiliates: 0,
        trimmedAffiliates: 0
      })
      assert.strictEqual(store.stats().clusters, 1)
      store.unsubscribe("c1", queue, now)
      assert.deepStrictEqual(store.stats(), { clusters: 0, affiliates: 0, endpoints: 0, watches: 0 })
    })

    it("keeps a watched cluster after GC removed its last affiliate and drops it after the watch", () => {
      const store = withAffiliate()
      const queue = newQueue()
      subscribe(store, "c1", queue)
      assert.deepStrictEqual(gcCounts(store.collectGarbage(now)), {
        removedClusters: 0,
        removedAffiliates: 0,
        trimmedAffiliates: 0
      })
      assert.deepStrictEqual(gcCounts(store.collectGarbage(now + 2 * minute)), {
        removedClusters: 0,
        removedAffiliates: 1,
        trimmedAffiliates: 0
      })
      assert.deepStrictEqual(drain(queue), {
        events: [{ _tag: "Deleted", revision: 2, affiliateId: "af1" }],
        failure: undefined
      })
      store.unsubscribe("c1", queue, now)
      assert.deepStrictEqual(gcCounts(store.collectGarbage(now + 2 * minute)), {
        removedClusters: 0,
        removedAffiliates: 0,
        trimmedAffiliates: 0
      })
      assert.strictEqual(store.stats().clusters, 0)
    })

    it("removes expired affiliates and then their clusters across the store", () => {
      const store = new ClusterStore()
      store.update(updateRequest({ clusterId: "id1", affiliateId: "af0" }), now - 1)
      store.update(updateRequest({ clusterId: "id2", affiliateId: "af1" }), now + minute)
      assert.deepStrictEqual(gcCounts(store.collectGarbage(now)), {
        removedClusters: 1,
        removedAffiliates: 1,
        trimmedAffiliates: 0
      })
      assert.deepStrictEqual(store.stats(), { clusters: 1, affiliates: 1, endpoints: 0, watches: 0 })
      assert.deepStrictEqual(gcCounts(store.collectGarbage(now + 2 * minute)), {
        removedClusters: 1,
        removedAffiliates: 1,
        trimmedAffiliates: 0
      })
      assert.deepStrictEqual(gcCounts(store.collectGarbage(now + 2 * minute)), {
        removedClusters: 0,
        removedAffiliates: 0,
        trimmedAffiliates: 0
      })
      assert.strictEqual(store.stats().clusters, 0)
    })
  })

  describe("garbage collection boundaries", () => {
    it("keeps an affiliate expiring exactly now and removes it strictly after", () => {
      const store = new ClusterStore()
      store.update(updateRequest({ data: utf8("d") }), now)
      assert.strictEqual(store.collectGarbage(now).removedAffiliates, 0)
      assert.strictEqual(store.stats().affiliates, 1)
      assert.strictEqual(store.collectGarbage(now + 1).removedAffiliates, 1)
      assert.strictEqual(store.stats().affiliates, 0)
    })

    it("drops an endpoint expiring exactly now while its affiliate stays", () => {
      const store = new ClusterStore()
      store.update(updateRequest({ data: utf8("d") }), now + minute)
      store.update(updateRequest({ endpoints: [endpoint(1)] }), now)
      store.update(updateRequest({ endpoints: [endpoint(2)] }), now + 1)
      assert.deepStrictEqual(gcCounts(store.collectGarbage(now - 1)), {
        removedClusters: 0,
        removedAffiliates: 0,
        trimmedAffiliates: 0
      })
      assert.deepStrictEqual(gcCounts(store.collectGarbage(now)), {
        removedClusters: 0,
        removedAffiliates: 0,
        trimmedAffiliates: 1
      })
      assert.deepStrictEqual(plainList(store.list("c1")), [af("a1", "d", [endpoint(2)])])
    })

    it("removes an affiliate created with a zero ttl once time has moved on", () => {
      const store = new ClusterStore()
      store.update(updateRequest(), now)
      assert.strictEqual(store.collectGarbage(now).removedAffiliates, 0)
      assert.strictEqual(store.collectGarbage(now + 1).removedAffiliates, 1)
    })
  })

  describe("limits", () => {
    it("accepts 64 distinct endpoints one by one and refuses the 65th without changing anything", () => {
      const store = new ClusterStore()
      const queue = newQueue(128)
      subscribe(store, "c1", queue)
      for (let i = 0; i < 64; i++) {
        assertApplied(store.update(updateRequest({ endpoints: [endpoint(i)] }), now + minute))
      }
      assert.strictEqual(drain(queue).events.length, 64)
      const failure = store.update(updateRequest({ data: utf8("new"), endpoints: [endpoint(64)] }), now + 5 * minute)
      assert.instanceOf(failure, ResourceExhausted)
      assert.strictEqual(failureOf(failure)?.message, "too many endpoints in the affiliate")
      assert.deepStrictEqual(drain(queue).events, [])
      const [stored] = store.list("c1")
      assert.strictEqual(stored!.endpoints.length, 64)
      assert.strictEqual(stored!.data.length, 0)
      // the refused update extended nothing: the affiliate still expires at +1m
      assert.strictEqual(store.collectGarbage(now + minute + 1).removedAffiliates, 1)
    })

    it("still refreshes known endpoints of a full affiliate", () => {
      const store = new ClusterStore()
      const all = Array.from({ length: 64 }, (_, i) => endpoint(i))
      assertApplied(store.update(updateRequest({ endpoints: all }), now + minute))
      assertApplied(store.update(updateRequest({ endpoints: [endpoint(0), endpoint(0)] }), now + 3 * minute))
      assert.strictEqual(store.collectGarbage(now + 2 * minute).trimmedAffiliates, 1)
      assert.deepStrictEqual(
        store.list("c1")[0]!.endpoints.map((e) => Array.from(e)),
        [Array.from(endpoint(0))]
      )
    })

    it("refuses a request that would add more than 64 endpoints, all or nothing", () => {
      const store = new ClusterStore()
      store.update(updateRequest({ endpoints: [endpoint(0), endpoint(1)] }), now + minute)
      // e1 is known and e2..e64 are 63 new ones: 2 + 63 = 65
      const more = Array.from({ length: 64 }, (_, i) => endpoint(i + 1))
      const failure = store.update(updateRequest({ endpoints: more }), now + minute)
      assert.strictEqual(failureOf(failure)?.message, "too many endpoints in the affiliate")
      assert.strictEqual(store.list("c1")[0]!.endpoints.length, 2)
      // e1..e63 add 62 new ones: exactly 64
      assertApplied(store.update(updateRequest({ endpoints: more.slice(0, 63) }), now + minute))
      assert.strictEqual(store.list("c1")[0]!.endpoints.length, 64)
    })

    it("does not create a new affiliate, nor its cluster, from a request with 65 distinct endpoints", () => {
      const store = new ClusterStore()
      const queue = newQueue()
      subscribe(store, "watched", queue)
      const endpoints = Array.from({ length: 65 }, (_, i) => endpoint(i))
      const failure = store.update(updateRequest({ clusterId: "fresh", endpoints }), now + minute)
      assert.strictEqual(failureOf(failure)?.message, "too many endpoints in the affiliate")
      const failure2 = store.update(updateRequest({ clusterId: "watched", endpoints }), now + minute)
      assert.strictEqual(failureOf(failure2)?.message, "too many endpoints in the affiliate")
      assert.deepStrictEqual(store.stats(), { clusters: 1, affiliates: 0, endpoints: 0, watches: 1 })
      assert.deepStrictEqual(drain(queue).events, [])
    })

    it("creates a new affiliate from a request with 64 distinct endpoints and duplicates", () => {
      const store = new ClusterStore()
      const endpoints = Array.from({ length: 64 }, (_, i) => endpoint(i))
      assertApplied(store.update(updateRequest({ endpoints: [...endpoints, ...endpoints] }), now + minute))
      assert.strictEqual(store.stats().endpoints, 64)
    })

    it("accepts 1024 affiliates and refuses the 1025th without changing anything", () => {
      const store = new ClusterStore()
      for (let i = 0; i < 1024; i++) {
        assertApplied(store.update(updateRequest({ affiliateId: `af${i}` }), now + minute))
      }
      const queue = newQueue()
      const subscription = subscribe(store, "c1", queue)
      assert.strictEqual(subscription.affiliates.length, 1024)
      const failure = store.update(updateRequest({ affiliateId: "one-more", data: utf8("x") }), now + minute)
      assert.instanceOf(failure, ResourceExhausted)
      assert.strictEqual(failureOf(failure)?.message, "too many affiliates in the cluster")
      assert.strictEqual(store.stats().affiliates, 1024)
      assert.deepStrictEqual(drain(queue).events, [])
      // existing affiliates can still be updated
      assertApplied(store.update(updateRequest({ affiliateId: "af0", data: utf8("x") }), now + minute))
      assert.strictEqual(drain(queue).events.length, 1)
    })

    it("accepts a new affiliate again once one of 1024 is deleted", () => {
      const store = new ClusterStore()
      for (let i = 0; i < 1024; i++) store.update(updateRequest({ affiliateId: `af${i}` }), now + minute)
      store.delete({ clusterId: "c1", affiliateId: "af7" }, now)
      assertApplied(store.update(updateRequest({ affiliateId: "one-more" }), now + minute))
      assert.strictEqual(store.stats().affiliates, 1024)
    })
  })

  describe("caps", () => {
    it("refuses a new cluster beyond maxClusters, from an update or a watch", () => {
      const store = new ClusterStore({ maxClusters: 2, maxWatches: 10 })
      assertApplied(store.update(updateRequest({ clusterId: "c1" }), now + minute))
      subscribe(store, "c2", newQueue())
      const failure = store.update(updateRequest({ clusterId: "c3" }), now + minute)
      assert.instanceOf(failure, ResourceExhausted)
      assert.strictEqual(failureOf(failure)?.message, "too many clusters")
      const refused = store.subscribe("c3", newQueue())
      assert.instanceOf(refused, ResourceExhausted)
      assert.strictEqual((refused as ResourceExhausted).message, "too many clusters")
      assert.deepStrictEqual(store.stats(), { clusters: 2, affiliates: 1, endpoints: 0, watches: 1 })
      // existing clusters still take new affiliates and watchers
      assertApplied(store.update(updateRequest({ clusterId: "c2", affiliateId: "a2" }), now + minute))
      subscribe(store, "c1", newQueue())
    })

    it("refuses a watch beyond maxWatches and accepts one again after another ends", () => {
      const store = new ClusterStore({ maxClusters: 10, maxWatches: 2 })
      const first = newQueue()
      subscribe(store, "c1", first)
      subscribe(store, "c1", newQueue())
      const refused = store.subscribe("c2", newQueue())
      assert.instanceOf(refused, ResourceExhausted)
      assert.strictEqual((refused as ResourceExhausted).message, "too many watches")
      assert.deepStrictEqual(store.stats(), { clusters: 1, affiliates: 0, endpoints: 0, watches: 2 })
      store.unsubscribe("c1", first, now)
      subscribe(store, "c2", newQueue())
      assert.strictEqual(store.stats().watches, 2)
    })
  })

  describe("notifications", () => {
    it("gives a watcher the snapshot and revision current when it subscribed", () => {
      const store = withAffiliate()
      const queue = newQueue()
      const subscription = subscribe(store, "c1", queue)
      assert.strictEqual(subscription.revision, 1)
      assert.deepStrictEqual(plainList(subscription.affiliates), [af("af1", "data1")])
    })

    it("numbers changes per cluster, also while nobody watches", () => {
      const store = withAffiliate()
      store.update(updateRequest({ affiliateId: "af1", data: utf8("data2") }), now + minute)
      store.update(updateRequest({ clusterId: "other" }), now + minute)
      store.delete({ clusterId: "c1", affiliateId: "missing" }, now)
      assert.strictEqual(subscribe(store, "c1", newQueue()).revision, 2)
      assert.strictEqual(subscribe(store, "other", newQueue()).revision, 1)
    })

    it("publishes the full state after a trim by GC, not a deletion", () => {
      const store = withAffiliate()
      store.update(updateRequest({ affiliateId: "af1", endpoints: [endpoint(1)] }), now + 3 * minute)
      store.update(updateRequest({ affiliateId: "af1", endpoints: [endpoint(2)] }), now + minute)
      const queue = newQueue()
      const { revision } = subscribe(store, "c1", queue)
      assert.strictEqual(store.collectGarbage(now + 2 * minute).trimmedAffiliates, 1)
      assert.deepStrictEqual(drain(queue).events, [
        { _tag: "Updated", revision: revision + 1, affiliate: af("af1", "data1", [endpoint(1)]) }
      ])
    })

    it("publishes nothing for a missing affiliate's delete", () => {
      const store = withAffiliate()
      const queue = newQueue()
      subscribe(store, "c1", queue)
      store.delete({ clusterId: "c1", affiliateId: "missing" }, now)
      assert.deepStrictEqual(drain(queue).events, [])
    })

    it("cuts off a watcher whose buffer is full and keeps notifying the others", () => {
      const store = withAffiliate()
      const slow = newQueue(1)
      const fast = newQueue(64)
      subscribe(store, "c1", slow)
      subscribe(store, "c1", fast)
      store.update(updateRequest({ affiliateId: "af1", data: utf8("x1") }), now + minute)
      store.update(updateRequest({ affiliateId: "af1", data: utf8("x2") }), now + minute)
      store.update(updateRequest({ affiliateId: "af1", data: utf8("x3") }), now + minute)
      const slowResult = drain(slow)
      assert.deepStrictEqual(slowResult.events, [{ _tag: "Updated", revision: 2, affiliate: af("af1", "x1") }])
      assert.strictEqual((slowResult.failure as SubscriptionLost)._tag, "SubscriptionLost")
      assert.strictEqual((slowResult.failure as SubscriptionLost).message, "subscription canceled: lost update")
      assert.deepStrictEqual(
        drain(fast).events.map((e) => e.revision),
        [2, 3, 4]
      )
      // the cut-off watcher frees its slot at once; ending its stream later changes nothing more
      assert.strictEqual(store.stats().watches, 1)
      store.unsubscribe("c1", slow, now)
      assert.strictEqual(store.stats().watches, 1)
      store.unsubscribe("c1", fast, now)
      assert.deepStrictEqual(store.stats(), { clusters: 1, affiliates: 1, endpoints: 0, watches: 0 })
    })
  })

  describe("the log of changes for resuming watches", () => {
    it("holds what a watcher missed while it was away, and is dropped ten minutes after the last watcher left", () => {
      const store = new ClusterStore()
      assertApplied(store.update(updateRequest({ data: utf8("one") }), now + 60 * minute))
      const queue = newQueue()
      const first = subscribe(store, "c1", queue)
      store.unsubscribe("c1", queue, now)
      assertApplied(store.update(updateRequest({ data: utf8("two") }), now + 60 * minute))
      const resumeAt = { epoch: first.epoch!, revision: first.revision }
      const resumed = () => {
        const sink = newQueue()
        const started = store.subscribe("c1", sink, resumeAt)
        store.unsubscribe("c1", sink, now)
        return started instanceof ResourceExhausted ? "refused" : started._tag
      }
      store.collectGarbage(now)
      store.collectGarbage(now + 9 * minute)
      assert.strictEqual(resumed(), "Resumed")
      // a watcher came and went: the quiet time starts again
      store.collectGarbage(now + 10 * minute)
      store.collectGarbage(now + 19 * minute)
      assert.strictEqual(resumed(), "Resumed")
      store.collectGarbage(now + 20 * minute)
      store.collectGarbage(now + 30 * minute)
      assert.strictEqual(resumed(), "Snapshot")
    })
  })

  describe("stored bytes", () => {
    it("copies the caller's data and endpoint blobs", () => {
      const store = new ClusterStore()
      const data = utf8("data")
      const blob16 = endpoint(5)
      store.update(updateRequest({ data, endpoints: [blob16] }), now + minute)
      data.fill(0)
      blob16.fill(0)
      assert.deepStrictEqual(plainList(store.list("c1")), [af("a1", "data", [endpoint(5)])])
    })

    it("compares data by bytes, not by identity", () => {
      const store = new ClusterStore()
      const queue = newQueue()
      subscribe(store, "c1", queue)
      store.update(updateRequest({ data: blob(8, 7) }), now + minute)
      store.update(updateRequest({ data: blob(8, 7) }), now + minute)
      assert.strictEqual(drain(queue).events.length, 1)
    })
  })

  describe("snapshotEntries", () => {
    it("gives a paused save each cluster once: one deleted and created again during a pause is left to the next", () => {
      const store = new ClusterStore()
      for (const id of ["c1", "c2", "c3"])
        store.update(updateRequest({ clusterId: id, data: utf8(`old-${id}`) }), now + minute)
      // Pieces of one record each: the encoder pauses after every cluster.
      const pieces = encodePieces(store.snapshotEntries(), now, 1)
      const saved: Array<Uint8Array> = [pieces.next().value as Uint8Array]
      store.delete({ clusterId: "c1", affiliateId: "a1" }, now)
      assert.isFalse(store.clusters.has("c1"))
      store.update(updateRequest({ clusterId: "c1", data: utf8("new-c1") }), now + minute)
      store.update(updateRequest({ clusterId: "c4", data: utf8("new-c4") }), now + minute)
      for (let next = pieces.next(); !next.done; next = pieces.next()) saved.push(next.value.slice())
      const decoded = decode(joinPieces(saved.map((piece) => piece.slice())), now)
      assert.deepStrictEqual(decoded.skipped, [])
      assert.deepStrictEqual(
        decoded.clusters.map((cluster) => [
          cluster.id,
          plainList([...cluster.affiliates.values()].map((a) => a.view()))
        ]),
        [
          ["c1", [af("a1", "old-c1")]],
          ["c2", [af("a1", "old-c2")]],
          ["c3", [af("a1", "old-c3")]]
        ]
      )
    })
  })

  describe("restore", () => {
    const entry = (id: string, expiresIn: number, endpoints: ReadonlyArray<[number, number]>) => ({
      id,
      data: utf8(`data-${id}`),
      expiresAt: now + expiresIn,
      endpoints: endpoints.map(([n, endpointExpiresIn]) => ({ data: endpoint(n), expiresAt: now + endpointExpiresIn }))
    })

    it("copies plain entries, drops what has expired by GC's rules and reports it", () => {
      const store = new ClusterStore()
      const fresh = entry("a1", minute, [
        [1, minute],
        [2, 0]
      ])
      const expired = entry("a2", -1, [[3, minute]])
      const report = store.restore("c1", [fresh, expired], now)
      assert.deepStrictEqual(report, { affiliates: 1, endpoints: 1, expiredAffiliates: 1, expiredEndpoints: 2 })
      fresh.data.fill(0)
      fresh.endpoints[0]!.data.fill(0)
      assert.deepStrictEqual(plainList(store.list("c1")), [af("a1", "data-a1", [endpoint(1)])])
      assert.isUndefined(store.restore("c1", [fresh], now))
    })

    it("takes over decoded affiliates as they are, and they then merge like any other", () => {
      const store = new ClusterStore()
      const decoded = decode(
        encode([{ id: "c1", affiliates: new Map([["a1", entry("a1", minute, [[1, minute]])]]) }], now).bytes,
        now
      )
      const affiliate = decoded.clusters[0]!.affiliates.get("a1")!
      store.restore("c1", decoded.clusters[0]!.affiliates.values(), now)
      assert.strictEqual(store.clusters.get("c1")!.affiliates.get("a1"), affiliate)
      assertApplied(store.update(updateRequest({ affiliateId: "a1", endpoints: [endpoint(2)] }), now + minute))
      assert.deepStrictEqual(plainList(store.list("c1")), [af("a1", "data-a1", [endpoint(1), endpoint(2)])])
      assert.deepStrictEqual(store.stats(), { clusters: 1, affiliates: 1, endpoints: 2, watches: 0 })
    })

    it("takes over a decoded map of affiliates as the cluster's own, without the expired ones", () => {
      const store = new ClusterStore()
      const affiliates = new Map([
        ["a1", entry("a1", minute, [[1, minute]])],
        ["a2", entry("a2", -1, [[2, minute]])],
        ["a3", entry("a3", minute, [[3, -1]])]
      ])
      const decoded = decode(encode([{ id: "c1", affiliates }], now).bytes, now).clusters[0]!.affiliates
      const report = store.restore("c1", decoded, now + 1)
      assert.deepStrictEqual(report, { affiliates: 2, endpoints: 1, expiredAffiliates: 1, expiredEndpoints: 2 })
      assert.strictEqual(store.clusters.get("c1")!.affiliates, decoded)
      assert.deepStrictEqual([...decoded.keys()], ["a1", "a3"])
      assert.deepStrictEqual(plainList(store.list("c1")), [af("a1", "data-a1", [endpoint(1)]), af("a3", "data-a3", [])])
      assert.isUndefined(store.restore("c1", new Map(), now))
    })

    describe("packed", () => {
      const snapshotOf = (...affiliates: ReadonlyArray<ReturnType<typeof entry>>) =>
        encode([{ id: "c1", affiliates: new Map(affiliates.map((a) => [a.id, a])) }], now).bytes
      const packedOf = (bytes: Uint8Array) => {
        const packed = decode(bytes, now).clusters[0]!.packed
        assert.isDefined(packed, "the decoder kept the cluster packed")
        return packed!
      }
      const bytes = snapshotOf(entry("a1", 2 * minute, [[1, minute]]), entry("a2", 3 * minute, [[2, 2 * minute]]))

      it("stays packed through stats, GC passes before its first expiry and saves, which see it whole", () => {
        const store = new ClusterStore()
        const report = store.restore("c1", packedOf(bytes), now)
        assert.deepStrictEqual(report, { affiliates: 2, endpoints: 2, expiredAffiliates: 0, expiredEndpoints: 0 })
        const cluster = store.clusters.get("c1")!
        assert.deepStrictEqual(store.stats(), { clusters: 1, affiliates: 2, endpoints: 2, watches: 0 })
        assert.deepStrictEqual(gcCounts(store.collectGarbage(now + minute - 1)), {
          removedClusters: 0,
          removedAffiliates: 0,
          trimmedAffiliates: 0
        })
        assert.deepStrictEqual(Array.from(encode(store.clusters.values(), now).bytes), Array.from(bytes))
        assert.isDefined(cluster.packed, "still packed")
        assert.deepStrictEqual(plainList(store.list("c1")), [
          af("a1", "data-a1", [endpoint(1)]),
          af("a2", "data-a2", [endpoint(2)])
        ])
        assert.isUndefined(cluster.packed, "unpacked by its first use")
      })

      it("is unpacked by the GC pass that reaches its first expiry, and trimmed by GC's rules", () => {
        const store = new ClusterStore()
        store.restore("c1", packedOf(bytes), now)
        assert.deepStrictEqual(gcCounts(store.collectGarbage(now + minute)), {
          removedClusters: 0,
          removedAffiliates: 0,
          trimmedAffiliates: 1
        })
        assert.isUndefined(store.clusters.get("c1")!.packed)
        assert.deepStrictEqual(plainList(store.list("c1")), [
          af("a1", "data-a1", []),
          af("a2", "data-a2", [endpoint(2)])
        ])
      })

      it("is unpacked and trimmed at once when something in it has expired by the time it is restored", () => {
        const store = new ClusterStore()
        const report = store.restore("c1", packedOf(bytes), now + 2 * minute + 1)
        assert.deepStrictEqual(report, { affiliates: 1, endpoints: 0, expiredAffiliates: 1, expiredEndpoints: 2 })
        assert.isUndefined(store.clusters.get("c1")!.packed)
        assert.deepStrictEqual(plainList(store.list("c1")), [af("a2", "data-a2", [])])
      })

      it("merges updates once unpacked, like any other cluster", () => {
        const store = new ClusterStore()
        store.restore("c1", packedOf(bytes), now)
        assertApplied(store.update(updateRequest({ affiliateId: "a1", endpoints: [endpoint(3)] }), now + minute))
        assert.deepStrictEqual(store.stats(), { clusters: 1, affiliates: 2, endpoints: 3, watches: 0 })
        store.delete({ clusterId: "c1", affiliateId: "a2" }, now)
        assert.deepStrictEqual(plainList(store.list("c1")), [af("a1", "data-a1", [endpoint(1), endpoint(3)])])
      })

      it("is not used for clusters the decoder builds at once: empty, repeated IDs, expired or over 64 affiliates", () => {
        assert.isUndefined(decode(encode([{ id: "c1", affiliates: new Map() }], now).bytes, now).clusters[0]!.packed)
        assert.isUndefined(decode(snapshotOf(entry("a1", -1, [])), now).clusters[0]!.packed)
        assert.isUndefined(decode(snapshotOf(entry("a1", minute, [[1, 0]])), now).clusters[0]!.packed)
        const many = Array.from({ length: 65 }, (_, i) => entry(`a${i}`, minute, []))
        assert.isUndefined(decode(snapshotOf(...many), now).clusters[0]!.packed)
        assert.isDefined(decode(snapshotOf(...many.slice(0, 64)), now).clusters[0]!.packed)
        // The encoder writes each entry's own ID, so two keys can carry one affiliate ID.
        const repeated = new Map([
          ["x", { ...entry("a1", minute, []), data: utf8("first") }],
          ["y", { ...entry("a1", minute, []), data: utf8("second") }]
        ])
        const cluster = decode(encode([{ id: "c1", affiliates: repeated }], now).bytes, now).clusters[0]!
        assert.isUndefined(cluster.packed)
        assert.deepStrictEqual(plainList([...cluster.affiliates.values()].map((a) => a.view())), [
          af("a1", "second", [])
        ])
      })
    })
  })

  describe("snapshots of a reconnect storm", () => {
    it("gives watchers that start at one revision one set of views, and fresh ones after a change", () => {
      const store = new ClusterStore()
      store.update(updateRequest({ data: blob(8, 1), endpoints: [endpoint(1)] }), now + minute)
      const start = (sink: TestSink) => {
        const started = store.subscribe("c1", sink)
        if (started._tag !== "Snapshot") throw new Error(`a snapshot, not ${started._tag}`)
        return started.affiliates
      }
      const first = start(newQueue())
      assert.strictEqual(start(newQueue()), first, "the same views, made once")
      store.update(updateRequest({ data: blob(8, 2) }), now + minute)
      const after = start(newQueue())
      assert.notStrictEqual(after, first)
      assert.deepStrictEqual(plainList(after), plainList(store.list("c1")))
      assert.deepStrictEqual([...after[0]!.data], [...blob(8, 2)])
      assert.deepStrictEqual([...first[0]!.data], [...blob(8, 1)], "an earlier snapshot is left as it was")
    })
  })
})
