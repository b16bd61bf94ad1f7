/**
 * The owner's side of the port against a scripted `ClusterApi`: a defect is
 * answered (INTERNAL) rather than left without a reply, a watch whose start
 * comes after changes were already relayed to other watches still gets its
 * start first and its changes in order, and a watch the core ends is over
 * on the owner too.
 */
import { MessageChannel } from "node:worker_threads"
import { Duration, Effect, Exit, Metric, Scope, Stream } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { ClusterApiClient, ClusterApiHost } from "../../../src/adapters/message-port/index.ts"
import { CallDeadline } from "../../../src/ports/CallDeadline.ts"
import { SubscriptionLost } from "../../../src/ports/DiscoveryError.ts"
import type { ClusterApi, WatchDelta, WatchSink, WatchStart } from "../../../src/ports/ClusterApi.ts"
import { deltaCodec } from "../../../src/cli/ioThreadControl.ts"
import { watchEndingsTotal } from "../../../src/core/server/changeReport.ts"
import * as ClusterState from "../../../src/core/server/ClusterState.ts"
import { defaultCaps } from "../../../src/core/server/ClusterStore.ts"
import type { WatchEndCause } from "../../../src/ports/ChangeCause.ts"

const updated = (revision: number): WatchDelta => ({
  _tag: "Updated",
  revision,
  affiliate: { id: `node-${revision}`, data: Uint8Array.of(revision), endpoints: [] }
})

const snapshot = (revision: number): WatchStart => ({ _tag: "Snapshot", revision, affiliates: [], epoch: "e.1" })

/** A core whose watches the test drives: `offer` hands a delta to every registered sink, as the core's fan-out. */
const scriptedCore = (subscribeHook: (sink: WatchSink, index: number) => Effect.Effect<WatchStart>) => {
  const sinks: Array<WatchSink> = []
  const api = {
    hello: () => Effect.die(new Error("hello broke")),
    affiliateUpdate: () => Effect.void,
    affiliateDelete: () => Effect.void,
    list: () => Effect.die("not a list"),
    watch: () => Stream.empty,
    subscribe: (_request: unknown, sink: WatchSink) =>
      Effect.suspend(() => {
        sinks.push(sink)
        return subscribeHook(sink, sinks.length - 1)
      })
  } as unknown as ClusterApi["Service"]
  return { api, sinks, offer: (delta: WatchDelta) => sinks.every((sink) => sink.offer(delta)) }
}

/** Serves `api` on one end of a channel and gives the client of the other (deltas encoded, as for I/O threads). */
const connect = (api: ClusterApi["Service"]) =>
  Effect.gen(function* () {
    const channel = new MessageChannel()
    const host = yield* ClusterApiHost.serve(api, channel.port1, { codec: deltaCodec })
    const client = yield* ClusterApiClient.connect(channel.port2, deltaCodec)
    return { host, client: client.api }
  })

/** A sink that records what it is handed. */
const recorder = () => {
  const events: Array<string> = []
  const sink: WatchSink = {
    offer: (delta) => {
      events.push(`delta ${delta.revision}`)
      return true
    },
    end: (error) => {
      events.push(`end ${error._tag}`)
    }
  }
  return { events, sink }
}

describe("ClusterApiHost", () => {
  it.live("answers the live view's frames after the point the other side asks from", () =>
    Effect.gen(function* () {
      const channel = new MessageChannel()
      const asked: Array<number> = []
      yield* ClusterApiHost.serve(scriptedCore(() => Effect.succeed(snapshot(0))).api, channel.port1, {
        codec: deltaCodec,
        live: (since) =>
          Effect.sync(() => {
            asked.push(since)
            return { samples: [since + 1] }
          })
      })
      const client = yield* ClusterApiClient.connect(channel.port2, deltaCodec)
      assert.deepStrictEqual(yield* client.live(0), { samples: [1] })
      assert.deepStrictEqual(yield* client.live(1_700_000_000_000), { samples: [1_700_000_000_001] })
      assert.deepStrictEqual(asked, [0, 1_700_000_000_000])
    }).pipe(Effect.scoped)
  )

  it.effect("answers a defect of the core as INTERNAL instead of leaving the call waiting", () =>
    Effect.gen(function* () {
      const { client } = yield* connect(scriptedCore(() => Effect.succeed(snapshot(0))).api)
      const exit = yield* Effect.exit(client.hello({ clusterId: "c", clientVersion: "v1" }))
      assert.isTrue(Exit.isFailure(exit))
      assert.include(String(Exit.isFailure(exit) && exit.cause), "hello broke")
      const listed = yield* Effect.exit(client.list({ clusterId: "c" }))
      assert.include(String(Exit.isFailure(listed) && listed.cause), "RemoteFailure")
    }).pipe(Effect.scoped)
  )

  it.live("gives a watch that started late its start first and its changes in order", () =>
    Effect.gen(function* () {
      const core = scriptedCore((_sink, index) =>
        index === 0
          ? Effect.succeed(snapshot(0))
          : // the second watch's start is late: changes reach both watches before it is posted
            Effect.gen(function* () {
              core.offer(updated(1))
              yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
              core.offer(updated(2))
              return snapshot(0)
            })
      )
      const { client } = yield* connect(core.api)
      const first = recorder()
      const second = recorder()
      yield* client.subscribe!({ clusterId: "c" }, first.sink)
      const start = yield* client.subscribe!({ clusterId: "c" }, second.sink).pipe(
        Effect.tap(() => Effect.sync(() => second.events.push("start")))
      )
      assert.strictEqual(start._tag, "Snapshot")
      core.offer(updated(3))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      assert.deepStrictEqual(first.events, ["delta 1", "delta 2", "delta 3"])
      assert.deepStrictEqual(second.events, ["start", "delta 1", "delta 2", "delta 3"])
    }).pipe(Effect.scoped)
  )

  it.live("ends a watch the core ended before its start was posted, after its start, instead of leaving it open", () =>
    Effect.gen(function* () {
      const core = scriptedCore((sink) =>
        Effect.gen(function* () {
          sink.end(new SubscriptionLost({ message: "lost" }))
          yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
          return snapshot(0)
        })
      )
      const { host, client } = yield* connect(core.api)
      const watcher = recorder()
      yield* client.subscribe!({ clusterId: "c" }, watcher.sink).pipe(
        Effect.tap(() => Effect.sync(() => watcher.events.push("start")))
      )
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      assert.deepStrictEqual(watcher.events, ["start", "end SubscriptionLost"])
      assert.strictEqual(host.watches(), 0)
    }).pipe(Effect.scoped)
  )

  it.live("ends a watch on the owner when the core ends it", () =>
    Effect.gen(function* () {
      const core = scriptedCore(() => Effect.succeed(snapshot(0)))
      const { host, client } = yield* connect(core.api)
      const watcher = recorder()
      yield* client.subscribe!({ clusterId: "c" }, watcher.sink)
      assert.strictEqual(host.watches(), 1)
      core.sinks[0]!.end(new SubscriptionLost({ message: "lost" }))
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
      assert.deepStrictEqual(watcher.events, ["end SubscriptionLost"])
      assert.strictEqual(host.watches(), 0)
    }).pipe(Effect.scoped)
  )

  it.live(
    "counts a watch its client cancelled as client gone, and one open when the host stops as thread stopped",
    () =>
      Effect.gen(function* () {
        const ended = (cause: WatchEndCause) =>
          Effect.map(Metric.value(Metric.withAttributes(watchEndingsTotal, { cause })), (state) => state.count)
        const before = [yield* ended("client_gone"), yield* ended("thread_stopped")]
        const state = yield* ClusterState.make(defaultCaps)
        const api = { ...scriptedCore(() => Effect.die("unused")).api, subscribe: state.subscribe }
        const channel = new MessageChannel()
        const hostScope = yield* Scope.make()
        yield* ClusterApiHost.serve(api, channel.port1, { codec: deltaCodec }).pipe(Scope.provide(hostScope))
        const client = (yield* ClusterApiClient.connect(channel.port2, deltaCodec)).api
        const cancelled = yield* Scope.make()
        yield* client.subscribe!({ clusterId: "c" }, recorder().sink).pipe(Scope.provide(cancelled))
        yield* client.subscribe!({ clusterId: "c" }, recorder().sink)
        yield* Scope.close(cancelled, Exit.void)
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 20)))
        assert.deepStrictEqual(
          [(yield* ended("client_gone")) - before[0]!, (yield* ended("thread_stopped")) - before[1]!],
          [1, 0]
        )
        yield* Scope.close(hostScope, Exit.void)
        assert.deepStrictEqual(
          [(yield* ended("client_gone")) - before[0]!, (yield* ended("thread_stopped")) - before[1]!],
          [1, 1]
        )
      }).pipe(Effect.scoped)
  )

  it.live("counts the watches a thread lets go of once told to stop with the instance as shutdown", () =>
    Effect.gen(function* () {
      const shutdown = Effect.map(
        Metric.value(Metric.withAttributes(watchEndingsTotal, { cause: "shutdown" })),
        (state) => state.count
      )
      const before = yield* shutdown
      const state = yield* ClusterState.make(defaultCaps)
      const api = { ...scriptedCore(() => Effect.die("unused")).api, subscribe: state.subscribe }
      const channel = new MessageChannel()
      const host = yield* ClusterApiHost.serve(api, channel.port1, { codec: deltaCodec })
      const client = (yield* ClusterApiClient.connect(channel.port2, deltaCodec)).api
      const draining = yield* Scope.make()
      yield* client.subscribe!({ clusterId: "c" }, recorder().sink).pipe(Scope.provide(draining))
      // the owner tells the thread to stop with the instance; its server then lets go of its watches
      host.leaving("shutdown")
      yield* Scope.close(draining, Exit.void)
      for (let i = 0; i < 50 && (yield* shutdown) === before; i++) {
        yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 10)))
      }
      assert.strictEqual((yield* shutdown) - before, 1)
    }).pipe(Effect.scoped)
  )

  it.live("does not apply a call or a watch whose caller's deadline passed before the owner took it", () =>
    Effect.gen(function* () {
      const applied: Array<string> = []
      const core = scriptedCore(() => Effect.succeed(snapshot(0)))
      const api = {
        ...core.api,
        affiliateUpdate: (request: { readonly affiliateId: string }) =>
          Effect.sync(() => void applied.push(request.affiliateId))
      } as unknown as ClusterApi["Service"]
      const { host, client } = yield* connect(api)
      const update = (affiliateId: string) =>
        client.affiliateUpdate({ clusterId: "c", affiliateId, endpoints: [], ttl: Duration.minutes(1) })
      const gone = yield* Effect.exit(update("late").pipe(Effect.provideService(CallDeadline, Date.now() - 1)))
      yield* update("in-time").pipe(Effect.provideService(CallDeadline, Date.now() + 60_000))
      yield* update("no-deadline")
      assert.deepStrictEqual(applied, ["in-time", "no-deadline"])
      assert.isTrue(Exit.isFailure(gone))
      assert.include(String(Exit.isFailure(gone) && gone.cause), "deadline exceeded")
      const watcher = recorder()
      const watch = yield* Effect.exit(
        client.subscribe!({ clusterId: "c" }, watcher.sink).pipe(Effect.provideService(CallDeadline, Date.now() - 1))
      )
      assert.isTrue(Exit.isFailure(watch))
      assert.strictEqual(core.sinks.length, 0)
      assert.strictEqual(host.watches(), 0)
    }).pipe(Effect.scoped)
  )
})
