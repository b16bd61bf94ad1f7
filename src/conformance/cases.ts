/**
 * The conformance cases: the behaviours of PROTOCOL.md, written once over the
 * `ClusterApi` port and run against every implementation (in process, our
 * gRPC server over loopback, I/O threads, Redis, the original Go service, or
 * any server the `conformance` command is pointed at). Case names carry the
 * PROTOCOL.md test IDs (§6) or section they check. Cases for our deliberate
 * improvements over the original end in "(improvement: Qn)" and run only
 * against our server; a case whose target lacks a capability is given with
 * the reasons it cannot run.
 *
 * The cases are plain values (`ConformanceCase`): the contract tests register
 * them with vitest (`test/contract/clusterApiSuite.ts`), the command runs them
 * one after another (`runner.ts`). Each builds the target's layer afresh and
 * uses random cluster IDs, so cases never interfere, even on a shared remote
 * server.
 *
 * @since 0.1.0
 */
import type { Layer } from "effect"
import { Duration, Effect, Exit, Fiber, Scope } from "effect"
import type { AffiliateUpdateRequest, AffiliateView, WatchEvent } from "../ports/ClusterApi.ts"
import { ClusterApi } from "../ports/ClusterApi.ts"
import { lostUpdateMessage } from "../ports/DiscoveryError.ts"
import { assert } from "./check.ts"
import type { ContractTarget } from "./Target.ts"
import {
  ascii,
  deleted,
  endpoint,
  expected,
  expectFailure,
  filled,
  maxData,
  newClusterId,
  openWatch,
  realSleep,
  replay,
  settled,
  show,
  showAll,
  showEvent,
  snapshot,
  updated,
  utf8,
  type WatchCursor,
  watchFrom
} from "./fixtures.ts"

const minute = Duration.minutes(1)

/** An AffiliateUpdate with defaults: no data, no endpoints, a one-minute TTL. */
const update = (
  clusterId: string,
  affiliateId: string,
  fields: {
    readonly data?: string | Uint8Array
    readonly endpoints?: ReadonlyArray<Uint8Array>
    readonly ttl?: Duration.Duration
  } = {}
) =>
  ClusterApi.use((api) =>
    api.affiliateUpdate({
      clusterId,
      affiliateId,
      data: typeof fields.data === "string" ? utf8(fields.data) : fields.data,
      endpoints: fields.endpoints ?? [],
      ttl: fields.ttl ?? minute
    })
  )

const updateRequest = (fields: Partial<AffiliateUpdateRequest>): AffiliateUpdateRequest => ({
  clusterId: "",
  affiliateId: "",
  endpoints: [],
  ttl: Duration.zero,
  ...fields
})

const remove = (clusterId: string, affiliateId: string) =>
  ClusterApi.use((api) => api.affiliateDelete({ clusterId, affiliateId }))

const list = (clusterId: string) => ClusterApi.use((api) => Effect.map(api.list({ clusterId }), showAll))

const hex = (bytes: Uint8Array | undefined): string | undefined =>
  bytes === undefined ? undefined : Buffer.from(bytes).toString("hex")

/** Reads a watch until it fails; returns what it delivered and the failure. */
const drain = (cursor: WatchCursor) =>
  Effect.gen(function* () {
    const events: Array<WatchEvent> = []
    for (;;) {
      const result = yield* Effect.result(cursor.next)
      if (result._tag === "Failure") return { events, failure: result.failure }
      events.push(result.success)
    }
  })

const change = (i: number): AffiliateView => ({ id: "hot", data: maxData(`change-${i}`), endpoints: [] })

/**
 * One case: its group (the section of the protocol it checks), its name, why
 * it cannot run on the target (empty when it can), and what it runs, on the
 * layer it runs on.
 *
 * @category models
 * @since 0.1.0
 */
export interface ConformanceCase<R = never> {
  readonly group: string
  readonly name: string
  /** Why the case cannot run on this target; empty when it can. */
  readonly unmet: ReadonlyArray<string>
  /** True for a case of our deliberate improvements over the original (PROTOCOL.md §7). */
  readonly improvement: boolean
  /** The case's checks; it fails with the first that does not hold. */
  readonly run: () => Effect.Effect<void, unknown, ClusterApi | R | Scope.Scope>
  /** The target it runs on (built afresh for each case). */
  readonly layer: Layer.Layer<ClusterApi | R, unknown>
  /** Milliseconds the case may take, when the target says. */
  readonly timeout: number | undefined
}

/**
 * The cases for one target, in the order of the protocol's sections.
 *
 * @category constructors
 * @since 0.1.0
 */
export const contractCases = <R>(target: ContractTarget<R>): ReadonlyArray<ConformanceCase<R>> => {
  const cases: Array<ConformanceCase<R>> = []
  let currentGroup = ""
  const group = (name: string, register: () => void): void => {
    currentGroup = name
    register()
  }
  const unmet = {
    ours: target.ours ? undefined : "not our server",
    time: target.time ? undefined : "no time control",
    clusterCount: target.clusterCount ? undefined : "cannot count clusters",
    caps: target.caps ? undefined : "no small-caps variant",
    slowWatcher: target.slowWatcher ? undefined : "no slow-watcher bound",
    exactBuffer: target.slowWatcher?.exact ? undefined : "transport buffers hide the exact 32-event bound",
    rawStrings: target.rawStrings ? undefined : "strings cross a UTF-8 wire",
    extensions: target.ours ? undefined : "the server announces no extensions (resumable watches)",
    stop: target.stop ? undefined : "the kit cannot stop this server (--stop-command)",
    realTime: target.realTimeExpiry
      ? undefined
      : "real-time expiry not asked for (it needs the server's GC interval: --expiry-within)"
  }
  type Need = keyof typeof unmet

  const test = (
    name: string,
    needs: ReadonlyArray<Need>,
    body: () => Effect.Effect<void, unknown, ClusterApi | R | Scope.Scope>,
    layer = target.layer
  ): void => {
    cases.push({
      group: currentGroup,
      name,
      unmet: needs.flatMap((need) => unmet[need] ?? []),
      improvement: name.includes("(improvement:"),
      run: body,
      layer,
      timeout: target.timeout
    })
  }

  /** Only called by cases that declare the need, so the capability is present. */
  const time = () => target.time!
  const clusterCount = () => target.clusterCount!
  const advanceAndCollect = (duration: Duration.Input) => Effect.andThen(time().advance(duration), time().runGc)

  group("Hello", () => {
    test("T48 hello rejects an empty or over-long cluster ID with InvalidArgument", [], () =>
      Effect.gen(function* () {
        const api = yield* ClusterApi
        const hello = (clusterId: string) => api.hello({ clusterId, clientVersion: "v1.8.3" })
        yield* expectFailure(hello(""), "InvalidArgument", "cluster ID can't be empty")
        yield* expectFailure(hello(ascii(1024)), "InvalidArgument", "cluster ID is too long")
        yield* expectFailure(hello(ascii(257)), "InvalidArgument", "cluster ID is too long")
        // 86 three-byte characters: 258 bytes, though only 86 UTF-16 units.
        yield* expectFailure(hello("€".repeat(86)), "InvalidArgument", "cluster ID is too long")
      })
    )

    test("hello accepts a 256-byte cluster ID and any client version (§2.3)", [], () =>
      Effect.gen(function* () {
        const api = yield* ClusterApi
        for (const clientVersion of ["v1.8.3", "", "not a version"]) {
          yield* api.hello({ clusterId: ascii(256), clientVersion })
        }
        yield* api.hello({ clusterId: "€".repeat(85), clientVersion: "v1.8.3" })
      })
    )

    const ip = target.clientIp
    test(`T40 T47 hello reports the client address (${ip._tag})`, [], () =>
      Effect.gen(function* () {
        const api = yield* ClusterApi
        const hello = (clientAddress?: Uint8Array) =>
          Effect.map(
            api.hello({ clusterId: newClusterId(), clientVersion: "v1.8.3", clientAddress }),
            (response) => response.clientIp
          )
        const v4 = Uint8Array.of(1, 2, 3, 4)
        const v6 = Uint8Array.of(0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)
        switch (ip._tag) {
          case "Peer":
            assert.strictEqual(hex(yield* hello()), hex(ip.bytes))
            assert.strictEqual(hex(yield* hello(v4)), hex(ip.bytes), "a request's own address is ignored")
            break
          case "FromRequest":
            assert.strictEqual(yield* hello(), undefined)
            assert.strictEqual(hex(yield* hello(v4)), "01020304")
            assert.strictEqual(hex(yield* hello(v6)), hex(v6))
            break
          case "Off":
            for (const reported of [yield* hello(), yield* hello(v4)]) {
              assert.isTrue(reported === undefined || reported.length === 0, `reported ${hex(reported)}`)
            }
            break
          case "Any": {
            const reported = yield* hello()
            assert.isTrue(
              reported !== undefined && (reported.length === 4 || reported.length >= 16),
              `reported ${hex(reported)}`
            )
            break
          }
        }
      })
    )

    const redirect = target.redirectEndpoint
    test(
      redirect === undefined
        ? "T40 hello carries no redirect when none is configured"
        : "T56 hello carries the configured redirect endpoint",
      [],
      () =>
        Effect.gen(function* () {
          const api = yield* ClusterApi
          const response = yield* api.hello({ clusterId: newClusterId(), clientVersion: "v1.8.3" })
          assert.strictEqual(response.redirect, redirect)
        })
    )

    test("hello creates no cluster (§2.4, §2.11)", ["clusterCount"], () =>
      Effect.gen(function* () {
        const api = yield* ClusterApi
        const before = yield* clusterCount()
        const clusterId = newClusterId()
        yield* api.hello({ clusterId, clientVersion: "v1.8.3" })
        assert.strictEqual(yield* clusterCount(), before)
        assert.deepStrictEqual(yield* list(clusterId), [])
      })
    )
  })

  group("AffiliateUpdate, AffiliateDelete and List", () => {
    test("T11 list of an unknown cluster is empty", [], () =>
      Effect.gen(function* () {
        assert.deepStrictEqual(yield* list(newClusterId()), [])
      })
    )

    test("T12 T43 update then list gives the affiliate with its data and endpoints in order", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        yield* update(c, "af1", { data: "data1", endpoints: [endpoint(1), endpoint(2)] })
        assert.deepStrictEqual(yield* list(c), [expected("af1", "data1", [endpoint(1), endpoint(2)])])
      })
    )

    test("T44 an update without data keeps the data and appends only new endpoints, in order", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        yield* update(c, "af1", { data: "data1", endpoints: [endpoint(1), endpoint(2)] })
        yield* update(c, "af1", { endpoints: [endpoint(3), endpoint(2)] })
        assert.deepStrictEqual(yield* list(c), [expected("af1", "data1", [endpoint(1), endpoint(2), endpoint(3)])])
        // Empty data leaves the data alone; a blob repeated in one request is stored once.
        yield* update(c, "af1", { data: new Uint8Array(0), endpoints: [endpoint(4), endpoint(4)] })
        assert.deepStrictEqual(yield* list(c), [
          expected("af1", "data1", [endpoint(1), endpoint(2), endpoint(3), endpoint(4)])
        ])
        yield* update(c, "af1", { data: "data2" })
        assert.deepStrictEqual(yield* list(c), [
          expected("af1", "data2", [endpoint(1), endpoint(2), endpoint(3), endpoint(4)])
        ])
      })
    )

    test("an endpoint-only update creates an affiliate with empty data (§2.5)", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        yield* update(c, "af1", { endpoints: [endpoint(1)], ttl: minute })
        assert.deepStrictEqual(yield* list(c), [expected("af1", "", [endpoint(1)])])
        if (target.time) {
          // The affiliate itself lives as long as the TTL of the update that created it.
          yield* advanceAndCollect("59 seconds")
          assert.deepStrictEqual(yield* list(c), [expected("af1", "", [endpoint(1)])])
          yield* advanceAndCollect("2 seconds")
          assert.deepStrictEqual(yield* list(c), [])
        }
      })
    )

    test("T15 list holds every affiliate of its cluster and none of another", [], () =>
      Effect.gen(function* () {
        const c1 = newClusterId()
        const c2 = newClusterId()
        yield* update(c1, "af1", { data: "data1" })
        yield* update(c1, "af2", { data: "data2", endpoints: [endpoint(2)] })
        yield* update(c2, "af1", { data: "other" })
        assert.deepStrictEqual(yield* list(c1), [expected("af1", "data1"), expected("af2", "data2", [endpoint(2)])])
        assert.deepStrictEqual(yield* list(c2), [expected("af1", "other")])
      })
    )

    test(
      "T45 deleting a missing affiliate succeeds; an update without ttl then a delete leaves an empty list",
      [],
      () =>
        Effect.gen(function* () {
          const c = newClusterId()
          yield* remove(c, "missing")
          yield* update(c, "af1", { data: "data1", ttl: Duration.zero })
          if (target.time) {
            // The clock stands still, so the entry expires "now" and no GC has run: it is listed (§2.7).
            assert.deepStrictEqual(yield* list(c), [expected("af1", "data1")])
          }
          yield* remove(c, "af1")
          assert.deepStrictEqual(yield* list(c), [])
          yield* remove(c, "af1")
        })
    )

    test("T16 delete removes the affiliate together with its endpoints", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        yield* update(c, "af1", { data: "data1", endpoints: [endpoint(1)] })
        yield* update(c, "af2", { data: "data2" })
        yield* remove(c, "af1")
        assert.deepStrictEqual(yield* list(c), [expected("af2", "data2")])
        yield* update(c, "af1", { data: "again" })
        assert.deepStrictEqual(yield* list(c), [expected("af1", "again"), expected("af2", "data2")])
      })
    )
  })

  group("validation", () => {
    test("T49 update rejects invalid fields with InvalidArgument and the original's messages", [], () =>
      Effect.gen(function* () {
        const api = yield* ClusterApi
        const c = newClusterId()
        const cases: ReadonlyArray<readonly [Partial<AffiliateUpdateRequest>, string]> = [
          [{}, "cluster ID can't be empty"],
          [{ clusterId: ascii(257), affiliateId: "af1" }, "cluster ID is too long"],
          [{ clusterId: ascii(1024), affiliateId: "af1" }, "cluster ID is too long"],
          [{ clusterId: c }, "affiliate ID can't be empty"],
          [{ clusterId: c, affiliateId: ascii(257) }, "affiliate ID is too long"],
          [{ clusterId: c, affiliateId: "é".repeat(129) }, "affiliate ID is too long"],
          [{ clusterId: c, affiliateId: "af1", data: filled(2049) }, "affiliate data is too big"],
          [{ clusterId: c, affiliateId: "af1", endpoints: [filled(33)] }, "affiliate endpoint is too big"],
          [{ clusterId: c, affiliateId: "af1", endpoints: [endpoint(1), filled(33)] }, "affiliate endpoint is too big"],
          [
            { clusterId: c, affiliateId: "af1", ttl: Duration.sum(Duration.minutes(30), Duration.seconds(1)) },
            "ttl is too large"
          ],
          [
            { clusterId: c, affiliateId: "af1", ttl: Duration.sum(Duration.minutes(30), Duration.nanos(1n)) },
            "ttl is too large"
          ],
          [{ clusterId: c, affiliateId: "af1", ttl: Duration.hours(24) }, "ttl is too large"]
        ]
        for (const [fields, message] of cases) {
          yield* expectFailure(api.affiliateUpdate(updateRequest(fields)), "InvalidArgument", message)
        }
        assert.deepStrictEqual(yield* list(c), [], "a rejected update stores nothing")
      })
    )

    test("T49 update checks cluster ID, affiliate ID, data, endpoints, then ttl, the first failure winning", [], () =>
      Effect.gen(function* () {
        const api = yield* ClusterApi
        const c = newClusterId()
        const allBad = {
          clusterId: ascii(257),
          affiliateId: ascii(257),
          data: filled(2049),
          endpoints: [filled(33)],
          ttl: Duration.hours(1)
        }
        const cases: ReadonlyArray<readonly [Partial<AffiliateUpdateRequest>, string]> = [
          [allBad, "cluster ID is too long"],
          [{ ...allBad, clusterId: c }, "affiliate ID is too long"],
          [{ ...allBad, clusterId: c, affiliateId: "" }, "affiliate ID can't be empty"],
          [{ ...allBad, clusterId: c, affiliateId: "af1" }, "affiliate data is too big"],
          [{ ...allBad, clusterId: c, affiliateId: "af1", data: filled(10) }, "affiliate endpoint is too big"],
          [{ ...allBad, clusterId: c, affiliateId: "af1", data: filled(10), endpoints: [] }, "ttl is too large"]
        ]
        for (const [fields, message] of cases) {
          yield* expectFailure(api.affiliateUpdate(updateRequest(fields)), "InvalidArgument", message)
        }
      })
    )

    test("T49 update accepts every field at its limit, counting UTF-8 bytes", [], () =>
      Effect.gen(function* () {
        const api = yield* ClusterApi
        const c = ascii(250) + newClusterId().slice(-6)
        assert.strictEqual(c.length, 256)
        const data = filled(2048, 0x64)
        const endpoints = [endpoint(1), filled(32, 0x65)]
        yield* api.affiliateUpdate({
          clusterId: c,
          affiliateId: ascii(256),
          data,
          endpoints,
          ttl: Duration.minutes(30)
        })
        yield* api.affiliateUpdate({ clusterId: c, affiliateId: "é".repeat(128), endpoints: [], ttl: minute })
        assert.deepStrictEqual(yield* list(c), [show({ id: ascii(256), data, endpoints }), expected("é".repeat(128))])
        const multiByteCluster = "€".repeat(84) + newClusterId().slice(-4)
        yield* update(multiByteCluster, "af1", { data: "data1" })
        assert.deepStrictEqual(yield* list(multiByteCluster), [expected("af1", "data1")])
      })
    )

    test("T52 delete rejects invalid IDs with InvalidArgument", [], () =>
      Effect.gen(function* () {
        const api = yield* ClusterApi
        const c = newClusterId()
        const del = (clusterId: string, affiliateId: string) => api.affiliateDelete({ clusterId, affiliateId })
        yield* expectFailure(del("", ""), "InvalidArgument", "cluster ID can't be empty")
        yield* expectFailure(del(ascii(1024), "af1"), "InvalidArgument", "cluster ID is too long")
        yield* expectFailure(del(c, ""), "InvalidArgument", "affiliate ID can't be empty")
        yield* expectFailure(del(c, ascii(1024)), "InvalidArgument", "affiliate ID is too long")
        yield* del(ascii(256), ascii(256))
      })
    )

    test("T53 list rejects an empty or over-long cluster ID with InvalidArgument", [], () =>
      Effect.gen(function* () {
        const api = yield* ClusterApi
        yield* expectFailure(api.list({ clusterId: "" }), "InvalidArgument", "cluster ID can't be empty")
        yield* expectFailure(api.list({ clusterId: ascii(1024) }), "InvalidArgument", "cluster ID is too long")
        assert.deepStrictEqual(yield* list(ascii(256)), [])
      })
    )

    test("T54 watch with an invalid cluster ID fails on its first read with InvalidArgument", [], () =>
      Effect.gen(function* () {
        const empty = yield* openWatch("")
        yield* expectFailure(empty.next, "InvalidArgument", "cluster ID can't be empty")
        const long = yield* openWatch(ascii(1024))
        yield* expectFailure(long.next, "InvalidArgument", "cluster ID is too long")
      })
    )
  })

  group("limits", () => {
    test("T22 T50 a cluster takes 1024 affiliates and rejects the 1025th with ResourceExhausted", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        // A rate-limited server takes over a minute for these calls: a TTL that outlives them keeps GC out.
        const ttl = Duration.minutes(30)
        for (let i = 0; i < 1024; i++) yield* update(c, `af-${i}`, { ttl })
        yield* expectFailure(update(c, "af-1024", { ttl }), "ResourceExhausted", "too many affiliates in the cluster")
        // An affiliate already in the full cluster still takes updates.
        yield* update(c, "af-7", { data: "data7" })
        const all = yield* list(c)
        assert.strictEqual(all.length, 1024)
        assert.isFalse(
          all.some((affiliate) => affiliate.id === "af-1024"),
          "the rejected affiliate is not stored"
        )
        assert.deepStrictEqual(
          all.find((affiliate) => affiliate.id === "af-7"),
          expected("af-7", "data7")
        )
      })
    )

    test("T10 T51 an affiliate takes 64 distinct endpoints and rejects a 65th with ResourceExhausted", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        const blobs = Array.from({ length: 64 }, (_, i) => endpoint(i))
        for (const blob of blobs) yield* update(c, "af1", { endpoints: [blob] })
        yield* expectFailure(
          update(c, "af1", { endpoints: [endpoint(64)] }),
          "ResourceExhausted",
          "too many endpoints in the affiliate"
        )
        // A known endpoint is not a new one: it is still accepted.
        yield* update(c, "af1", { endpoints: [endpoint(5)] })
        assert.deepStrictEqual(yield* list(c), [expected("af1", "", blobs)])
      })
    )
  })

  group("Watch", () => {
    test("T46 a watch sends the snapshot, then each update and delete with exact content", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        yield* update(c, "af1", { data: "data1" })
        const watch = yield* watchFrom(c, snapshot(expected("af1", "data1")))
        yield* update(c, "af2", { data: "data2" })
        yield* watch.expect(updated(expected("af2", "data2")))
        yield* remove(c, "af1")
        yield* watch.expect(deleted("af1"))
      })
    )

    test("a watch of an empty cluster starts with an empty snapshot (§2.8)", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        const watch = yield* watchFrom(c, snapshot())
        yield* update(c, "af1", { endpoints: [endpoint(1)] })
        yield* watch.expect(updated(expected("af1", "", [endpoint(1)])))
      })
    )

    test("T13 T14 T16 an update carries the affiliate's full state and a delete only its ID", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        yield* update(c, "af1", { data: "data1", endpoints: [endpoint(1)] })
        const watch = yield* watchFrom(c, snapshot(expected("af1", "data1", [endpoint(1)])))
        yield* update(c, "af1", { endpoints: [endpoint(2)] })
        yield* watch.expect(updated(expected("af1", "data1", [endpoint(1), endpoint(2)])))
        yield* update(c, "af1", { data: "data1b" })
        yield* watch.expect(updated(expected("af1", "data1b", [endpoint(1), endpoint(2)])))
        assert.deepStrictEqual(yield* list(c), [expected("af1", "data1b", [endpoint(1), endpoint(2)])])
        yield* remove(c, "af1")
        yield* watch.expect(deleted("af1"))
        assert.deepStrictEqual(yield* list(c), [])
      })
    )

    test("T21 every watcher receives the same changes in mutation order", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        const watchers: Array<WatchCursor> = []
        for (let i = 0; i < 5; i++) watchers.push(yield* watchFrom(c, snapshot()))
        yield* update(c, "af1", { data: "data1" })
        yield* update(c, "af2", { data: "data2" })
        yield* update(c, "af2", { data: "data2_1" })
        yield* remove(c, "af2")
        for (const watch of watchers) {
          yield* watch.expect(updated(expected("af1", "data1")))
          yield* watch.expect(updated(expected("af2", "data2")))
          yield* watch.expect(updated(expected("af2", "data2_1")))
          yield* watch.expect(deleted("af2"))
        }
      })
    )

    test("a watch replays to the current list (snapshot plus changes)", [], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        for (let i = 0; i < 20; i++) yield* update(c, `af-${i}`, { data: `data-${i}`, endpoints: [endpoint(i)] })
        const watch = yield* openWatch(c)
        const events: Array<WatchEvent> = [yield* watch.next]
        // A transport may split a snapshot into a Snapshot and Updated events: replay, do not count.
        yield* update(c, "af-3", { data: "changed" })
        yield* remove(c, "af-4")
        yield* update(c, "marker", { data: "last" })
        const isMarker = (event: WatchEvent | undefined) => event?._tag === "Updated" && event.affiliate.id === "marker"
        while (!isMarker(events.at(-1))) events.push(yield* watch.next)
        assert.deepStrictEqual(replay(events), yield* list(c))
      })
    )

    test(
      "refreshing only known endpoints, deleting a missing affiliate and a rejected update publish nothing (§2.9)",
      [],
      () =>
        Effect.gen(function* () {
          const c = newClusterId()
          yield* update(c, "af1", { data: "data1", endpoints: [endpoint(1), endpoint(2)] })
          const watch = yield* watchFrom(c, snapshot(expected("af1", "data1", [endpoint(1), endpoint(2)])))
          yield* update(c, "af1", { endpoints: [endpoint(2), endpoint(1)] })
          yield* remove(c, "missing")
          yield* expectFailure(update(c, "af1", { data: filled(2049) }), "InvalidArgument", "affiliate data is too big")
          yield* update(c, "af2", { data: "data2" })
          yield* watch.expect(updated(expected("af2", "data2")))
        })
    )

    test("watches of different clusters are independent", [], () =>
      Effect.gen(function* () {
        const c1 = newClusterId()
        const c2 = newClusterId()
        const watch = yield* watchFrom(c1, snapshot())
        yield* update(c2, "af1", { data: "elsewhere" })
        yield* remove(c2, "af1")
        yield* update(c1, "af1", { data: "here" })
        yield* watch.expect(updated(expected("af1", "here")))
      })
    )
  })

  group("expiry", () => {
    test("T17 T18 an affiliate is listed until gc runs after its ttl, then its watcher sees it deleted", ["time"], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        const watch = yield* watchFrom(c, snapshot())
        yield* update(c, "af1", { data: "data1", ttl: minute })
        yield* watch.expect(updated(expected("af1", "data1")))
        yield* advanceAndCollect("59 seconds")
        assert.deepStrictEqual(yield* list(c), [expected("af1", "data1")])
        yield* time().advance("2 seconds")
        assert.deepStrictEqual(yield* list(c), [expected("af1", "data1")], "expired but not collected (§2.7)")
        yield* time().runGc
        assert.deepStrictEqual(yield* list(c), [])
        yield* watch.expect(deleted("af1"))
        // T19: the watch is still alive after GC.
        yield* update(c, "af2", { data: "data2" })
        yield* watch.expect(updated(expected("af2", "data2")))
      })
    )

    test(
      "T8 T9 gc drops endpoints whose expiry is at or before now, and an affiliate only once its expiry has passed (§2.12)",
      ["time"],
      () =>
        Effect.gen(function* () {
          const c = newClusterId()
          yield* update(c, "af1", { data: "data1", ttl: Duration.minutes(2) })
          yield* update(c, "af1", { endpoints: [endpoint(1)], ttl: Duration.seconds(60) })
          yield* update(c, "af1", { endpoints: [endpoint(2)], ttl: Duration.seconds(90) })
          yield* advanceAndCollect("59999 millis")
          assert.deepStrictEqual(yield* list(c), [expected("af1", "data1", [endpoint(1), endpoint(2)])])
          yield* advanceAndCollect("1 milli")
          assert.deepStrictEqual(yield* list(c), [expected("af1", "data1", [endpoint(2)])])
          yield* advanceAndCollect("30 seconds")
          assert.deepStrictEqual(yield* list(c), [expected("af1", "data1")])
          yield* advanceAndCollect("30 seconds")
          assert.deepStrictEqual(yield* list(c), [expected("af1", "data1")], "kept while its expiry equals now")
          yield* advanceAndCollect("1 milli")
          assert.deepStrictEqual(yield* list(c), [])
        })
    )

    test("T24 T25 T26 gc removes an expired affiliate and then its empty cluster", ["time", "clusterCount"], () =>
      Effect.gen(function* () {
        const before = yield* clusterCount()
        const c = newClusterId()
        yield* update(c, "af1", { data: "data1", ttl: minute })
        assert.strictEqual(yield* clusterCount(), before + 1)
        yield* time().runGc
        assert.strictEqual(yield* clusterCount(), before + 1, "nothing has expired yet")
        yield* advanceAndCollect("2 minutes")
        assert.deepStrictEqual(yield* list(c), [])
        yield* time().runGc
        assert.strictEqual(yield* clusterCount(), before)
      })
    )

    test(
      "T18 T20 a watched cluster outlives its last affiliate and goes once the watch is closed",
      ["time", "clusterCount"],
      () =>
        Effect.gen(function* () {
          const before = yield* clusterCount()
          const c = newClusterId()
          const scope = yield* Scope.make()
          const watch = yield* watchFrom(c, snapshot()).pipe(Scope.provide(scope))
          yield* update(c, "af1", { data: "data1", ttl: minute })
          yield* watch.expect(updated(expected("af1", "data1")))
          yield* advanceAndCollect("2 minutes")
          yield* watch.expect(deleted("af1"))
          assert.strictEqual(yield* clusterCount(), before + 1, "kept alive by its watcher")
          yield* Scope.close(scope, Exit.void)
          const after = yield* settled(Effect.andThen(time().runGc, clusterCount()), (count) => count === before)
          assert.strictEqual(after, before)
        })
    )
  })

  group("improvements over the original", () => {
    test("gc publishes the remaining endpoints when only some expire (improvement: Q1)", ["ours", "time"], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        const watch = yield* watchFrom(c, snapshot())
        yield* update(c, "af1", { data: "data1", endpoints: [endpoint(1)], ttl: Duration.minutes(2) })
        yield* watch.expect(updated(expected("af1", "data1", [endpoint(1)])))
        yield* update(c, "af1", { endpoints: [endpoint(2)], ttl: minute })
        yield* watch.expect(updated(expected("af1", "data1", [endpoint(1), endpoint(2)])))
        yield* advanceAndCollect("1 minute")
        yield* watch.expect(updated(expected("af1", "data1", [endpoint(1)])))
        assert.deepStrictEqual(yield* list(c), [expected("af1", "data1", [endpoint(1)])])
      })
    )

    test("a refresh with identical data and known endpoints publishes nothing (improvement: Q2)", ["ours"], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        const watch = yield* watchFrom(c, snapshot())
        yield* update(c, "af1", { data: "data1", endpoints: [endpoint(1)] })
        yield* watch.expect(updated(expected("af1", "data1", [endpoint(1)])))
        if (target.time) yield* time().advance("30 seconds")
        yield* update(c, "af1", { data: "data1", endpoints: [endpoint(1)] })
        yield* update(c, "af2", { data: "data2", ttl: Duration.seconds(20) })
        yield* watch.expect(updated(expected("af2", "data2")))
        if (target.time) {
          // The silent refresh still extended the TTL: at 61 s af1 (refreshed at 30 s) is alive, af2 is not.
          yield* advanceAndCollect("31 seconds")
          assert.deepStrictEqual(yield* list(c), [expected("af1", "data1", [endpoint(1)])])
          yield* watch.expect(deleted("af2"))
          yield* advanceAndCollect("30 seconds")
          yield* watch.expect(deleted("af1"))
        }
      })
    )

    test(
      "an update that would exceed 64 endpoints changes nothing and publishes nothing (improvement: Q4)",
      ["ours"],
      () =>
        Effect.gen(function* () {
          const c = newClusterId()
          const first = Array.from({ length: 63 }, (_, i) => endpoint(i))
          yield* update(c, "af1", { data: "data1", endpoints: first })
          const watch = yield* watchFrom(c, snapshot(expected("af1", "data1", first)))
          yield* expectFailure(
            update(c, "af1", { data: "data2", endpoints: [endpoint(63), endpoint(64)] }),
            "ResourceExhausted",
            "too many endpoints in the affiliate"
          )
          yield* expectFailure(
            update(c, "af2", { data: "data2", endpoints: Array.from({ length: 65 }, (_, i) => endpoint(i)) }),
            "ResourceExhausted",
            "too many endpoints in the affiliate"
          )
          assert.deepStrictEqual(yield* list(c), [expected("af1", "data1", first)])
          yield* update(c, "af3", { data: "data3" })
          yield* watch.expect(updated(expected("af3", "data3")))
          // Exactly 64 in one request is fine.
          yield* update(c, "af1", { endpoints: [endpoint(63)] })
          yield* watch.expect(updated(expected("af1", "data1", [...first, endpoint(63)])))
        })
    )

    test(
      "list, delete, a closed watch and deleting the last affiliate leave no cluster behind (improvement: Q5)",
      ["ours", "clusterCount"],
      () =>
        Effect.gen(function* () {
          const before = yield* clusterCount()
          const c = newClusterId()
          assert.deepStrictEqual(yield* list(c), [])
          yield* remove(c, "af1")
          assert.strictEqual(yield* clusterCount(), before, "list and delete create no cluster")
          const scope = yield* Scope.make()
          yield* watchFrom(c, snapshot()).pipe(Scope.provide(scope))
          assert.strictEqual(yield* clusterCount(), before + 1, "a watched cluster exists")
          yield* Scope.close(scope, Exit.void)
          assert.strictEqual(yield* settled(clusterCount(), (n) => n === before), before, "closing the watch drops it")
          yield* update(c, "af1", { data: "data1" })
          assert.strictEqual(yield* clusterCount(), before + 1)
          yield* remove(c, "af1")
          assert.strictEqual(yield* clusterCount(), before, "deleting the last affiliate drops it at once")
        })
    )

    const caps = target.caps
    test(
      "updates and watches that need a cluster beyond the cluster cap fail with ResourceExhausted (improvement: Q5)",
      ["ours", "caps"],
      () =>
        Effect.gen(function* () {
          const held = Array.from({ length: caps!.maxClusters }, () => newClusterId())
          for (const c of held) yield* update(c, "af1", { data: "data1" })
          const extra = newClusterId()
          yield* expectFailure(update(extra, "af1", { data: "data1" }), "ResourceExhausted", "too many clusters")
          const watch = yield* openWatch(extra)
          yield* expectFailure(watch.next, "ResourceExhausted", "too many clusters")
          assert.deepStrictEqual(yield* list(extra), [], "list needs no cluster")
          yield* update(held[0]!, "af2", { data: "data2" })
          yield* remove(held[0]!, "af1")
          yield* remove(held[0]!, "af2")
          yield* update(extra, "af1", { data: "data1" })
          assert.deepStrictEqual(yield* list(extra), [expected("af1", "data1")])
        }),
      caps?.layer
    )

    test(
      "watches beyond the watch cap fail with ResourceExhausted until one closes (improvement: Q5)",
      ["ours", "caps"],
      () =>
        Effect.gen(function* () {
          const c = newClusterId()
          const first = yield* Scope.make()
          yield* watchFrom(c, snapshot()).pipe(Scope.provide(first))
          for (let i = 1; i < caps!.maxWatches; i++) yield* watchFrom(c, snapshot())
          const over = yield* openWatch(c)
          yield* expectFailure(over.next, "ResourceExhausted", "too many watches")
          yield* Scope.close(first, Exit.void)
          const opened = yield* settled(
            Effect.scoped(Effect.flatMap(openWatch(c), (watch) => Effect.result(watch.next))),
            (result) => result._tag === "Success"
          )
          assert.strictEqual(opened._tag, "Success", "a closed watch frees its slot")
        }),
      caps?.layer
    )

    test("endpoint blobs that are not a positive multiple of 16 bytes are rejected (improvement: Q19)", ["ours"], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        for (const size of [0, 1, 15, 17, 31]) {
          yield* expectFailure(
            update(c, "af1", { endpoints: [endpoint(1), filled(size)] }),
            "InvalidArgument",
            "affiliate endpoint must be a positive multiple of 16 bytes"
          )
        }
        assert.deepStrictEqual(yield* list(c), [])
        yield* update(c, "af1", { endpoints: [filled(16), filled(32)] })
        assert.deepStrictEqual(yield* list(c), [expected("af1", "", [filled(16), filled(32)])])
      })
    )

    test("IDs that are not well-formed Unicode are rejected (improvement: Q20)", ["ours", "rawStrings"], () =>
      Effect.gen(function* () {
        const api = yield* ClusterApi
        const lone = "bad\uD800id"
        const c = newClusterId()
        yield* expectFailure(
          api.hello({ clusterId: lone, clientVersion: "" }),
          "InvalidArgument",
          "cluster ID is not valid UTF-8"
        )
        yield* expectFailure(list(lone), "InvalidArgument", "cluster ID is not valid UTF-8")
        yield* expectFailure(update(lone, "af1"), "InvalidArgument", "cluster ID is not valid UTF-8")
        yield* expectFailure(update(c, lone), "InvalidArgument", "affiliate ID is not valid UTF-8")
        yield* expectFailure(remove(c, lone), "InvalidArgument", "affiliate ID is not valid UTF-8")
        const watch = yield* openWatch(lone)
        yield* expectFailure(watch.next, "InvalidArgument", "cluster ID is not valid UTF-8")
      })
    )
  })

  group("expiry in real time (slower)", () => {
    const gcWithin = () => target.realTimeExpiry!.gcWithinMillis
    const ttl = Duration.seconds(2)

    test("an affiliate whose TTL passed leaves List, and its watcher sees it deleted", ["realTime"], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        yield* update(c, "short", { data: "short", ttl })
        yield* update(c, "long", { data: "long", ttl: Duration.minutes(10) })
        const watch = yield* watchFrom(c, snapshot(expected("long", "long"), expected("short", "short")))
        const listed = yield* settled(list(c), (affiliates) => affiliates.length === 1, 2000 + gcWithin() + 1000)
        assert.deepStrictEqual(listed, [expected("long", "long")])
        yield* watch.expect(deleted("short"))
      })
    )

    test("an update before its TTL passes keeps an affiliate past its first expiry", ["realTime"], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        yield* update(c, "kept", { data: "kept", ttl })
        yield* realSleep(1000)
        const longer = Duration.millis(2000 + 2 * gcWithin() + 2000)
        yield* update(c, "kept", { data: "kept", ttl: longer })
        // the first expiry and a GC pass after it are over: still there
        yield* realSleep(1000 + gcWithin() + 500)
        assert.deepStrictEqual(yield* list(c), [expected("kept", "kept")])
        const gone = yield* settled(
          list(c),
          (affiliates) => affiliates.length === 0,
          Duration.toMillis(longer) + gcWithin()
        )
        assert.deepStrictEqual(gone, [])
      })
    )
  })

  group("extensions: resumable watches", () => {
    /** The next event, which must be `tag`; gives it with its revision and epoch. */
    const nextOf = <Tag extends WatchEvent["_tag"]>(cursor: WatchCursor, tag: Tag) =>
      Effect.map(cursor.next, (event) => {
        assert.strictEqual(event._tag, tag, `expected ${tag}, came ${JSON.stringify(showEvent(event))}`)
        return event as Extract<WatchEvent, { readonly _tag: Tag }>
      })

    test("a snapshot names its epoch and revision, and each change takes the next revision", ["extensions"], () =>
      Effect.gen(function* () {
        const c = newClusterId()
        yield* update(c, "af1", { data: "one" })
        const watch = yield* openWatch(c)
        const first = yield* nextOf(watch, "Snapshot")
        assert.isTrue(typeof first.epoch === "string" && first.epoch !== "", "the snapshot names an epoch")
        yield* update(c, "af2", { data: "two" })
        yield* remove(c, "af1")
        assert.strictEqual((yield* nextOf(watch, "Updated")).revision, first.revision + 1)
        assert.strictEqual((yield* nextOf(watch, "Deleted")).revision, first.revision + 2)
      })
    )

    test(
      "a watch resumed where it left off gets exactly the changes it missed, in order, then live ones",
      ["extensions"],
      () =>
        Effect.gen(function* () {
          const c = newClusterId()
          const scope = yield* Scope.make()
          const first = yield* openWatch(c).pipe(Scope.provide(scope))
          const start = yield* nextOf(first, "Snapshot")
          yield* update(c, "af1", { data: "one" })
          const applied = yield* nextOf(first, "Updated")
          yield* Scope.close(scope, Exit.void)
          yield* update(c, "af2", { data: "two" })
          yield* remove(c, "af1")
          const resumed = yield* openWatch(c, { epoch: start.epoch!, revision: applied.revision })
          const point = yield* nextOf(resumed, "Resumed")
          assert.deepStrictEqual([point.epoch, point.revision], [start.epoch, applied.revision])
          yield* resumed.expect(updated(expected("af2", "two")))
          yield* resumed.expect(deleted("af1"))
          yield* update(c, "af3", { data: "three" })
          const live = yield* nextOf(resumed, "Updated")
          assert.strictEqual(live.revision, applied.revision + 3)
        })
    )

    test(
      "a resume point of another epoch, or beyond the cluster's revision, gets a fresh snapshot",
      ["extensions"],
      () =>
        Effect.gen(function* () {
          const c = newClusterId()
          yield* update(c, "af1", { data: "one" })
          const start = yield* nextOf(yield* openWatch(c), "Snapshot")
          for (const resume of [
            { epoch: `${start.epoch}-not`, revision: start.revision },
            { epoch: start.epoch!, revision: start.revision + 100 }
          ]) {
            const fresh = yield* openWatch(c, resume)
            const snapshotted = yield* nextOf(fresh, "Snapshot")
            assert.deepStrictEqual(showAll(snapshotted.affiliates), [expected("af1", "one")])
          }
        })
    )
  })

  group("slow watchers", () => {
    const slow = target.slowWatcher
    /** Makes change `i` and checks the reading watcher got it. */
    const changeSeenBy = (c: string, reader: WatchCursor, i: number) =>
      Effect.andThen(update(c, "hot", { data: change(i).data }), reader.expect(updated(show(change(i)))))

    test(
      "a watcher with 32 unread changes keeps its place; the 33rd cuts it off with SubscriptionLost (§2.8; ours only: Go's timing is racy)",
      ["ours", "exactBuffer"],
      () =>
        Effect.gen(function* () {
          const c = newClusterId()
          const reader = yield* watchFrom(c, snapshot())
          const patient = yield* watchFrom(c, snapshot())
          const stalled = yield* watchFrom(c, snapshot())
          for (let i = 1; i <= 32; i++) yield* changeSeenBy(c, reader, i)
          for (let i = 1; i <= 32; i++) yield* patient.expect(updated(show(change(i))))
          yield* changeSeenBy(c, reader, 33)
          yield* patient.expect(updated(show(change(33))))
          const { events, failure } = yield* drain(stalled)
          assert.deepStrictEqual(
            events.map(showEvent),
            Array.from({ length: events.length }, (_, i) => updated(show(change(i + 1)))),
            "what it got before the cut is an ordered prefix"
          )
          assert.isAtMost(events.length, 32)
          assert.deepStrictEqual(failureOf(failure), lostUpdate)
        })
    )

    test(
      "a watcher that never reads is cut off with SubscriptionLost while another keeps receiving (§2.8; ours only: Go's timing is racy)",
      ["ours", "slowWatcher"],
      () =>
        Effect.gen(function* () {
          const c = newClusterId()
          const reader = yield* watchFrom(c, snapshot())
          const stalled = yield* watchFrom(c, snapshot())
          const changes = slow!.overflowAfter
          for (let i = 1; i <= changes; i++) yield* changeSeenBy(c, reader, i)
          const { events, failure } = yield* drain(stalled)
          assert.isBelow(events.length, changes, "it missed changes")
          assert.deepStrictEqual(
            events.map(showEvent),
            Array.from({ length: events.length }, (_, i) => updated(show(change(i + 1)))),
            "what it got before the cut is an ordered prefix"
          )
          assert.deepStrictEqual(failureOf(failure), lostUpdate)
          yield* changeSeenBy(c, reader, changes + 1)
          yield* watchFrom(c, snapshot(show(change(changes + 1))))
        })
    )
  })
  // last: the server is gone after it
  group("shutdown", () => {
    test("a watch open when the server stops ends promptly, rather than holding the stop (§4.9)", ["stop"], () =>
      Effect.gen(function* () {
        const stop = target.stop!
        const c = newClusterId()
        yield* update(c, "af1", { data: "one" })
        const watch = yield* watchFrom(c, snapshot(expected("af1", "one")))
        const stopping = yield* Effect.forkScoped(stop.run)
        const ended = yield* Effect.raceFirst(
          Effect.as(drain(watch), true),
          Effect.as(realSleep(stop.withinMillis), false)
        )
        assert.isTrue(ended, `the watch was still open ${stop.withinMillis} ms after the server was told to stop`)
        yield* Fiber.join(stopping)
      })
    )
  })
  return cases
}

/** The comparable form of a watch's final failure. */
const failureOf = (failure: unknown) => {
  const { _tag, message } = failure as { readonly _tag?: unknown; readonly message?: unknown }
  return { _tag, message }
}

const lostUpdate = { _tag: "SubscriptionLost", message: lostUpdateMessage }
