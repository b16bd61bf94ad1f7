/**
 * Property tests of the cluster state: random interleavings of updates,
 * deletes, time steps, GC runs and watches (some of which stop reading),
 * checked after every step against a small reference model written here from
 * PROTOCOL.md §2.5–§2.12 and our improvements (Q1, Q2, Q4, Q5).
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Duration, Effect, Exit, Fiber, Latch } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import * as TestDiscovery from "../../src/adapters/testing/TestDiscovery.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import type { GcReport, StoreCaps, StoreStats } from "../../src/core/server/ClusterStore.ts"
import type { AffiliateUpdateRequest } from "../../src/ports/ClusterApi.ts"
import {
  endpoint,
  type PlainAffiliate,
  type PlainEvent,
  plainEvent,
  plainList,
  type Recorder,
  record,
  type State,
  settle
} from "./fixtures/discovery.ts"

// ---------------------------------------------------------------------------
// The alphabet: a few clusters, affiliates, blobs and durations

const clusterIds = ["c0", "c1", "c2"] as const
const affiliateIds = ["a0", "a1", "a2", "a3"] as const
/** Data choices: absent, empty (means "no data"), and three payloads. */
const dataChoices: ReadonlyArray<ReadonlyArray<number> | undefined> = [undefined, [], [1, 2, 3], [4, 5], [1, 2, 3, 4]]
/** Endpoint blobs: two of 16 bytes, two of 32 bytes. */
const endpointChoices: ReadonlyArray<Uint8Array> = [endpoint(1), endpoint(2), endpoint(3, 32), endpoint(4, 32)]
/** TTLs in milliseconds, zero and negative included. */
const ttlChoices = [0, 1000, 2000, 5000, -1000] as const
const stepChoices = [1, 500, 1000, 2000] as const

type Action =
  | {
      readonly _tag: "Update"
      readonly cluster: number
      readonly affiliate: number
      readonly data: number
      readonly endpoints: ReadonlyArray<number>
      readonly ttl: number
    }
  | {
      readonly _tag: "Bulk"
      readonly cluster: number
      readonly affiliate: number
      readonly start: number
      readonly count: number
      readonly ttl: number
    }
  | { readonly _tag: "Invalid"; readonly cluster: number; readonly affiliate: number; readonly kind: number }
  | { readonly _tag: "Delete"; readonly cluster: number; readonly affiliate: number }
  | { readonly _tag: "Advance"; readonly millis: number }
  | { readonly _tag: "Gc" }
  | { readonly _tag: "Open"; readonly cluster: number }
  | { readonly _tag: "Close"; readonly watcher: number }
  | { readonly _tag: "Stop"; readonly watcher: number }
  | { readonly _tag: "Resume"; readonly watcher: number }
  | { readonly _tag: "Flood"; readonly cluster: number; readonly affiliate: number; readonly times: number }

const clusterArb = fc.nat({ max: clusterIds.length - 1 })
const affiliateArb = fc.nat({ max: affiliateIds.length - 1 })
const ttlArb = fc.constantFrom(...ttlChoices)
const watcherArb = fc.nat({ max: 7 })

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  {
    weight: 10,
    arbitrary: fc.record({
      _tag: fc.constant("Update" as const),
      cluster: clusterArb,
      affiliate: affiliateArb,
      data: fc.nat({ max: dataChoices.length - 1 }),
      endpoints: fc.array(fc.nat({ max: endpointChoices.length - 1 }), { maxLength: 3 }),
      ttl: ttlArb
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("Bulk" as const),
      cluster: clusterArb,
      affiliate: affiliateArb,
      start: fc.nat({ max: 40 }),
      count: fc.integer({ min: 20, max: 70 }),
      ttl: ttlArb
    })
  },
  {
    weight: 1,
    arbitrary: fc.record({
      _tag: fc.constant("Invalid" as const),
      cluster: clusterArb,
      affiliate: affiliateArb,
      kind: fc.nat({ max: 3 })
    })
  },
  {
    weight: 3,
    arbitrary: fc.record({ _tag: fc.constant("Delete" as const), cluster: clusterArb, affiliate: affiliateArb })
  },
  {
    weight: 3,
    arbitrary: fc.record({ _tag: fc.constant("Advance" as const), millis: fc.constantFrom(...stepChoices) })
  },
  { weight: 3, arbitrary: fc.record({ _tag: fc.constant("Gc" as const) }) },
  { weight: 3, arbitrary: fc.record({ _tag: fc.constant("Open" as const), cluster: clusterArb }) },
  { weight: 1, arbitrary: fc.record({ _tag: fc.constant("Close" as const), watcher: watcherArb }) },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("Stop" as const), watcher: watcherArb }) },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("Resume" as const), watcher: watcherArb }) },
  {
    weight: 2,
    arbitrary: fc.record({
      _tag: fc.constant("Flood" as const),
      cluster: clusterArb,
      affiliate: affiliateArb,
      times: fc.integer({ min: 10, max: 45 })
    })
  }
)

// ---------------------------------------------------------------------------
// The reference model

const watchBuffer = 32
const maxEndpoints = 64
const maxAffiliates = 1024

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i])

interface ModelEndpoint {
  readonly bytes: Uint8Array
  expiresAt: number
}

interface ModelAffiliate {
  readonly id: string
  data: Uint8Array
  expiresAt: number
  endpoints: Array<ModelEndpoint>
}

interface ModelWatcher {
  readonly clusterId: string
  /** reading: consumes; stopped: blocked on its gate; cut: lost an update; ended: stream over. */
  status: "reading" | "stopped" | "cut" | "ended"
  /** Events sitting in the watcher's buffer, not yet taken by its reader. */
  buffered: number
  /** A stopped reader still takes one batch (everything buffered) before it blocks on its gate. */
  takesOneMoreBatch: boolean
  /** Everything the watcher must receive, in order. */
  readonly expected: Array<PlainEvent>
  /** The failure its stream must end with, if any. */
  failure: { readonly _tag: string; readonly message: string } | undefined
  readonly recorder: Recorder
  readonly gate: Latch.Latch
  /** How many received events the checks have looked at, and what they replay to. */
  checked: number
  firstRevision: number
  readonly replayed: Map<string, PlainAffiliate>
  /** Set once an ended watcher was checked for the last time. */
  done: boolean
}

interface ModelCluster {
  readonly affiliates: Map<string, ModelAffiliate>
  readonly watchers: Set<ModelWatcher>
  revision: number
}

const viewOf = (affiliate: ModelAffiliate): PlainAffiliate => ({
  id: affiliate.id,
  data: Array.from(affiliate.data),
  endpoints: affiliate.endpoints.map((e) => Array.from(e.bytes))
})

const sortedViews = (cluster: ModelCluster | undefined): Array<PlainAffiliate> =>
  cluster === undefined ? [] : [...cluster.affiliates.values()].map(viewOf).sort((a, b) => (a.id < b.id ? -1 : 1))

class Model {
  readonly clusters = new Map<string, ModelCluster>()
  readonly watchers: Array<ModelWatcher> = []
  now = 0
  /** Events published by the current step, per cluster. */
  published = new Map<string, number>()
  readonly caps: StoreCaps
  constructor(caps: StoreCaps) {
    this.caps = caps
  }

  /** Watches holding a slot: a watcher cut off for falling behind frees its slot at once. */
  get openWatches(): number {
    return this.watchers.filter((w) => w.status === "reading" || w.status === "stopped").length
  }

  private publish(clusterId: string, cluster: ModelCluster, event: (revision: number) => PlainEvent): void {
    cluster.revision += 1
    this.published.set(clusterId, (this.published.get(clusterId) ?? 0) + 1)
    const e = event(cluster.revision)
    for (const watcher of [...cluster.watchers]) {
      if (watcher.buffered >= watchBuffer) {
        watcher.status = "cut"
        watcher.failure = { _tag: "SubscriptionLost", message: "subscription canceled: lost update" }
        cluster.watchers.delete(watcher)
      } else {
        watcher.buffered += 1
        watcher.expected.push(e)
      }
    }
  }

  private dropIfEmpty(clusterId: string): void {
    const cluster = this.clusters.get(clusterId)
    if (cluster !== undefined && cluster.affiliates.size === 0 && cluster.watchers.size === 0) {
      this.clusters.delete(clusterId)
    }
  }

  /** The failure message of an update, or undefined when it applies. */
  update(
    clusterId: string,
    affiliateId: string,
    data: Uint8Array | undefined,
    blobs: ReadonlyArray<Uint8Array>,
    ttl: number
  ): string | undefined {
    const expiresAt = this.now + ttl
    const distinct: Array<Uint8Array> = []
    for (const blob of blobs) if (!distinct.some((d) => sameBytes(d, blob))) distinct.push(blob)
    let cluster = this.clusters.get(clusterId)
    let affiliate = cluster?.affiliates.get(affiliateId)
    let created = false
    if (affiliate === undefined) {
      if (cluster === undefined && this.clusters.size >= this.caps.maxClusters) return "too many clusters"
      if (cluster !== undefined && cluster.affiliates.size >= maxAffiliates) return "too many affiliates in the cluster"
      if (distinct.length > maxEndpoints) return "too many endpoints in the affiliate"
      if (cluster === undefined) {
        cluster = { affiliates: new Map(), watchers: new Set(), revision: 0 }
        this.clusters.set(clusterId, cluster)
      }
      affiliate = { id: affiliateId, data: new Uint8Array(0), expiresAt: Number.NEGATIVE_INFINITY, endpoints: [] }
      cluster.affiliates.set(affiliateId, affiliate)
      created = true
    } else {
      const stored = affiliate.endpoints
      const fresh = distinct.filter((d) => !stored.some((e) => sameBytes(e.bytes, d)))
      if (stored.length + fresh.length > maxEndpoints) return "too many endpoints in the affiliate"
    }
    let visible = created
    if (data !== undefined && data.length > 0) {
      if (!sameBytes(affiliate.data, data)) {
        affiliate.data = Uint8Array.from(data)
        visible = true
      }
      affiliate.expiresAt = expiresAt
    }
    for (const blob of distinct) {
      const known = affiliate.endpoints.find((e) => sameBytes(e.bytes, blob))
      if (known === undefined) {
        affiliate.endpoints.push({ bytes: Uint8Array.from(blob), expiresAt })
        visible = true
      } else {
        known.expiresAt = Math.max(known.expiresAt, expiresAt)
      }
    }
    affiliate.expiresAt = Math.max(affiliate.expiresAt, expiresAt)
    if (visible) {
      const view = viewOf(affiliate)
      this.publish(clusterId, cluster!, (revision) => ({ _tag: "Updated", revision, affiliate: view }))
    }
    return undefined
  }

  delete(clusterId: string, affiliateId: string): void {
    const cluster = this.clusters.get(clusterId)
    if (cluster === undefined || !cluster.affiliates.has(affiliateId)) return
    cluster.affiliates.delete(affiliateId)
    this.publish(clusterId, cluster, (revision) => ({ _tag: "Deleted", revision, affiliateId }))
    this.dropIfEmpty(clusterId)
  }

  gc(): GcReport {
    let removedClusters = 0
    let removedAffiliates = 0
    let trimmedAffiliates = 0
    for (const [clusterId, cluster] of [...this.clusters]) {
      for (const affiliate of [...cluster.affiliates.values()]) {
        if (affiliate.expiresAt < this.now) {
          cluster.affiliates.delete(affiliate.id)
          removedAffiliates++
          this.publish(clusterId, cluster, (revision) => ({ _tag: "Deleted", revision, affiliateId: affiliate.id }))
          continue
        }
        const kept = affiliate.endpoints.filter((e) => e.expiresAt > this.now)
        if (kept.length < affiliate.endpoints.length) {
          affiliate.endpoints = kept
          trimmedAffiliates++
          const view = viewOf(affiliate)
          this.publish(clusterId, cluster, (revision) => ({ _tag: "Updated", revision, affiliate: view }))
        }
      }
      if (cluster.affiliates.size === 0 && cluster.watchers.size === 0) {
        this.clusters.delete(clusterId)
        removedClusters++
      }
    }
    return { removedClusters, removedAffiliates, trimmedAffiliates }
  }

  /** Registers a watcher, or says why it is refused. */
  open(clusterId: string): { snapshot: PlainEvent } | { failure: string } {
    if (this.openWatches >= this.caps.maxWatches) return { failure: "too many watches" }
    let cluster = this.clusters.get(clusterId)
    if (cluster === undefined) {
      if (this.clusters.size >= this.caps.maxClusters) return { failure: "too many clusters" }
      cluster = { affiliates: new Map(), watchers: new Set(), revision: 0 }
      this.clusters.set(clusterId, cluster)
    }
    return { snapshot: { _tag: "Snapshot", revision: cluster.revision, affiliates: sortedViews(cluster) } }
  }

  attach(watcher: ModelWatcher): void {
    this.clusters.get(watcher.clusterId)!.watchers.add(watcher)
    this.watchers.push(watcher)
  }

  close(watcher: ModelWatcher): void {
    if (watcher.status === "ended") return
    watcher.status = "ended"
    // interrupted by its client: nothing more to expect, even if it had lost an update
    watcher.failure = undefined
    const cluster = this.clusters.get(watcher.clusterId)
    if (cluster?.watchers.delete(watcher)) this.dropIfEmpty(watcher.clusterId)
  }

  /** What the readers do once every fiber has caught up. */
  afterSettle(): void {
    for (const watcher of this.watchers) {
      if (watcher.status === "reading") watcher.buffered = 0
      else if (watcher.status === "stopped" && watcher.takesOneMoreBatch && watcher.buffered > 0) {
        watcher.buffered = 0
        watcher.takesOneMoreBatch = false
      }
    }
  }

  stats(): StoreStats {
    let affiliates = 0
    let endpoints = 0
    for (const cluster of this.clusters.values()) {
      affiliates += cluster.affiliates.size
      for (const affiliate of cluster.affiliates.values()) endpoints += affiliate.endpoints.length
    }
    return { clusters: this.clusters.size, affiliates, endpoints, watches: this.openWatches }
  }
}

// ---------------------------------------------------------------------------
// Running a scenario against the real state, checking after every step

const errorOf = (exit: Exit.Exit<unknown, { readonly _tag: string; readonly message: string }>) => {
  if (Exit.isSuccess(exit)) return undefined
  const error = Exit.findErrorOption(exit)
  return error._tag === "Some"
    ? { _tag: error.value._tag, message: error.value.message }
    : { _tag: "Defect", message: Cause.pretty(exit.cause) }
}

const bulkEndpoint = (n: number) => endpoint(1000 + n)

const requestFor = (action: Extract<Action, { _tag: "Update" }>): AffiliateUpdateRequest => {
  const data = dataChoices[action.data]
  return {
    clusterId: clusterIds[action.cluster]!,
    affiliateId: affiliateIds[action.affiliate]!,
    // fresh arrays every time: equality must be by bytes
    data: data === undefined ? undefined : Uint8Array.from(data),
    endpoints: action.endpoints.map((i) => Uint8Array.from(endpointChoices[i]!)),
    ttl: Duration.millis(action.ttl)
  }
}

const invalidRequest = (action: Extract<Action, { _tag: "Invalid" }>): AffiliateUpdateRequest => {
  const base = {
    clusterId: clusterIds[action.cluster]!,
    affiliateId: affiliateIds[action.affiliate]!,
    data: Uint8Array.from([9]),
    endpoints: [endpoint(1)],
    ttl: Duration.seconds(1)
  }
  switch (action.kind) {
    case 0:
      return { ...base, endpoints: [endpoint(1), new Uint8Array(15)] }
    case 1:
      return { ...base, affiliateId: "\ud800" }
    case 2:
      return { ...base, ttl: Duration.minutes(31) }
    default:
      return { ...base, data: new Uint8Array(2049) }
  }
}

/** Deep equality, checked cheaply first; the assertion (with its diff) runs only on a mismatch. */
const same = (actual: unknown, expected: unknown, label: string): void => {
  if (JSON.stringify(actual) !== JSON.stringify(expected)) assert.deepStrictEqual(actual, expected, label)
}

/** Applies events to a map of affiliates, as a client would. */
const replay = (map: Map<string, PlainAffiliate>, event: PlainEvent): void => {
  if (event._tag === "Snapshot") {
    map.clear()
    for (const affiliate of event.affiliates) map.set(affiliate.id, affiliate)
  } else if (event._tag === "Updated") map.set(event.affiliate.id, event.affiliate)
  else map.delete(event.affiliateId)
}

const sortById = (affiliates: Iterable<PlainAffiliate>): Array<PlainAffiliate> =>
  [...affiliates].sort((a, b) => (a.id < b.id ? -1 : 1))

const checkAll = (state: State, model: Model, step: string) =>
  Effect.gen(function* () {
    model.afterSettle()
    const stats = yield* state.stats
    // (iii) the model and the state agree
    same(stats, model.stats(), `stats after ${step}`)
    // (iv) limits and caps hold
    assert.isAtMost(stats.clusters, model.caps.maxClusters)
    assert.isAtMost(stats.watches, model.caps.maxWatches)
    const lists = new Map<string, Array<PlainAffiliate>>()
    for (const clusterId of clusterIds) {
      const listed = yield* state.list({ clusterId })
      assert.isAtMost(listed.length, maxAffiliates)
      for (const affiliate of listed) assert.isAtMost(affiliate.endpoints.length, maxEndpoints)
      const plain = plainList(listed)
      same(plain, sortedViews(model.clusters.get(clusterId)), `list ${clusterId} after ${step}`)
      lists.set(clusterId, plain)
    }
    // listing does not create clusters
    assert.strictEqual((yield* state.stats).clusters, stats.clusters)

    for (const [index, watcher] of model.watchers.entries()) {
      if (watcher.done) continue
      const label = `watcher ${index} on ${watcher.clusterId} (${watcher.status}) after ${step}`
      const events = watcher.recorder.events
      assert.isAtMost(events.length, watcher.expected.length, label)
      // what arrived since the last check is exactly what the model expects next
      for (let i = watcher.checked; i < events.length; i++) {
        const event = plainEvent(events[i]!)
        same(event, watcher.expected[i], `event ${i} of ${label}`)
        // (ii) a snapshot, then revisions +1, +2, … with no gap and no duplicate
        if (i === 0) assert.strictEqual(event._tag, "Snapshot", label)
        else {
          assert.notStrictEqual(event._tag, "Snapshot", label)
          assert.strictEqual(event.revision, watcher.firstRevision + i, label)
        }
        if (i === 0) watcher.firstRevision = event.revision
        replay(watcher.replayed, event)
      }
      watcher.checked = events.length
      switch (watcher.status) {
        case "reading":
          // (i) everything arrived, and replaying it gives the cluster's current list
          assert.strictEqual(events.length, watcher.expected.length, label)
          same(sortById(watcher.replayed.values()), lists.get(watcher.clusterId), label)
          assert.isUndefined(watcher.recorder.exit, label)
          break
        case "stopped":
        case "cut":
          assert.isUndefined(watcher.recorder.exit, label)
          break
        case "ended":
          if (watcher.failure !== undefined) {
            // a watcher that lost an update got everything up to the loss, then the failure
            assert.strictEqual(events.length, watcher.expected.length, label)
            const exit = watcher.recorder.exit
            assert.isDefined(exit, label)
            same(errorOf(exit!), watcher.failure, label)
          }
          watcher.done = true
          break
      }
    }
  })

const runScenario = (actions: ReadonlyArray<Action>, caps: StoreCaps) =>
  Effect.gen(function* () {
    const state = yield* ClusterState
    const model = new Model(caps)
    /** The n-th (modulo) watcher among those in one of the given states. */
    const pick = (n: number, ...statuses: ReadonlyArray<ModelWatcher["status"]>): ModelWatcher | undefined => {
      const candidates = model.watchers.filter((w) => statuses.includes(w.status))
      return candidates.length === 0 ? undefined : candidates[n % candidates.length]
    }

    for (const [index, action] of actions.entries()) {
      const step = `step ${index} ${JSON.stringify(action)}`
      model.published = new Map()
      const readBefore = new Map<ModelWatcher, number>()
      for (const w of model.watchers) if (w.status === "reading") readBefore.set(w, w.recorder.events.length)
      switch (action._tag) {
        case "Update": {
          const request = requestFor(action)
          const exit = yield* Effect.exit(state.update(request))
          const expected = model.update(
            request.clusterId,
            request.affiliateId,
            request.data,
            request.endpoints,
            action.ttl
          )
          assert.deepStrictEqual(errorOf(exit)?.message, expected, step)
          break
        }
        case "Bulk": {
          const request: AffiliateUpdateRequest = {
            clusterId: clusterIds[action.cluster]!,
            affiliateId: affiliateIds[action.affiliate]!,
            endpoints: Array.from({ length: action.count }, (_, i) => bulkEndpoint(action.start + i)),
            ttl: Duration.millis(action.ttl)
          }
          const exit = yield* Effect.exit(state.update(request))
          const expected = model.update(
            request.clusterId,
            request.affiliateId,
            undefined,
            request.endpoints,
            action.ttl
          )
          assert.deepStrictEqual(errorOf(exit)?.message, expected, step)
          if (expected !== undefined) assert.strictEqual(errorOf(exit)?._tag, "ResourceExhausted", step)
          break
        }
        case "Invalid": {
          const exit = yield* Effect.exit(state.update(invalidRequest(action)))
          assert.strictEqual(errorOf(exit)?._tag, "InvalidArgument", step)
          break
        }
        case "Delete": {
          yield* state.delete({ clusterId: clusterIds[action.cluster]!, affiliateId: affiliateIds[action.affiliate]! })
          model.delete(clusterIds[action.cluster]!, affiliateIds[action.affiliate]!)
          break
        }
        case "Advance": {
          yield* TestClock.adjust(Duration.millis(action.millis))
          model.now += action.millis
          break
        }
        case "Gc": {
          const report = yield* TestDiscovery.runGc
          assert.deepStrictEqual(report, model.gc(), step)
          break
        }
        case "Flood": {
          // many visible changes in a row, preferably where a watcher stopped reading, to overflow it
          const stopped = pick(action.cluster, "stopped")
          const clusterId = stopped?.clusterId ?? clusterIds[action.cluster]!
          const affiliateId = affiliateIds[action.affiliate]!
          for (let i = 0; i < action.times; i++) {
            const request: AffiliateUpdateRequest = {
              clusterId,
              affiliateId,
              data: Uint8Array.from([100, i]),
              endpoints: [],
              ttl: Duration.seconds(2)
            }
            const exit = yield* Effect.exit(state.update(request))
            assert.deepStrictEqual(errorOf(exit)?.message, model.update(clusterId, affiliateId, request.data, [], 2000))
            if (i % 8 === 7) {
              yield* settle
              model.afterSettle()
            }
          }
          break
        }
        case "Open": {
          const clusterId = clusterIds[action.cluster]!
          const outcome = model.open(clusterId)
          const gate = yield* Latch.make(true)
          const recorder = yield* record(state, clusterId, gate.await)
          const watcher: ModelWatcher = {
            clusterId,
            status: "reading",
            buffered: 0,
            takesOneMoreBatch: false,
            expected: [],
            failure: undefined,
            recorder,
            gate,
            checked: 0,
            firstRevision: 0,
            replayed: new Map(),
            done: false
          }
          if ("failure" in outcome) {
            assert.deepStrictEqual(
              errorOf(recorder.exit!),
              { _tag: "ResourceExhausted", message: outcome.failure },
              step
            )
            assert.deepStrictEqual(recorder.events, [], step)
          } else {
            watcher.expected.push(outcome.snapshot)
            model.attach(watcher)
          }
          break
        }
        case "Close": {
          const watcher = pick(action.watcher, "reading", "stopped", "cut")
          if (watcher === undefined) break
          yield* Fiber.interrupt(watcher.recorder.fiber)
          model.close(watcher)
          break
        }
        case "Stop": {
          const watcher = pick(action.watcher, "reading")
          if (watcher === undefined) break
          yield* watcher.gate.close
          watcher.status = "stopped"
          watcher.takesOneMoreBatch = true
          break
        }
        case "Resume": {
          const watcher = pick(action.watcher, "stopped", "cut")
          if (watcher === undefined) break
          yield* watcher.gate.open
          if (watcher.status === "cut") watcher.status = "ended"
          else watcher.status = "reading"
          watcher.buffered = 0
          break
        }
      }
      yield* settle
      yield* checkAll(state, model, step)
      // (v) a watcher that kept reading got one event per change this step made to its cluster, so none for
      // an update nobody can see (same data bytes, no new endpoint)
      for (const [w, before] of readBefore) {
        if (w.status !== "reading") continue
        assert.strictEqual(w.recorder.events.length - before, model.published.get(w.clusterId) ?? 0, step)
      }
    }
    return model
  })

/** Runs one generated case on a fresh core and TestClock; assertion failures reject. */
const runCase = async (actions: ReadonlyArray<Action>, caps: Partial<StoreCaps> = {}): Promise<Model> => {
  const full: StoreCaps = { maxClusters: 1_000_000, maxWatches: 100_000, ...caps }
  const exit = await Effect.runPromiseExit(
    runScenario(actions, full).pipe(Effect.provide(TestDiscovery.layer({ caps })), Effect.provide(TestClock.layer()))
  )
  if (Exit.isFailure(exit)) throw Cause.squash(exit.cause)
  return exit.value
}

const actionsArb = fc.array(actionArb, { minLength: 1, maxLength: 60, size: "max" })

describe("ClusterState properties", () => {
  it("keeps watchers, List and a reference model in agreement over random interleavings", { timeout: 60_000 }, () =>
    fc.assert(
      fc.asyncProperty(actionsArb, async (actions) => {
        await runCase(actions)
      }),
      { numRuns: 120, seed: 0x5eed, timeout: 2000 }
    )
  )

  it("never exceeds small caps on clusters and watches, and refusals change nothing", { timeout: 60_000 }, () =>
    fc.assert(
      fc.asyncProperty(actionsArb, async (actions) => {
        await runCase(actions, { maxClusters: 2, maxWatches: 3 })
      }),
      { numRuns: 120, seed: 0xca95, timeout: 2000 }
    )
  )

  it("cuts off a stopped watcher after more than 32 unread events while another keeps reading", async () => {
    const model = await runCase([
      { _tag: "Open", cluster: 0 },
      { _tag: "Open", cluster: 0 },
      { _tag: "Stop", watcher: 1 },
      // the stopped reader takes the first batch of 8, then 32 fill its buffer and the 41st cuts it off
      { _tag: "Flood", cluster: 0, affiliate: 0, times: 45 },
      { _tag: "Gc" },
      { _tag: "Resume", watcher: 0 },
      { _tag: "Advance", millis: 2000 },
      { _tag: "Gc" },
      { _tag: "Advance", millis: 1 },
      { _tag: "Gc" },
      { _tag: "Close", watcher: 0 }
    ])
    const [live, stopped] = model.watchers
    assert.deepStrictEqual(stopped!.failure, {
      _tag: "SubscriptionLost",
      message: "subscription canceled: lost update"
    })
    assert.strictEqual(stopped!.recorder.events.length, 1 + 8 + 32)
    assert.strictEqual(live!.recorder.events.length, 1 + 45 + 1)
    assert.deepStrictEqual(model.stats(), { clusters: 0, affiliates: 0, endpoints: 0, watches: 0 })
  })
})
