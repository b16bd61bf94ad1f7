import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import type { Context } from "effect"
import { Cause, Duration, Effect, Exit, Fiber, Layer, Logger, Metric, Option, References, Scope, Stream } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { TestClock } from "effect/testing"
import * as FileSnapshotStore from "../../src/adapters/storage/FileSnapshotStore.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import { decode } from "../../src/core/server/SnapshotCodec.ts"
import type { SnapshotOptions } from "../../src/core/server/SnapshotService.ts"
import { SnapshotService } from "../../src/core/server/SnapshotService.ts"
import type { SnapshotReader, SnapshotPieces } from "../../src/ports/SnapshotStore.ts"
import {
  joinPieces,
  makeMemorySnapshotStore,
  SnapshotStore,
  SnapshotStoreError,
  snapshotPieces
} from "../../src/ports/SnapshotStore.ts"
import { now, smallSnapshot, tempDirsForTests, utf8 } from "../storage/fixtures/snapshots.ts"

const newDir = tempDirsForTests()

interface LogLine {
  readonly level: string
  readonly message: string
  readonly fields: Record<string, unknown>
}

/** A logger that keeps every line with its annotations. */
const capture = () => {
  const lines: Array<LogLine> = []
  const logger = Logger.make((options) => {
    const parts = Array.isArray(options.message) ? options.message : [options.message]
    const annotations = options.fiber.getRef(References.CurrentLogAnnotations)
    lines.push({ level: options.logLevel, message: String(parts[0]), fields: { ...annotations } })
  })
  return { lines, layer: Logger.layer([logger]) }
}

type Store = Context.Service.Shape<typeof SnapshotStore>

/** A memory store whose calls are recorded in `events` and whose save can be replaced. */
const recordingStore = (
  events: Array<string>,
  options: {
    readonly initial?: Uint8Array
    readonly save?: (store: Store, snapshot: Uint8Array | SnapshotPieces) => ReturnType<Store["save"]>
  } = {}
) =>
  Layer.effect(
    SnapshotStore,
    Effect.map(makeMemorySnapshotStore(options.initial), (store) =>
      SnapshotStore.of({
        ...store,
        read: (reader) => Effect.tap(store.read(reader), () => Effect.sync(() => events.push("load"))),
        save: (snapshot) =>
          Effect.tap(options.save ? options.save(store, snapshot) : store.save(snapshot), () =>
            Effect.sync(() => events.push("save"))
          )
      })
    )
  )

/** The lifecycle with the cluster state it runs on, over `store`. */
const lifecycle = (store: Layer.Layer<SnapshotStore>, options: SnapshotOptions = {}) =>
  SnapshotService.layer(options).pipe(Layer.provideMerge(ClusterState.layer), Layer.provide(store))

/** Builds `layer` in a new scope, returning its context and the scope. */
const open = <A, E>(layer: Layer.Layer<A, E>) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const context = yield* Layer.buildWithScope(layer, scope)
    return { context, scope }
  })

/** A 16-byte endpoint blob filled with `n`. */
const ep = (n: number): Uint8Array => new Uint8Array(16).fill(n)

const count = (events: ReadonlyArray<string>, event: string) => events.filter((e) => e === event).length

describe("SnapshotService", () => {
  it.effect("T33: saves one interval after start, then every interval, and once more on close", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const { scope } = yield* open(lifecycle(recordingStore(events), { interval: "10 minutes" }))
      assert.deepStrictEqual(events, ["load"])
      yield* TestClock.adjust("9 minutes")
      assert.strictEqual(count(events, "save"), 0)
      yield* TestClock.adjust("4 minutes")
      assert.strictEqual(count(events, "save"), 1)
      yield* TestClock.adjust("10 minutes")
      assert.strictEqual(count(events, "save"), 2)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(count(events, "save"), 3)
    })
  )

  it.effect("defaults to a 10 minute interval", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      yield* open(lifecycle(recordingStore(events)))
      yield* TestClock.adjust("599 seconds")
      assert.strictEqual(count(events, "save"), 0)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(count(events, "save"), 1)
    })
  )

  it.effect("saves only on close with a zero interval", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const { scope } = yield* open(lifecycle(recordingStore(events), { interval: Duration.zero }))
      yield* TestClock.adjust("1 day")
      assert.strictEqual(count(events, "save"), 0)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(count(events, "save"), 1)
    })
  )

  it.effect("keeps saving on schedule after a failed save, and logs the failure", () => {
    const { lines, layer } = capture()
    return Effect.gen(function* () {
      const events: Array<string> = []
      let calls = 0
      const flaky = recordingStore(events, {
        save: (store, bytes) =>
          ++calls === 1
            ? Effect.fail(new SnapshotStoreError({ operation: "save", message: "disk full" }))
            : store.save(bytes)
      })
      yield* open(lifecycle(flaky, { interval: "1 minute" }))
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(count(events, "save"), 0)
      assert.isTrue(lines.some((l) => l.level === "Error" && l.message === "failed to save state"))
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(count(events, "save"), 1)
    }).pipe(Effect.provide(layer))
  })

  it.effect("loads before a server built on it starts, and saves after that server has stopped", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      // A stand-in for the gRPC server layer: it needs the cluster state.
      const server = Layer.effectDiscard(
        Effect.gen(function* () {
          const state = yield* ClusterState
          events.push("server started")
          yield* Effect.addFinalizer(() =>
            Effect.gen(function* () {
              // A late request, served while the server drains: it must be in the final snapshot.
              yield* state.update({ clusterId: "late", affiliateId: "a", endpoints: [], ttl: Duration.minutes(5) })
              events.push("server stopped")
            }).pipe(Effect.orDie)
          )
        })
      )
      const store = recordingStore(events)
      const storeContext = yield* Layer.build(store)
      const app = server.pipe(Layer.provide(lifecycle(Layer.succeedContext(storeContext))))
      const { scope } = yield* open(app)
      assert.deepStrictEqual(events, ["load", "server started"])
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual(events, ["load", "server started", "server stopped", "save"])
      const saved = yield* Effect.flatMap(SnapshotStore, (s) => s.load).pipe(Effect.provideContext(storeContext))
      assert.deepStrictEqual(
        decode(Option.getOrThrow(saved), 0).clusters.map((c) => c.id),
        ["late"]
      )
    })
  )

  it.effect("in the serve form (Effect.scoped server, provided core), saves after the server's scope closed", () =>
    Effect.gen(function* () {
      const events: Array<string> = []
      const serverProgram = Effect.gen(function* () {
        yield* Effect.acquireRelease(
          Effect.sync(() => events.push("server started")),
          () => Effect.sync(() => events.push("server stopped"))
        )
      }).pipe(Effect.scoped, Effect.provide(lifecycle(recordingStore(events))))
      yield* serverProgram
      assert.deepStrictEqual(events, ["load", "server started", "server stopped", "save"])
    })
  )

  it.effect("stops waiting for a stuck final save after the timeout, and ends the scope with a defect", () => {
    const { lines, layer } = capture()
    return Effect.gen(function* () {
      const stuck = recordingStore([], { save: () => Effect.never })
      const { scope } = yield* open(lifecycle(stuck, { finalSaveTimeout: "10 seconds" }))
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* TestClock.adjust("9 seconds")
      assert.isUndefined(closing.pollUnsafe())
      yield* TestClock.adjust("1 second")
      const exit = yield* Fiber.await(closing)
      assert.isTrue(Exit.hasDies(exit))
      assert.include(Cause.pretty((exit as Exit.Failure<void, never>).cause), "did not finish within 10s")
      assert.isTrue(lines.some((l) => l.level === "Error" && l.message === "final state save did not finish in time"))
    }).pipe(Effect.provide(layer))
  })

  it.effect("logs a failed final save and ends the scope with a defect", () => {
    const { lines, layer } = capture()
    return Effect.gen(function* () {
      const failing = recordingStore([], {
        save: () => Effect.fail(new SnapshotStoreError({ operation: "save", message: "disk full" }))
      })
      const { scope } = yield* open(lifecycle(failing))
      const exit = yield* Effect.exit(Scope.close(scope, Exit.void))
      assert.isTrue(Exit.hasDies(exit))
      const line = lines.find((l) => l.message === "failed to save state on shutdown")
      assert.strictEqual(line?.level, "Error")
      assert.strictEqual(line?.fields.error, "disk full")
    }).pipe(Effect.provide(layer))
  })

  it.effect("imports the snapshot as the store reads it, piece by piece, and saves it in pieces", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(now)
      const { bytes } = smallSnapshot()
      const pieceSize = 7
      const saved: Array<Array<Uint8Array>> = []
      let calls = 0
      const store = Layer.succeed(SnapshotStore, {
        location: "test",
        load: Effect.die("not used"),
        read: (reader: SnapshotReader) =>
          Effect.sync(() => {
            let pending = new Uint8Array(0)
            for (let offset = 0; offset < bytes.length; offset += pieceSize) {
              const next = new Uint8Array(pending.length + Math.min(pieceSize, bytes.length - offset))
              next.set(pending)
              next.set(bytes.subarray(offset, offset + pieceSize), pending.length)
              const final = offset + pieceSize >= bytes.length
              calls++
              const consumed = reader(next, final)
              pending = next.slice(consumed)
              next.fill(0)
            }
            return true
          }),
        save: (snapshot: Uint8Array | SnapshotPieces) => Effect.sync(() => saved.push(snapshotPieces(snapshot))),
        moveAside: Effect.succeed(Option.none())
      })
      const { context, scope } = yield* open(lifecycle(store))
      assert.isAbove(calls, 1, "the snapshot arrives in several pieces")
      const exported = yield* Effect.flatMap(ClusterState, (state) => state.exportSnapshot).pipe(
        Effect.provideContext(context)
      )
      assert.deepStrictEqual(decode(exported.bytes, now).clusters, decode(bytes, now).clusters)
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(saved.length, 1)
      assert.deepStrictEqual(decode(joinPieces(saved[0]!), now).clusters, decode(bytes, now).clusters)
    })
  )

  it.effect("logs state loaded and state saved with their fields", () => {
    const { lines, layer } = capture()
    return Effect.gen(function* () {
      yield* TestClock.setTime(now)
      const { bytes } = smallSnapshot()
      const { scope } = yield* open(lifecycle(SnapshotStore.layerMemory(bytes)))
      yield* Scope.close(scope, Exit.void)
      const fieldsOf = (message: string) => lines.find((l) => l.message === message)?.fields
      assert.deepStrictEqual(fieldsOf("state loaded"), {
        component: "storage",
        location: "memory",
        clusters: 3,
        affiliates: 3,
        endpoints: 2,
        duration: 0,
        size_bytes: bytes.length,
        expired_affiliates: 0,
        expired_endpoints: 0
      })
      assert.deepStrictEqual(fieldsOf("state saved"), {
        component: "storage",
        location: "memory",
        clusters: 3,
        affiliates: 3,
        endpoints: 2,
        duration: 0,
        size_bytes: bytes.length
      })
    }).pipe(Effect.provide(layer))
  })

  it.effect("exposes the storage metrics under the original names", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(now)
      const { bytes } = smallSnapshot()
      const before = yield* PrometheusMetrics.format()
      assert.notInclude(before, "discovery_storage")
      const { context, scope } = yield* open(lifecycle(SnapshotStore.layerMemory(bytes)))
      yield* Effect.flatMap(SnapshotService, (s) => s.save).pipe(Effect.provideContext(context))
      yield* Scope.close(scope, Exit.void)
      const text = yield* PrometheusMetrics.format()
      const expected = [
        "# TYPE discovery_storage_operations_total counter",
        'discovery_storage_operations_total{operation="load",status="success"} 1',
        'discovery_storage_operations_total{operation="save",status="success"} 2',
        "# TYPE discovery_storage_last_snapshot_size_bytes gauge",
        `discovery_storage_last_snapshot_size_bytes{operation="load"} ${bytes.length}`,
        `discovery_storage_last_snapshot_size_bytes{operation="save"} ${bytes.length}`,
        'discovery_storage_last_operation_clusters{operation="load"} 3',
        'discovery_storage_last_operation_clusters{operation="save"} 3',
        'discovery_storage_last_operation_affiliates{operation="save"} 3',
        'discovery_storage_last_operation_endpoints{operation="save"} 2',
        "# TYPE discovery_storage_last_operation_duration_seconds gauge",
        'discovery_storage_last_operation_duration_seconds{operation="save"} 0'
      ]
      for (const line of expected) assert.include(text.split("\n"), line)
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect("counts a failed save and a damaged load as errors", () =>
    Effect.gen(function* () {
      const failing = recordingStore([], {
        initial: utf8("\x0a\x05ab"),
        save: () => Effect.fail(new SnapshotStoreError({ operation: "save", message: "read-only" }))
      })
      const { context } = yield* open(lifecycle(failing))
      const service = yield* SnapshotService.pipe(Effect.provideContext(context))
      const error = yield* Effect.flip(service.save)
      assert.strictEqual(error.message, "read-only")
      const text = (yield* PrometheusMetrics.format()).split("\n")
      assert.include(text, 'discovery_storage_operations_total{operation="load",status="error"} 1')
      assert.include(text, 'discovery_storage_operations_total{operation="save",status="error"} 1')
    }).pipe(Effect.provideService(Metric.MetricRegistry, new Map()))
  )

  it.effect("starts empty when there is no snapshot yet", () =>
    Effect.gen(function* () {
      const { context } = yield* open(lifecycle(FileSnapshotStore.layer({ path: join(newDir(), "state.binpb") })))
      const service = yield* SnapshotService.pipe(Effect.provideContext(context))
      assert.deepStrictEqual(service.loaded, { _tag: "Missing" })
    })
  )

  it.effect("keeps serving when the snapshot cannot be read, after moving it aside", () =>
    Effect.gen(function* () {
      const dir = newDir()
      const path = join(dir, "state.binpb")
      writeFileSync(path, "x")
      const unreadable: Layer.Layer<SnapshotStore> = Layer.effect(
        SnapshotStore,
        Effect.map(FileSnapshotStore.make({ path }), (store) =>
          SnapshotStore.of({
            ...store,
            read: () => Effect.fail(new SnapshotStoreError({ operation: "load", message: "EIO" }))
          })
        )
      )
      const { context } = yield* open(lifecycle(unreadable))
      const service = yield* SnapshotService.pipe(Effect.provideContext(context))
      assert.strictEqual(service.loaded._tag, "Failed")
      assert.isFalse(existsSync(path))
      assert.strictEqual(readdirSync(dir).filter((f) => f.startsWith("state.binpb.corrupt-")).length, 1)
    })
  )

  it.effect("restores nothing when the read fails after handing over whole records", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(now)
      const { bytes, ends } = smallSnapshot()
      let consumed = 0
      const failingHalfway = Layer.effect(
        SnapshotStore,
        Effect.map(makeMemorySnapshotStore(bytes), (store) =>
          SnapshotStore.of({
            ...store,
            read: (reader) =>
              Effect.suspend(() => {
                consumed = reader(bytes.slice(0, ends[1]!), false)
                return Effect.fail(new SnapshotStoreError({ operation: "load", message: "EIO" }))
              })
          })
        )
      )
      const { context } = yield* open(lifecycle(failingHalfway))
      assert.strictEqual(consumed, ends[1], "the decoder took two whole records before the failure")
      const service = yield* SnapshotService.pipe(Effect.provideContext(context))
      assert.strictEqual(service.loaded._tag, "Failed")
      const stats = yield* Effect.flatMap(ClusterState, (state) => state.stats).pipe(Effect.provideContext(context))
      assert.strictEqual(stats.clusters, 0)
    })
  )

  it.effect("loads every complete record of a file cut at any byte, and moves a damaged file aside", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(now)
      const { bytes, ends } = smallSnapshot()
      for (let cut = 0; cut <= bytes.length; cut++) {
        const dir = newDir()
        const path = join(dir, "state.binpb")
        const damaged = bytes.subarray(0, cut)
        writeFileSync(path, damaged)
        const { context, scope } = yield* open(lifecycle(FileSnapshotStore.layer({ path })))
        const [service, state] = yield* Effect.all([SnapshotService, ClusterState]).pipe(Effect.provideContext(context))
        const complete = ends.filter((end) => end <= cut).length
        const intact = cut === 0 || ends.includes(cut)
        assert.strictEqual((yield* state.stats).clusters, complete, `cut at ${cut}`)
        const loaded = service.loaded
        assert.strictEqual(loaded._tag, "Loaded")
        if (loaded._tag !== "Loaded") return
        const aside = readdirSync(dir).filter((f) => f.startsWith("state.binpb.corrupt-"))
        if (intact) {
          assert.deepStrictEqual(loaded.skipped, [])
          assert.deepStrictEqual(aside, [])
        } else {
          assert.strictEqual(
            loaded.skipped.reduce((n, s) => n + s.length, 0),
            cut - (ends.filter((e) => e <= cut).at(-1) ?? 0)
          )
          assert.deepStrictEqual(aside.length, 1, `cut at ${cut}`)
          assert.strictEqual(Option.getOrThrow(loaded.movedAside), join(dir, aside[0]!))
          assert.deepStrictEqual(new Uint8Array(readFileSync(join(dir, aside[0]!))), damaged)
          assert.isFalse(existsSync(path))
        }
        // The service keeps running, and its next save writes the intact part.
        yield* Scope.close(scope, Exit.void)
        const end = ends.filter((e) => e <= cut).at(-1) ?? 0
        assert.deepStrictEqual(
          decode(new Uint8Array(readFileSync(path)), now).clusters.map((c) => c.id),
          decode(bytes.subarray(0, end), now).clusters.map((c) => c.id),
          `cut at ${cut}`
        )
      }
    })
  )

  it.effect("restores affiliates, endpoints and TTLs (within 1 s) across a restart through a file", () =>
    Effect.gen(function* () {
      yield* TestClock.setTime(now)
      const path = join(newDir(), "state.binpb")
      const first = yield* open(lifecycle(FileSnapshotStore.layer({ path })))
      yield* Effect.gen(function* () {
        const state = yield* ClusterState
        yield* state.update({
          clusterId: "c1",
          affiliateId: "a1",
          data: utf8("one"),
          endpoints: [ep(1), ep(2)],
          ttl: Duration.minutes(30)
        })
        yield* TestClock.adjust("1500 millis")
        yield* state.update({
          clusterId: "c1",
          affiliateId: "a2",
          data: utf8("two"),
          endpoints: [],
          ttl: Duration.seconds(90)
        })
        yield* state.update({ clusterId: "c2", affiliateId: "a1", endpoints: [ep(3)], ttl: Duration.minutes(10) })
        yield* state.watch({ clusterId: "watched" }).pipe(Stream.runDrain, Effect.forkChild)
        yield* Effect.yieldNow
      }).pipe(Effect.provideContext(first.context))
      yield* TestClock.adjust("700 millis")
      yield* Scope.close(first.scope, Exit.void) // the final save, at now + 2.2 s

      yield* TestClock.adjust("2 seconds")
      const second = yield* open(lifecycle(FileSnapshotStore.layer({ path })))
      const restored = yield* Effect.gen(function* () {
        const state = yield* ClusterState
        return {
          c1: yield* state.list({ clusterId: "c1" }),
          c2: yield* state.list({ clusterId: "c2" }),
          snapshot: yield* state.exportSnapshot
        }
      }).pipe(Effect.provideContext(second.context))
      const plain = (views: ReadonlyArray<{ id: string; data: Uint8Array; endpoints: ReadonlyArray<Uint8Array> }>) =>
        views.map((v) => ({ id: v.id, data: Array.from(v.data), endpoints: v.endpoints.map((e) => Array.from(e)) }))
      assert.deepStrictEqual(plain(restored.c1), [
        { id: "a1", data: Array.from(utf8("one")), endpoints: [Array.from(ep(1)), Array.from(ep(2))] },
        { id: "a2", data: Array.from(utf8("two")), endpoints: [] }
      ])
      assert.deepStrictEqual(plain(restored.c2), [{ id: "a1", data: [], endpoints: [Array.from(ep(3))] }])

      // Time left right after the restart, against time left at the final save (known from the updates).
      const left = (clusters: ReturnType<typeof decode>["clusters"]) =>
        Object.fromEntries(
          clusters.map((c) => [
            c.id,
            [...c.affiliates.values()].map((a) => [a.id, a.expiresAt, ...a.endpoints.map((e) => e.expiresAt)])
          ])
        )
      const expected = {
        c1: [
          ["a1", 1_797_800, 1_797_800, 1_797_800],
          ["a2", 89_300]
        ],
        c2: [["a1", 599_300, 599_300]],
        watched: []
      }
      const actual = left(decode(restored.snapshot.bytes, 0).clusters)
      assert.deepStrictEqual(Object.keys(actual).sort(), Object.keys(expected).sort())
      for (const [id, affiliates] of Object.entries(expected)) {
        affiliates.forEach((entry, i) => {
          const got = actual[id]![i]!
          assert.strictEqual(got[0], entry[0])
          for (let k = 1; k < entry.length; k++) {
            assert.isAtMost(Math.abs((got[k] as number) - (entry[k] as number)), 1000, `${id}/${entry[0]}[${k}]`)
          }
        })
      }
      yield* Scope.close(second.scope, Exit.void)
    })
  )
})
