/**
 * The I/O threads against real worker threads on one loopback port: what
 * must hold for the whole process holds across threads (every watcher gets
 * the same changes in the same order, one rate limit per client address,
 * one set of metric totals), and a thread that dies is started again with
 * nothing acknowledged lost.
 */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Cause, Duration, Effect, Exit, Fiber, Option, Schedule, Scope, Stream } from "effect"
import { PrometheusMetrics } from "effect/observability"
import { assert, describe, it } from "@effect/vitest"
import { TestClock } from "effect/testing"
import { GrpcClient } from "../../src/adapters/grpc/index.ts"
import * as RateLimit from "../../src/adapters/grpc/rateLimit.ts"
import { TestDiscovery } from "../../src/adapters/testing/index.ts"
import * as IoThreads from "../../src/cli/IoThreads.ts"
import type { WatchEvent } from "../../src/ports/ClusterApi.ts"
import { ClusterApi } from "../../src/ports/ClusterApi.ts"
import { ConnectionCounts } from "../../src/adapters/grpc/http2/ConnectionCounts.ts"

const threadEntry = new URL("../contract/fixtures/grpcIoThread.ts", import.meta.url)

/** A client on a connection of its own (grpc-js would otherwise share one between clients of one target). */
const clientOf = (port: number): Effect.Effect<ClusterApi["Service"], never, Scope.Scope> =>
  GrpcClient.make({
    endpoint: `127.0.0.1:${port}`,
    tls: false,
    channelOptions: { "grpc.use_local_subchannel_pool": 1 }
  })

/** Two threads over the in-process core (real clock). */
const twoThreads = (options: Partial<IoThreads.IoThreadsOptions> = {}) =>
  IoThreads.make({
    threads: 2,
    entry: threadEntry,
    addresses: ["127.0.0.1:0"],
    connections: new ConnectionCounts(1000, 1000),
    stopTimeout: "2 seconds",
    restartDelay: "10 millis",
    ...options
  }).pipe(Effect.orDie)

/** The watches open through the threads now. */
const totalWatches = (threads: IoThreads.IoThreads["Service"]): number =>
  threads.threads().reduce((sum, thread) => sum + thread.watches, 0)

/** Waits `millis` of real time, whatever clock the test runs on. */
const realSleep = (millis: number): Effect.Effect<void> =>
  Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, millis)))

/** Waits (polling every 10 ms of real time, for at most 10 s) until `ready` holds. */
const realUntil = (ready: () => boolean, what: string): Effect.Effect<void> =>
  Effect.gen(function* () {
    for (let i = 0; i < 1000; i++) {
      if (ready()) return
      yield* realSleep(10)
    }
    return yield* Effect.die(new Error(`timed out waiting for ${what}`))
  })

/** Waits (polling every 10 ms, for at most 10 s) until `ready` holds. */
const until = (ready: () => boolean, what: string): Effect.Effect<void> =>
  Effect.gen(function* () {
    for (let i = 0; i < 1000; i++) {
      if (ready()) return
      yield* Effect.sleep("10 millis")
    }
    return yield* Effect.die(new Error(`timed out waiting for ${what}`))
  })

const update = (api: ClusterApi["Service"], clusterId: string, affiliateId: string, data: number) =>
  api.affiliateUpdate({
    clusterId,
    affiliateId,
    data: Uint8Array.of(data),
    endpoints: [],
    ttl: Duration.minutes(10)
  })

describe("I/O threads", { timeout: 60_000 }, () => {
  it.live("gives watchers on different threads the same changes in the same order", () =>
    Effect.gen(function* () {
      const threads = yield* twoThreads()
      const clusterId = "ordered"
      const seen: Array<Array<string>> = []
      const watchers: Array<Fiber.Fiber<void, unknown>> = []
      // open watchers until both threads carry some (the kernel spreads connections at random)
      for (let i = 0; i < 64 && (i < 8 || threads.threads().some((thread) => thread.watches === 0)); i++) {
        const api = yield* clientOf(threads.port)
        const events: Array<string> = []
        seen.push(events)
        watchers.push(
          yield* Effect.forkScoped(
            Stream.runForEach(api.watch({ clusterId }), (event: WatchEvent) =>
              Effect.sync(() => {
                if (event._tag === "Updated")
                  events.push(`${event.revision} U ${event.affiliate.id} ${event.affiliate.data[0]}`)
                else if (event._tag === "Deleted") events.push(`${event.revision} D ${event.affiliateId}`)
              })
            )
          )
        )
        yield* until(
          () => threads.threads().reduce((sum, thread) => sum + thread.watches, 0) === watchers.length,
          "the watch to open"
        )
      }
      const perThread = threads.threads().map((thread) => thread.watches)
      assert.isTrue(
        perThread.every((watches) => watches > 0),
        `watches per thread: ${perThread}`
      )

      const writer = yield* clientOf(threads.port)
      for (let i = 0; i < 60; i++) {
        if (i % 7 === 6) yield* writer.affiliateDelete({ clusterId, affiliateId: `node-${i % 5}` })
        else yield* update(writer, clusterId, `node-${i % 5}`, i)
      }
      yield* until(() => seen.every((events) => events.length === 60), "every watcher to see 60 changes")
      for (const events of seen) assert.deepStrictEqual(events, seen[0])
      assert.strictEqual(seen[0]![59]!.split(" ")[0], String(Number(seen[0]![0]!.split(" ")[0]) + 59))
    }).pipe(Effect.provide(TestDiscovery.layer()), Effect.scoped)
  )

  it.live("limits each client address once for all threads", () =>
    Effect.gen(function* () {
      process.env.DISCOVERY_TEST_RATE_LIMIT = "1"
      yield* Effect.addFinalizer(() => Effect.sync(() => delete process.env.DISCOVERY_TEST_RATE_LIMIT))
      const limiter = yield* RateLimit.make({ rate: 0.001, burst: 4, maxWait: "1 millis" })
      const threads = yield* twoThreads({ limiter })
      const outcomes = yield* Effect.forEach(Array.from({ length: 16 }), (_, i) =>
        Effect.flatMap(clientOf(threads.port), (api) =>
          Effect.exit(api.hello({ clusterId: `limited-${i}`, clientVersion: "v1.8.0" }))
        )
      )
      const refused = outcomes.filter(Exit.isFailure).map((exit) => String(Exit.isFailure(exit) && exit.cause))
      assert.strictEqual(outcomes.filter(Exit.isSuccess).length, 4)
      assert.strictEqual(refused.length, 12)
      for (const cause of refused) assert.include(cause, RateLimit.rateLimitExceededMessage)
    }).pipe(Effect.provide(TestDiscovery.layer()), Effect.scoped)
  )

  it.live("exports one total per series, whichever thread served the calls", () =>
    Effect.gen(function* () {
      const threads = yield* twoThreads()
      for (let i = 0; i < 12; i++) {
        const api = yield* clientOf(threads.port)
        yield* api.list({ clusterId: `counted-${i}` })
      }
      yield* threads.refreshMetrics
      const text = PrometheusMetrics.formatUnsafe(yield* Effect.context<never>())
      assert.include(
        text,
        'grpc_server_handled_total{grpc_code="OK",grpc_method="List",grpc_service="sidero.discovery.server.Cluster",grpc_type="unary"} 12'
      )
      assert.include(
        text,
        'grpc_server_started_total{grpc_method="List",grpc_service="sidero.discovery.server.Cluster",grpc_type="unary"} 12'
      )
    }).pipe(Effect.provide(TestDiscovery.layer()), Effect.scoped)
  )

  it.live("keeps the counts of threads that died, up to their last report a second before", () =>
    Effect.gen(function* () {
      const threads = yield* twoThreads()
      const clients = yield* Scope.make()
      for (let i = 0; i < 12; i++) {
        const api = yield* clientOf(threads.port).pipe(Scope.provide(clients))
        yield* api.list({ clusterId: `counted-${i}` })
      }
      yield* Scope.close(clients, Exit.void)
      yield* Effect.sleep("1500 millis")
      // both die before anyone asked for their metrics
      yield* threads.terminate(0)
      yield* threads.terminate(1)
      yield* until(() => threads.restarts() === 2 && threads.threads().length === 2, "both threads to start again")
      yield* threads.refreshMetrics
      assert.include(
        PrometheusMetrics.formatUnsafe(yield* Effect.context<never>()),
        'grpc_server_handled_total{grpc_code="OK",grpc_method="List",grpc_service="sidero.discovery.server.Cluster",grpc_type="unary"} 12'
      )
    }).pipe(Effect.provide(TestDiscovery.layer()), Effect.scoped)
  )

  it.live("starts a thread that died again; its clients reconnect and nothing acknowledged is lost", () =>
    Effect.gen(function* () {
      const connections = new ConnectionCounts(1000, 1000)
      const threads = yield* twoThreads({ connections })
      const clusterId = "survivor"
      const clients = yield* Scope.make()
      const client = () => clientOf(threads.port).pipe(Scope.provide(clients))
      const writers = yield* Effect.forEach(Array.from({ length: 8 }), client)
      const acknowledged = new Map<string, number>()
      /** Updates until acknowledged, as a client does: a call cut by the thread's death is tried again. */
      const write = (api: ClusterApi["Service"], affiliateId: string, data: number) =>
        update(api, clusterId, affiliateId, data).pipe(
          Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 200 }),
          Effect.tap(() => Effect.sync(() => acknowledged.set(affiliateId, data)))
        )
      const round = (base: number) =>
        Effect.forEach(writers, (api, i) => write(api, `node-${i}`, base + i), { concurrency: "unbounded" })
      yield* round(0)
      const watchers: Array<Fiber.Fiber<void, unknown>> = []
      for (let i = 0; i < 64 && (i < 4 || threads.threads().some((thread) => thread.watches === 0)); i++) {
        const api = yield* client()
        watchers.push(yield* Effect.forkScoped(Stream.runDrain(api.watch({ clusterId }))))
        yield* until(
          () => threads.threads().reduce((sum, thread) => sum + thread.watches, 0) === watchers.length,
          "the watch to open"
        )
      }
      const victim = threads.threads()[0]!
      assert.isAbove(victim.watches, 0)
      yield* threads.terminate(victim.index)
      // the watches the dead thread served end (UNAVAILABLE) rather than hang; the others stay open
      yield* until(
        () => watchers.filter((fiber) => fiber.pollUnsafe() !== undefined).length === victim.watches,
        "the dead thread's watches to end"
      )
      for (const fiber of watchers) {
        const exit = fiber.pollUnsafe()
        if (exit === undefined) continue
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isFailure(exit)) {
          const error = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
          assert.strictEqual((error as { readonly _tag?: string } | undefined)?._tag, "Unavailable")
        }
      }
      yield* round(100)
      yield* until(() => threads.restarts() === 1 && threads.threads().length === 2, "the thread to be started again")
      yield* round(200)
      const after = yield* client()
      const listed = yield* after.list({ clusterId })
      assert.deepStrictEqual(new Map(listed.map((affiliate) => [affiliate.id, affiliate.data[0]!])), acknowledged)
      assert.strictEqual(acknowledged.size, 8)
      for (const value of acknowledged.values()) assert.isAtLeast(value, 200)
      assert.strictEqual(
        watchers.filter((fiber) => fiber.pollUnsafe() === undefined).length,
        watchers.length - victim.watches
      )
      // the dead thread's connections were given back: once every client has gone, none is counted
      yield* Fiber.interruptAll(watchers)
      yield* Scope.close(clients, Exit.void)
      yield* until(() => connections.total === 0, "every connection to be counted out")
    }).pipe(Effect.provide(TestDiscovery.layer()), Effect.scoped)
  )

  it.effect("waits longer and longer to start a thread that keeps crashing, and less once one ran a while", () =>
    Effect.gen(function* () {
      // the thread is real, the waits between its starts are on the TestClock
      const threads = yield* IoThreads.make({
        threads: 1,
        entry: threadEntry,
        argv: ["--crash-after-listening=400"],
        addresses: ["127.0.0.1:0"],
        connections: new ConnectionCounts(1000, 1000),
        stopTimeout: "2 seconds",
        restartDelay: "100 millis",
        healthyRun: "10 seconds"
      }).pipe(Effect.orDie)
      const dead = () => realUntil(() => threads.threads().length === 0, "the thread to die")
      /** The thread is not started again until `millis` have passed on the clock since it died. */
      const restartedAfter = (millis: number) =>
        Effect.gen(function* () {
          const before = threads.restarts()
          yield* dead()
          yield* TestClock.adjust(millis - 1)
          yield* realSleep(1000)
          assert.strictEqual(threads.restarts(), before, `started again before ${millis} ms`)
          yield* TestClock.adjust(1)
          yield* realUntil(() => threads.restarts() === before + 1, "the thread to be started again")
        })
      yield* restartedAfter(100)
      yield* restartedAfter(200)
      yield* restartedAfter(400)
      // this one runs 10 s (on the clock) before it dies: the wait is back to the first
      yield* TestClock.adjust("10 seconds")
      yield* restartedAfter(100)
      yield* restartedAfter(200)
    }).pipe(Effect.provide(TestDiscovery.layer()), Effect.scoped)
  )

  it.live(
    "ends a thread that stopped reading before what waits for it passes the bound, and serves its clients again",
    () =>
      Effect.gen(function* () {
        const stallFile = join(mkdtempSync(join(tmpdir(), "stall-")), "now")
        const maxUnreadBytes = 1024 * 1024
        const threads = yield* twoThreads({
          argv: [`--stall-when=${stallFile}`],
          stallTimeout: "60 seconds",
          maxUnreadBytes
        })
        const owner = yield* ClusterApi
        const clusters = Array.from({ length: 10 }, (_, i) => `stalled-${i}`)
        const clients = yield* Scope.make()
        const watchers: Array<Fiber.Fiber<void, unknown>> = []
        // 1000 watches over 40 connections: both threads carry some
        for (let c = 0; c < 40; c++) {
          const api = yield* clientOf(threads.port).pipe(Scope.provide(clients))
          for (let w = 0; w < 25; w++) {
            watchers.push(yield* Effect.forkScoped(Stream.runDrain(api.watch({ clusterId: clusters[w % 10]! }))))
          }
        }
        yield* until(() => totalWatches(threads) === 1000, "1000 watches to open")
        const before = new Map(threads.threads().map((thread) => [thread.index, thread.watches]))
        assert.isTrue([...before.values()].every((watches) => watches > 0))
        let written = 0
        let mostUnread = 0
        const writer = yield* Effect.forkScoped(
          Effect.forever(
            Effect.suspend(() =>
              Effect.andThen(
                owner.affiliateUpdate({
                  clusterId: clusters[written % 10]!,
                  affiliateId: "writer",
                  data: new Uint8Array(2000).fill(written++ & 255),
                  endpoints: [],
                  ttl: Duration.minutes(10)
                }),
                Effect.sleep("5 millis")
              )
            )
          )
        )
        const meter = yield* Effect.forkScoped(
          Effect.forever(
            Effect.andThen(
              Effect.sync(() => {
                for (const thread of threads.threads()) mostUnread = Math.max(mostUnread, thread.unread.bytes)
              }),
              Effect.sleep("5 millis")
            )
          )
        )
        writeFileSync(stallFile, "")
        yield* until(() => threads.stalls() === 1, "the stalled thread to be ended")
        // its watches end (UNAVAILABLE); the other thread's stay open
        const ended = () => watchers.filter((fiber) => fiber.pollUnsafe() !== undefined)
        yield* until(() => [...before.values()].includes(ended().length), "the stalled thread's watches to end")
        for (const fiber of ended()) {
          const exit = fiber.pollUnsafe()!
          const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.findErrorOption(exit.cause)) : undefined
          assert.strictEqual((error as { readonly _tag?: string } | undefined)?._tag, "Unavailable")
        }
        // a new thread serves in its place, and new clients are served (as a client does, after a retry)
        yield* until(() => threads.restarts() === 1 && threads.threads().length === 2, "a new thread")
        yield* Fiber.interrupt(writer)
        yield* Fiber.interrupt(meter)
        const fresh = yield* Effect.forEach(Array.from({ length: 20 }), () => clientOf(threads.port))
        const lists = yield* Effect.forEach(fresh, (api) =>
          api
            .list({ clusterId: clusters[0]! })
            .pipe(Effect.retry({ schedule: Schedule.spaced("50 millis"), times: 40 }))
        )
        for (const listed of lists) assert.strictEqual(listed.length, 1)
        // what waited for the stalled thread never passed the bound by more than one batch of 1000 watches
        assert.isAtMost(mostUnread, maxUnreadBytes + 64 * 1024)
        yield* Fiber.interruptAll(watchers)
        yield* Scope.close(clients, Exit.void)
      }).pipe(Effect.provide(TestDiscovery.layer()), Effect.scoped)
  )

  it.live("ends a thread that stalls with nothing to do, seen by its heartbeat", () =>
    Effect.gen(function* () {
      const stallFile = join(mkdtempSync(join(tmpdir(), "stall-")), "now")
      const threads = yield* twoThreads({ argv: [`--stall-when=${stallFile}`], stallTimeout: "1 second" })
      writeFileSync(stallFile, "")
      yield* until(() => threads.stalls() === 1, "the idle stalled thread to be ended")
      yield* until(() => threads.restarts() === 1 && threads.threads().length === 2, "a new thread")
      const api = yield* clientOf(threads.port)
      yield* api.hello({ clusterId: "after-stall", clientVersion: "v1.8.0" })
    }).pipe(Effect.provide(TestDiscovery.layer()), Effect.scoped)
  )

  it.live("starts with no thread and adds and removes them on demand; a removed one drains", () =>
    Effect.gen(function* () {
      const address = yield* IoThreads.firstFreeAddress(["127.0.0.1:0"]).pipe(Effect.orDie)
      const threads = yield* twoThreads({ threads: 0, maxThreads: 2, addresses: [address] })
      assert.strictEqual(threads.threads().length, 0)
      yield* threads.add.pipe(Effect.orDie)
      yield* threads.add.pipe(Effect.orDie)
      assert.isTrue(Exit.isFailure(yield* Effect.exit(threads.add)), "no more than the most")
      assert.deepStrictEqual(
        threads
          .threads()
          .map((thread) => thread.index)
          .sort(),
        [0, 1]
      )
      const watchers: Array<Fiber.Fiber<void, unknown>> = []
      for (let i = 0; i < 64 && (i < 4 || threads.threads().some((thread) => thread.watches === 0)); i++) {
        const api = yield* clientOf(threads.port)
        watchers.push(yield* Effect.forkScoped(Stream.runDrain(api.watch({ clusterId: "on-demand" }))))
        yield* until(() => totalWatches(threads) === watchers.length, "the watch to open")
      }
      const onLast = threads.threads().find((thread) => thread.index === 1)!.watches
      yield* threads.remove
      assert.deepStrictEqual(
        threads.threads().map((thread) => thread.index),
        [0]
      )
      yield* until(
        () => watchers.filter((fiber) => fiber.pollUnsafe() !== undefined).length === onLast,
        "the removed thread's watches to end"
      )
      // it is not started again (longer than a restart takes), and the one left serves
      for (let i = 0; i < 20; i++) {
        yield* Effect.sleep("100 millis")
        assert.deepStrictEqual(
          threads.threads().map((thread) => thread.index),
          [0]
        )
        assert.strictEqual(threads.workers(), 1)
      }
      assert.strictEqual(threads.restarts(), 0)
      const api = yield* clientOf(threads.port)
      yield* api.hello({ clusterId: "on-demand", clientVersion: "v1.8.0" })
      yield* Fiber.interruptAll(watchers)
    }).pipe(Effect.provide(TestDiscovery.layer()), Effect.scoped)
  )
})
