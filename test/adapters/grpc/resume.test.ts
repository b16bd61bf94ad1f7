/**
 * Resumable watches over real gRPC on loopback, for both transports: a
 * watcher that reconnects with its epoch and revision after missing updates,
 * a delete and an expiry is sent exactly those changes (no snapshot), and
 * every doubtful resume point gets a fresh snapshot.
 */
import { create, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Metric, Scope } from "effect"
import * as TestDiscovery from "../../../src/adapters/testing/TestDiscovery.ts"
import { watchesStartedTotal } from "../../../src/core/server/ClusterState.ts"
import { encodeSnapshot, WatchResponseReader } from "../../../src/adapters/grpc/codec.ts"
import { WatchRequestSchema, WatchResponseSchema } from "../../../src/gen/discovery/server/cluster_pb.ts"
import type { ResumePoint, WatchEvent } from "../../../src/ports/ClusterApi.ts"
import { blob, connect, endpoint, serverLayer as baseServerLayer, transports, watcher } from "./fixtures.ts"

const utf8 = (text: string) => new TextEncoder().encode(text)
const minute = Duration.minutes(1)

const started = (start: "resumed" | "snapshot") =>
  Effect.map(Metric.value(Metric.withAttributes(watchesStartedTotal, { start })), (state) => state.count)

/** The first `n` events of a watch opened with `resume`, the watch closed after. */
const firstEvents = (resume: ResumePoint | undefined, n: number) =>
  Effect.gen(function* () {
    const api = yield* connect()
    const scope = yield* Scope.make()
    const watch = yield* watcher(api.watch({ clusterId: "c", resume })).pipe(Scope.provide(scope))
    const events = yield* watch.take(n)
    yield* Scope.close(scope, Effect.void as never)
    return events
  })

const positionOf = (events: ReadonlyArray<WatchEvent>): ResumePoint => {
  const first = events[0]!
  assert.strictEqual(first._tag, "Snapshot")
  const epoch = first._tag === "Snapshot" ? first.epoch : undefined
  assert.isString(epoch)
  const last = events[events.length - 1]!
  return { epoch: epoch!, revision: last.revision }
}

for (const transport of transports) {
  describe(`resumable watches over ${transport}`, () => {
    const serverLayer = (...[core, server]: Parameters<typeof baseServerLayer>) =>
      baseServerLayer(core, { transport, ...server })

    it.effect("a watcher that comes back gets the updates, the delete and the expiry it missed, and no snapshot", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        yield* api.affiliateUpdate({
          clusterId: "c",
          affiliateId: "af1",
          data: utf8("one"),
          endpoints: [],
          ttl: minute
        })
        yield* api.affiliateUpdate({
          clusterId: "c",
          affiliateId: "af3",
          data: utf8("three"),
          endpoints: [],
          ttl: minute
        })
        yield* api.affiliateUpdate({
          clusterId: "c",
          affiliateId: "af4",
          data: utf8("four"),
          endpoints: [],
          ttl: Duration.seconds(5)
        })
        const position = positionOf(yield* firstEvents(undefined, 1))
        assert.strictEqual(position.revision, 3)

        // while the watcher is away
        yield* api.affiliateUpdate({
          clusterId: "c",
          affiliateId: "af2",
          data: utf8("two"),
          endpoints: [blob(16, 2)],
          ttl: minute
        })
        yield* api.affiliateUpdate({
          clusterId: "c",
          affiliateId: "af1",
          data: utf8("uno"),
          endpoints: [],
          ttl: minute
        })
        yield* api.affiliateDelete({ clusterId: "c", affiliateId: "af3" })
        yield* TestDiscovery.advance(Duration.seconds(6))
        yield* TestDiscovery.runGc

        const resumedBefore = yield* started("resumed")
        const events = yield* firstEvents(position, 5)
        assert.deepStrictEqual(events, [
          { _tag: "Resumed", revision: 3, epoch: position.epoch },
          { _tag: "Updated", revision: 4, affiliate: { id: "af2", data: utf8("two"), endpoints: [blob(16, 2)] } },
          { _tag: "Updated", revision: 5, affiliate: { id: "af1", data: utf8("uno"), endpoints: [] } },
          { _tag: "Deleted", revision: 6, affiliateId: "af3" },
          { _tag: "Deleted", revision: 7, affiliateId: "af4" }
        ])
        assert.strictEqual((yield* started("resumed")) - resumedBefore, 1)

        // what it rebuilt is what List says
        const view = new Map<string, Uint8Array>([
          ["af1", utf8("one")],
          ["af3", utf8("three")],
          ["af4", utf8("four")]
        ])
        for (const event of events) {
          if (event._tag === "Updated") view.set(event.affiliate.id, event.affiliate.data)
          else if (event._tag === "Deleted") view.delete(event.affiliateId)
        }
        const listed = yield* api.list({ clusterId: "c" })
        assert.deepStrictEqual([...view].sort(), listed.map((a) => [a.id, a.data] as const).sort())

        // nothing missed: only the resumed start, then live changes
        const caughtUp = { epoch: position.epoch, revision: 7 }
        const api2 = yield* connect()
        const live = yield* watcher(api2.watch({ clusterId: "c", resume: caughtUp }))
        assert.deepStrictEqual(yield* live.next, { _tag: "Resumed", revision: 7, epoch: position.epoch })
        yield* api.affiliateDelete({ clusterId: "c", affiliateId: "af2" })
        assert.deepStrictEqual(yield* live.next, { _tag: "Deleted", revision: 8, affiliateId: "af2" })
      }).pipe(Effect.provide(serverLayer()))
    )

    it.effect("a snapshot split over several messages reaches our client whole, and only then is a resume point", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        for (let i = 0; i < 6; i++) {
          yield* api.affiliateUpdate({
            clusterId: "c",
            affiliateId: `af${i}`,
            data: blob(100, i),
            endpoints: [],
            ttl: minute
          })
        }
        const [snapshot] = yield* firstEvents(undefined, 1)
        assert.strictEqual(snapshot!._tag === "Snapshot" ? snapshot!.affiliates.length : 0, 6)
        const position = positionOf([snapshot!])
        assert.strictEqual(position.revision, 6)

        // the parts on the wire: each a snapshot, all but the last saying more follow
        const reader = new WatchResponseReader()
        const parts = encodeSnapshot(yield* api.list({ clusterId: "c" }), 250, position).map((bytes) =>
          fromBinary(WatchResponseSchema, bytes)
        )
        assert.isAbove(parts.length, 2)
        assert.deepStrictEqual(
          parts.map((part) => [part.snapshot, part.more]),
          parts.map((_, i) => [true, i < parts.length - 1])
        )
        for (const part of parts.slice(0, -1)) assert.deepStrictEqual(reader.read(part), [])
        assert.strictEqual(reader.read(parts.at(-1)!)[0]?._tag, "Snapshot")
      }).pipe(Effect.provide(serverLayer({}, { snapshotBudget: 250 })))
    )

    it.effect("a watcher that does not ask for revisions (the original's client) gets the original's bytes", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        const data = utf8("one")
        yield* api.affiliateUpdate({ clusterId: "c", affiliateId: "af1", data, endpoints: [], ttl: minute })
        const target = yield* endpoint
        const client = new grpc.Client(target, grpc.credentials.createInsecure())
        const raw: Array<Uint8Array> = []
        const call = client.makeServerStreamRequest(
          "/sidero.discovery.server.Cluster/Watch",
          (bytes: Uint8Array) => Buffer.from(bytes),
          (bytes: Buffer) => new Uint8Array(bytes),
          toBinary(WatchRequestSchema, create(WatchRequestSchema, { clusterId: "c" }))
        )
        call.on("data", (bytes: Uint8Array) => raw.push(bytes))
        call.on("error", () => undefined)
        const received = (n: number) =>
          Effect.promise(async () => {
            while (raw.length < n) await new Promise((resolve) => setTimeout(resolve, 5))
          })
        yield* received(1)
        yield* api.affiliateDelete({ clusterId: "c", affiliateId: "af1" })
        yield* received(2)
        call.cancel()
        client.close()
        const original = (message: MessageInitShape<typeof WatchResponseSchema>) =>
          toBinary(WatchResponseSchema, create(WatchResponseSchema, message))
        assert.deepStrictEqual(raw, [
          original({ affiliates: [{ id: "af1", data, endpoints: [] }] }),
          original({ affiliates: [{ id: "af1" }], deleted: true })
        ])
      }).pipe(Effect.provide(serverLayer()))
    )

    it.effect("an unknown epoch, a revision in the future or one trimmed from the log gets a fresh snapshot", () =>
      Effect.gen(function* () {
        const api = yield* connect()
        /** Sets the data of af0, af1 and af2: three changes. */
        const setAll = (data: string) =>
          Effect.forEach(
            ["af0", "af1", "af2"],
            (affiliateId) =>
              api.affiliateUpdate({ clusterId: "c", affiliateId, data: utf8(data), endpoints: [], ttl: minute }),
            { discard: true }
          )
        yield* setAll("x")
        const position = positionOf(yield* firstEvents(undefined, 1))
        const snapshotsBefore = yield* started("snapshot")
        for (const resume of [
          { epoch: "not-an-epoch", revision: position.revision },
          { epoch: position.epoch, revision: position.revision + 1 }
        ]) {
          const [first] = yield* firstEvents(resume, 1)
          assert.deepInclude(first, { _tag: "Snapshot", revision: 3, epoch: position.epoch })
        }
        // the log holds 2 changes: 3 missed ones are too many
        yield* setAll("y")
        const [trimmed] = yield* firstEvents(position, 1)
        assert.deepInclude(trimmed, { _tag: "Snapshot", revision: 6 })
        const [held] = yield* firstEvents({ epoch: position.epoch, revision: 4 }, 1)
        assert.deepStrictEqual(held, { _tag: "Resumed", revision: 4, epoch: position.epoch })
        assert.strictEqual((yield* started("snapshot")) - snapshotsBefore, 3)
      }).pipe(Effect.provide(serverLayer({ caps: { watchLogLength: 2 } })))
    )
  })
}
