/**
 * The owner's side of the I/O threads: the thread that holds the state
 * starts worker threads that each run the gRPC listeners on the same port
 * (SO_REUSEPORT: the kernel spreads connections over them, and over the
 * owner's own listener when it serves the port too) and reach the state
 * through `ClusterApi` over a `MessagePort` (`ClusterApiHost`), so
 * every change is applied here, in one place, with the atomicity, limits,
 * revisions and order of a single thread. What must stay global is kept
 * here or shared: the rate limiter's buckets (the threads reserve tokens
 * from the owner), the connection caps (counts in shared memory), the
 * metrics (`refreshMetrics` sums the threads' series into this thread's
 * registry). A thread that dies is started again; its clients reconnect.
 * Stopping asks every thread to drain and waits for all of them.
 *
 * @since 0.1.0
 */
import { createServer } from "node:net"
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from "node:worker_threads"
import { Clock, Context, Deferred, Duration, Effect, Exit, Fiber, Schema, Scope } from "effect"
import { ClusterApi } from "../ports/ClusterApi.ts"
import { parseAddress } from "../adapters/grpc/http2/Http2Server.ts"
import type { ConnectionCounts } from "../adapters/grpc/http2/ConnectionCounts.ts"
import type { SharedRequestBudget } from "../adapters/grpc/http2/RequestBudget.ts"
import { MergedMetrics, type WireSeries } from "../adapters/http/MergedMetrics.ts"
import * as ClusterApiHost from "../adapters/message-port/ClusterApiHost.ts"
import type { OwnerMessage, ThreadData, ThreadMessage } from "./ioThreadControl.ts"
import { deltaCodec, threadKind } from "./ioThreadControl.ts"
import { type Backlog, progressCell, ThreadProgress } from "./ThreadProgress.ts"

/**
 * How the threads are started.
 *
 * @category models
 * @since 0.1.0
 */
export interface IoThreadsOptions {
  /** How many threads to start with (0: none until `add`; then `addresses` must name the port). */
  readonly threads: number
  /** The most threads `add` brings it to (default `threads`). */
  readonly maxThreads?: number | undefined
  /** The module each thread runs (or its code, inside a single executable); it calls `IoThread.run`. */
  readonly entry: string | URL | { readonly code: string }
  /** The command line arguments each thread sees as its `process.argv.slice(2)`. */
  readonly argv?: ReadonlyArray<string> | undefined
  /** The listen addresses the first thread tries, in order; the others then listen where it did. */
  readonly addresses: ReadonlyArray<string>
  /**
   * The connection caps of all threads (and of the main thread, when it
   * serves the port too): threads ask them for each connection; a thread that
   * is gone gives its connections back.
   */
  readonly connections: ConnectionCounts
  /** The rate limiter whose buckets the threads' calls take tokens from. */
  readonly limiter?: ClusterApiHost.HostOptions["limiter"]
  /** The state's counts, for the threads' landing pages. */
  readonly stats?: ClusterApiHost.HostOptions["stats"]
  /** A cluster's last changes, for the threads' inspect pages. */
  readonly history?: ClusterApiHost.HostOptions["history"]
  /** The live view's frames, for the threads' landing pages. */
  readonly live?: ClusterApiHost.HostOptions["live"]
  /**
   * The request budget all threads share (the main thread's server is its
   * holder 0, thread `index` its holder `index + 1`); a thread that is gone
   * gives back what it held.
   */
  readonly requestBudget?: SharedRequestBudget | undefined
  /** Series of this thread's own gRPC server (in a registry of its own), summed with the threads' at each scrape. */
  readonly ownSeries?: (() => ReadonlyArray<WireSeries>) | undefined
  /** How long a thread may drain before it is terminated (default 5 seconds). */
  readonly stopTimeout?: Duration.Input | undefined
  /**
   * The wait before a thread that died is started again (default 200 ms); it
   * doubles (up to 30 s) while threads keep dying within `healthyRun` of
   * their start, and comes back to this once one has run that long.
   */
  readonly restartDelay?: Duration.Input | undefined
  /** How long a thread must run before its death is no longer taken for a crash loop (default 10 seconds). */
  readonly healthyRun?: Duration.Input | undefined
  /**
   * How long a batch posted to a thread may wait unread before the thread is
   * taken for stalled (default 10 seconds): its watches end, it is terminated
   * and a new one started. An idle thread is sent a heartbeat each second,
   * so a stall is seen without traffic too.
   */
  readonly stallTimeout?: Duration.Input | undefined
  /**
   * How many bytes posted to a thread may wait unread, the oldest for a
   * second or more, before it is taken for stalled (default 64 MiB).
   */
  readonly maxUnreadBytes?: number | undefined
}

/**
 * No thread could listen, or a thread failed to start.
 *
 * @category errors
 * @since 0.1.0
 */
export class IoThreadError extends Schema.TaggedError<IoThreadError>()("IoThreadError", {
  message: Schema.String
}) {}

/**
 * One running thread, as the owner sees it.
 *
 * @category models
 * @since 0.1.0
 */
export interface ThreadInfo {
  readonly index: number
  readonly threadId: number
  /** The watches it has open through the owner now. */
  readonly watches: number
  /** The connections it holds now. */
  readonly connections: number
  /** The bytes of requests it holds now (its part of the shared budget), when there is one. */
  readonly requestBytes: number | undefined
  /** What the owner posted to it that it has not read yet. */
  readonly unread: Backlog
}

/**
 * The running I/O threads.
 *
 * @category services
 * @since 0.1.0
 */
export class IoThreads extends Context.Service<
  IoThreads,
  {
    /** Where the threads listen. */
    readonly address: string
    readonly port: number
    /** The threads running now. */
    readonly threads: () => ReadonlyArray<ThreadInfo>
    /** Threads started again after they died, so far. */
    readonly restarts: () => number
    /** Threads terminated because they stalled, so far. */
    readonly stalls: () => number
    /** The threads kept running: those running, those waiting to be started again, and those being added. */
    readonly workers: () => number
    /** Starts one more thread, up to `maxThreads`. */
    readonly add: Effect.Effect<void, IoThreadError>
    /** Stops the thread started last, if any: it drains and is not started again. */
    readonly remove: Effect.Effect<void>
    /** Reads every thread's metrics into this thread's registry; `/metrics` runs it before each scrape. */
    readonly refreshMetrics: Effect.Effect<void>
    /** Ends thread `index` at once, as a crash would (for fault tests). */
    readonly terminate: (index: number) => Effect.Effect<void>
  }
>()("talos-discovery/cli/IoThreads") {}

/** A thread with the host that serves it. */
interface Running {
  readonly index: number
  readonly source: number
  readonly worker: Worker
  readonly control: MessagePort
  readonly host: ClusterApiHost.Host
  readonly scope: Scope.Closeable
  readonly exited: Deferred.Deferred<number>
  readonly metricsWaiting: Map<number, (message: ThreadMessage) => void>
  readonly progress: ThreadProgress
  /** Why the owner ended it, when it did. */
  stalled: string | undefined
  /** Handles what the thread posted and nobody read yet, then closes the control channel. */
  closeControl: () => void
}

const metricsTimeoutMillis = 1000

/** How long a thread may leave a batch unread past the bound on unread bytes (a burst), in milliseconds. */
const burstMillis = 1000

/** How often the owner looks at what each thread has read, in milliseconds. */
const watchdogIntervalMillis = 1000

/** The longest wait between attempts to start a thread again. */
const maxRestartDelay = Duration.seconds(30)

/** The metric source of the owner's own gRPC server (the threads' are numbered from 0). */
const ownSource = -1

/**
 * `address` with `port` for its port (the one bound for port 0).
 *
 * @category constructors
 * @since 0.1.0
 */
export const withPort = (address: string, port: number): string => {
  const host = parseAddress(address)?.host ?? ""
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`
}

/**
 * Binds `address` without SO_REUSEPORT and lets it go: it fails when any
 * socket holds the port, with or without the option. Gives the address with
 * the port bound (the one picked for port 0).
 */
const probe = (address: string): Effect.Effect<string, IoThreadError> =>
  Effect.callback<string, IoThreadError>((resume) => {
    const parsed = parseAddress(address)
    if (parsed === undefined) {
      resume(Effect.fail(new IoThreadError({ message: `invalid address ${JSON.stringify(address)}` })))
      return
    }
    const server = createServer()
    server.once("error", (error) => resume(Effect.fail(new IoThreadError({ message: `${address}: ${error.message}` }))))
    server.listen({ host: parsed.host === "" ? undefined : parsed.host, port: parsed.port, exclusive: true }, () => {
      const bound = server.address()
      const port = typeof bound === "object" && bound !== null ? bound.port : parsed.port
      server.close(() => resume(Effect.succeed(withPort(address, port))))
    })
  })

/**
 * The first of `addresses` that binds without SO_REUSEPORT, with its port
 * (the one picked for port 0), or the last failure. It fails when any
 * socket holds the port, with or without the option, so threads that then
 * listen there with the option share it with no other process.
 *
 * @category constructors
 * @since 0.1.0
 */
export const firstFreeAddress = (addresses: ReadonlyArray<string>): Effect.Effect<string, IoThreadError> =>
  addresses.slice(1).reduce((found, address) => Effect.catch(found, () => probe(address)), probe(addresses[0] ?? ""))

/**
 * Starts the threads (the first one alone, to learn the port), keeps them
 * running, and stops them all when the scope closes: each drains its calls,
 * then the owner closes their ports.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (
  options: IoThreadsOptions
): Effect.Effect<IoThreads["Service"], IoThreadError, ClusterApi | Scope.Scope> =>
  Effect.gen(function* () {
    const api = yield* ClusterApi
    const outer = yield* Effect.scope
    const context = yield* Effect.context<never>()
    const runFork = Effect.runForkWith(Context.omit(Scope.Scope)(context))
    const counts = options.connections
    const metrics = yield* Effect.acquireRelease(
      Effect.sync(() => new MergedMetrics(Context.omit(Scope.Scope)(context))),
      (merged) => Effect.sync(() => merged.close())
    )
    const stopTimeout = Duration.fromInputUnsafe(options.stopTimeout ?? "5 seconds")
    const restartDelay = Duration.fromInputUnsafe(options.restartDelay ?? "200 millis")
    const healthyRun = Duration.toMillis(Duration.fromInputUnsafe(options.healthyRun ?? "10 seconds"))
    const stallTimeout = Duration.toMillis(Duration.fromInputUnsafe(options.stallTimeout ?? "10 seconds"))
    const maxUnreadBytes = options.maxUnreadBytes ?? 64 * 1024 * 1024
    let stalls = 0
    const running = new Map<number, Running>()
    let stopping = false
    let restarts = 0
    let sources = 0
    let metricsRequests = 0

    /** Starts thread `index` on `addresses` and waits until it listens. */
    const start = (index: number, addresses: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const scope = yield* Scope.fork(threadScopes)
        const apiChannel = new MessageChannel()
        const controlChannel = new MessageChannel()
        const cell = progressCell()
        const progress = new ThreadProgress(cell, performance.now())
        let thread: Running | undefined
        const host = yield* ClusterApiHost.serve(api, apiChannel.port1, {
          limiter: options.limiter,
          stats: options.stats,
          history: options.history,
          live: options.live,
          codec: deltaCodec,
          onPosted: (bytes) => {
            const now = performance.now()
            progress.posted(bytes, now)
            if (thread !== undefined && thread.stalled === undefined) {
              const unread = progress.backlog(now)
              // a burst (a reconnect storm's snapshots) may pass the bound for a moment; a thread that reads does not stay there
              if (unread.bytes > maxUnreadBytes && unread.oldestMillis >= burstMillis) {
                endStalled(thread, `${unread.bytes} bytes unread, the oldest for ${Math.round(unread.oldestMillis)} ms`)
              }
            }
          }
        }).pipe(Scope.provide(scope))
        const data: ThreadData = {
          kind: threadKind,
          index,
          api: apiChannel.port2,
          control: controlChannel.port2,
          addresses,
          requestBudget: options.requestBudget?.buffer,
          progress: cell
        }
        const entry = options.entry
        const worker = new Worker(typeof entry === "object" && "code" in entry ? entry.code : entry, {
          eval: typeof entry === "object" && "code" in entry,
          argv: [...(options.argv ?? [])],
          workerData: data,
          transferList: [apiChannel.port2, controlChannel.port2]
        })
        const exited = yield* Deferred.make<number>()
        const source = sources++
        // whatever way the thread ends, the connections and request bytes it held are given back with its scope
        yield* Scope.addFinalizer(
          scope,
          Effect.sync(() => {
            counts.releaseAll(source)
            options.requestBudget?.reclaim(index + 1)
          })
        )
        thread = {
          index,
          source,
          worker,
          control: controlChannel.port1,
          host,
          scope,
          exited,
          metricsWaiting: new Map(),
          progress,
          stalled: undefined,
          closeControl: () => undefined
        }
        const started: Running = thread
        const listening = yield* Effect.callback<{ address: string; port: number }, IoThreadError>((resume) => {
          const onMessage = (message: ThreadMessage) => {
            if (message.type === "listening") resume(Effect.succeed(message))
            else if (message.type === "failed") resume(Effect.fail(new IoThreadError({ message: message.message })))
            else if (message.type === "admit") {
              const admitted: OwnerMessage = {
                type: "admitted",
                id: message.id,
                ok: counts.tryAcquire(started.source, message.address)
              }
              started.control.postMessage(admitted)
            } else if (message.type === "disconnect") counts.release(started.source, message.address)
            else if (message.id === 0) {
              if (message.type === "metrics") metrics.update(started.source, message.series)
            } else started.metricsWaiting.get(message.id)?.(message)
          }
          started.control.on("message", onMessage)
          // what the thread posted before it ended (its last metrics, connections it gave back) is read before its end of the channel closes
          started.closeControl = () => {
            for (let left = receiveMessageOnPort(started.control); left !== undefined; ) {
              onMessage(left.message as ThreadMessage)
              left = receiveMessageOnPort(started.control)
            }
            started.control.close()
          }
          worker.on("error", (error) => resume(Effect.fail(new IoThreadError({ message: error.message }))))
          worker.on("exit", (code) => {
            resume(Effect.fail(new IoThreadError({ message: `I/O thread ${index} exited with code ${code}` })))
            Deferred.doneUnsafe(exited, Effect.succeed(code))
          })
        }).pipe(
          Effect.onError(() =>
            Effect.andThen(
              Effect.promise(() => worker.terminate()),
              Effect.andThen(
                Effect.sync(() => started.closeControl()),
                Scope.close(scope, Exit.void)
              )
            )
          )
        )
        running.set(index, started)
        return { thread: started, listening }
      })

    /**
     * Ends a thread that stopped reading what the owner posts: it is
     * terminated at once (a thread stuck in a loop answers nothing else), and
     * its supervisor closes its host (its watches end, their places under
     * the caps come back, its connections close and clients reconnect to the
     * other threads) and starts a new one.
     */
    const endStalled = (thread: Running, why: string) => {
      thread.stalled = why
      stalls++
      runFork(
        Effect.logError("I/O thread stalled; terminating it").pipe(
          Effect.annotateLogs({ thread: thread.index, reason: why }),
          Effect.andThen(Effect.promise(() => thread.worker.terminate()))
        )
      )
    }

    /**
     * Each second: a thread that leaves a batch unread too long is ended; an
     * idle one gets a heartbeat. On the real clock, as the threads run,
     * whatever clock the service's own work is on.
     */
    const watchdog = () => {
      const now = performance.now()
      for (const thread of running.values()) {
        if (thread.stalled !== undefined) continue
        const unread = thread.progress.backlog(now)
        if (unread.oldestMillis > stallTimeout) {
          endStalled(thread, `a batch unread for ${Math.round(unread.oldestMillis)} ms (${unread.bytes} bytes unread)`)
        } else if (unread.batches === 0 && now - thread.progress.lastPostAt >= watchdogIntervalMillis) {
          thread.host.heartbeat()
        }
      }
    }

    /** Asks `thread` to drain, and terminates it if it has not ended after the stop timeout. */
    const stop = (thread: Running) =>
      Effect.gen(function* () {
        // the watches it lets go of while it drains end with the instance, or with this thread alone
        thread.host.leaving(stopping ? "shutdown" : "thread_stopped")
        const message: OwnerMessage = { type: "stop" }
        thread.control.postMessage(message)
        const ended = yield* Deferred.await(thread.exited).pipe(Effect.timeoutOption(stopTimeout))
        if (ended._tag === "None") yield* Effect.promise(() => thread.worker.terminate())
        thread.closeControl()
        yield* Scope.close(thread.scope, Exit.void)
      })

    /**
     * Keeps thread `index` running: when it dies, its watches end and a new
     * one listens where it did, after a wait that grows while threads keep
     * dying soon after they start (a crash loop costs a start's CPU and a log
     * line each time) and comes back to `restartDelay` once one ran for
     * `healthyRun`.
     */
    const supervise = (first: Running, address: string): Effect.Effect<never> =>
      Effect.gen(function* () {
        let thread = first
        let startedAt = yield* Clock.currentTimeMillis
        let backoff = restartDelay
        while (true) {
          const code = yield* Deferred.await(thread.exited)
          if (stopping) return yield* Effect.never
          running.delete(thread.index)
          thread.closeControl()
          yield* Scope.close(thread.scope, Exit.void)
          metrics.retire(thread.source)
          const lived = (yield* Clock.currentTimeMillis) - startedAt
          let delay = lived >= healthyRun ? restartDelay : backoff
          yield* Effect.logError("I/O thread died; starting it again").pipe(
            Effect.annotateLogs({
              thread: thread.index,
              exit_code: code,
              ...(thread.stalled === undefined ? {} : { stalled: thread.stalled }),
              ran_ms: lived,
              restart_in: Duration.format(delay)
            })
          )
          // a thread that cannot be started is tried again, less and less often
          while (true) {
            yield* Effect.sleep(delay)
            const restarted = yield* Effect.exit(start(thread.index, [address]))
            if (restarted._tag === "Success") {
              startedAt = yield* Clock.currentTimeMillis
              thread = restarted.value.thread
              restarts++
              break
            }
            delay = Duration.min(Duration.times(delay, 2), maxRestartDelay)
            yield* Effect.logError("I/O thread could not be started again").pipe(
              Effect.annotateLogs({
                thread: thread.index,
                cause: String(restarted.cause),
                retry_in: Duration.format(delay)
              })
            )
          }
          backoff = Duration.min(Duration.times(delay, 2), maxRestartDelay)
        }
      })

    const supervisors = new Map<number, Fiber.Fiber<never>>()
    // the threads' scopes (each holds its port to the state) close after the threads have stopped
    const threadScopes = yield* Scope.fork(outer)
    // registered before any thread starts, so threads already started are stopped when a later one fails to start
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopping = true
        yield* Fiber.interruptAll([...supervisors.values()])
        yield* Effect.forEach([...running.values()], stop, { concurrency: "unbounded", discard: true })
        running.clear()
      })
    )
    const maxThreads = options.maxThreads ?? options.threads
    /** The indexes of the threads `add` is starting. */
    const starting = new Set<number>()
    const supervised = (started: { readonly thread: Running }, address: string) =>
      Effect.map(Effect.forkIn(supervise(started.thread, address), outer), (fiber) => {
        supervisors.set(started.thread.index, fiber)
      })
    let where: string
    if (options.threads > 0) {
      const first = yield* start(0, options.addresses)
      where = withPort(first.listening.address, first.listening.port)
      const others = yield* Effect.forEach(
        Array.from({ length: options.threads - 1 }, (_, i) => i + 1),
        (index) => start(index, [where]),
        { concurrency: "unbounded" }
      )
      for (const started of [first, ...others]) yield* supervised(started, where)
    } else where = options.addresses[0] ?? ""

    /** Starts one more thread where the others listen, up to the most; not once stopping. */
    const add = Effect.suspend(() => {
      if (stopping) return Effect.fail(new IoThreadError({ message: "the threads are stopping" }))
      if (supervisors.size + starting.size >= maxThreads) {
        return Effect.fail(new IoThreadError({ message: `${maxThreads} threads already` }))
      }
      let index = 0
      while (supervisors.has(index) || starting.has(index)) index++
      // its place is taken while it starts, so a second add at once takes another
      starting.add(index)
      return start(index, [where]).pipe(
        Effect.flatMap((started) => (stopping ? stop(started.thread) : supervised(started, where))),
        Effect.ensuring(Effect.sync(() => starting.delete(index)))
      )
    })

    /** Stops the thread started last: it drains (its watches end, its clients reconnect) and is not started again. */
    const remove = Effect.suspend(() => {
      const index = Math.max(-1, ...supervisors.keys())
      const supervisor = supervisors.get(index)
      if (supervisor === undefined) return Effect.void
      supervisors.delete(index)
      return Effect.gen(function* () {
        yield* Fiber.interrupt(supervisor)
        const thread = running.get(index)
        if (thread === undefined) return
        yield* stop(thread)
        running.delete(index)
        metrics.retire(thread.source)
      })
    })
    const watching = setInterval(watchdog, watchdogIntervalMillis)
    watching.unref()
    yield* Scope.addFinalizer(
      outer,
      Effect.sync(() => clearInterval(watching))
    )

    const askMetrics = (thread: Running) =>
      Effect.callback<void>((resume) => {
        const id = ++metricsRequests
        const timer = setTimeout(() => {
          thread.metricsWaiting.delete(id)
          resume(Effect.void)
        }, metricsTimeoutMillis)
        thread.metricsWaiting.set(id, (message) => {
          thread.metricsWaiting.delete(id)
          clearTimeout(timer)
          if (message.type === "metrics") metrics.update(thread.source, message.series)
          resume(Effect.void)
        })
        const request: OwnerMessage = { type: "metrics", id }
        thread.control.postMessage(request)
        return Effect.sync(() => {
          clearTimeout(timer)
          thread.metricsWaiting.delete(id)
        })
      })

    return IoThreads.of({
      address: where,
      port: parseAddress(where)?.port ?? 0,
      threads: () =>
        [...running.values()].map((thread) => ({
          index: thread.index,
          threadId: thread.worker.threadId,
          watches: thread.host.watches(),
          connections: counts.heldBy(thread.source),
          requestBytes: options.requestBudget?.reservedBy(thread.index + 1),
          unread: thread.progress.backlog(performance.now())
        })),
      restarts: () => restarts,
      stalls: () => stalls,
      workers: () => supervisors.size + starting.size,
      add,
      remove,
      refreshMetrics: Effect.suspend(() => {
        const own = options.ownSeries
        if (own !== undefined) metrics.update(ownSource, own())
        return Effect.forEach([...running.values()], askMetrics, { concurrency: "unbounded", discard: true })
      }),
      terminate: (index) =>
        Effect.suspend(() => {
          const thread = running.get(index)
          return thread === undefined ? Effect.void : Effect.promise(() => thread.worker.terminate())
        })
    })
  })
