/**
 * The owner's side of `ClusterApi` over a `MessagePort`: answers the requests
 * that arrive on the port with the `ClusterApi` it holds (the core), and
 * relays each watch's start, changes and end. A watch's changes offered
 * before its start was posted wait for it, so the other side always sees the
 * start first. A change goes to the other side once, for all the watches
 * there that get it, encoded once for every port (with the `DeltaCodec`
 * given) in shared memory.
 *
 * @since 0.1.0
 */
import type { MessagePort } from "node:worker_threads"
import { Cause, Context, Deferred, Effect, Exit, Fiber, Scope } from "effect"
import type { ChangeRecord, WatchEndCause } from "../../ports/ChangeCause.ts"
import { WatchLeaving } from "../../ports/WatchLeaving.ts"
import type { StoreStats } from "../../core/server/ClusterStore.ts"
import type { AffiliateView, ClusterApi, ClusterRequest, WatchDelta, WatchRequest } from "../../ports/ClusterApi.ts"
import type { DiscoveryError, SubscriptionLost, Unavailable } from "../../ports/DiscoveryError.ts"
import { fromWireUpdate, ownAffiliate, ownBytes, ownStart, type WireUpdate } from "./compact.ts"
import { Outbox } from "./Outbox.ts"
import {
  type DeltaCodec,
  type EncodedDelta,
  type Reply,
  type Request,
  type TokenReservations,
  expiredCall,
  toWireCause,
  toWireError
} from "./protocol.ts"

/**
 * What a host serves besides the `ClusterApi`.
 *
 * @category models
 * @since 0.1.0
 */
export interface HostOptions {
  /** The buckets of the rate limiter the other side's calls take tokens from (`reserve` and `release`). */
  readonly limiter?: TokenReservations | undefined
  /** Encodes each delta once for every port (the other side needs the same codec); without it deltas are cloned. */
  readonly codec?: DeltaCodec | undefined
  /** The state's counts, for the other side's landing page. */
  readonly stats?: Effect.Effect<StoreStats> | undefined
  /** A cluster's last changes, for the other side's inspect page. */
  readonly history?:
    | ((request: ClusterRequest) => Effect.Effect<ReadonlyArray<ChangeRecord>, DiscoveryError>)
    | undefined
  /** The live view's frame for a viewer that has seen the samples up to `since`, for the other side's landing page. */
  readonly live?: ((since: number) => Effect.Effect<unknown>) | undefined
  /** Told of each batch posted to the other side, with its approximate size in bytes. */
  readonly onPosted?: ((bytes: number) => void) | undefined
}

/** The last deltas encoded, for every port of this thread: each is encoded once however many ports relay it. */
const encodings = new WeakMap<WatchDelta, EncodedDelta>()

/** `delta`'s bytes in shared memory, encoded on first use. */
const sharedEncoding = (codec: DeltaCodec, delta: WatchDelta, epoch: string): EncodedDelta => {
  let encoded = encodings.get(delta)
  if (encoded === undefined) {
    const forms = codec.encode(delta, epoch)
    const bytes = new Uint8Array(new SharedArrayBuffer(forms.bytes.length))
    bytes.set(forms.bytes)
    encoded = { bytes, plainLength: forms.plainLength }
    encodings.set(delta, encoded)
  }
  return encoded
}

/** A delta on its way to the other side, with the watches there it is for. */
interface Grouped {
  readonly ids: Array<number>
  readonly encoded: EncodedDelta
}

/**
 * A running host.
 *
 * @category models
 * @since 0.1.0
 */
export interface Host {
  /** The watches it relays now. */
  readonly watches: () => number
  /** Posts a message that answers nothing, so that a side that reads nothing else still has something to read. */
  readonly heartbeat: () => void
  /**
   * Says why the watches that end from now on are ending, when the other
   * side is told to stop (the instance shuts down, or its thread is retired):
   * its server then lets go of them as if their clients had.
   */
  readonly leaving: (cause: WatchEndCause) => void
}

/** About how many bytes of the owner's memory an affiliate takes while it waits in the port. */
const affiliateBytes = (affiliate: AffiliateView): number => {
  let bytes = 64 + affiliate.id.length + affiliate.data.length
  for (const endpoint of affiliate.endpoints) bytes += 16 + endpoint.length
  return bytes
}

/** About how many bytes of the owner's memory `reply` takes while it waits in the port. */
const replyBytes = (reply: Reply): number => {
  if ("encoded" in reply) return 64 + reply.encoded.bytes.length
  if ("start" in reply) {
    let bytes = 64
    if (reply.start._tag === "Snapshot")
      for (const affiliate of reply.start.affiliates) bytes += affiliateBytes(affiliate)
    else
      for (const delta of reply.start.missed) bytes += delta._tag === "Updated" ? affiliateBytes(delta.affiliate) : 64
    return bytes
  }
  if ("delta" in reply) return reply.delta._tag === "Updated" ? affiliateBytes(reply.delta.affiliate) : 64
  return 64
}

/**
 * Serves `api` on `port` until the scope closes; then every watch it relays
 * ends and the port is closed.
 *
 * @category constructors
 * @since 0.1.0
 */
export const serve = (
  api: ClusterApi["Service"],
  port: MessagePort,
  options: HostOptions = {}
): Effect.Effect<Host, never, Scope.Scope> =>
  Effect.gen(function* () {
    const subscribe = api.subscribe
    if (subscribe === undefined) return yield* Effect.die(new Error("the served ClusterApi has no push-form watch"))
    const runFork = Effect.runForkWith(Context.omit(Scope.Scope)(yield* Effect.context<never>()))
    const watches = new Map<number, Fiber.Fiber<unknown, unknown>>()
    const grouped = new Map<WatchDelta, Grouped>()
    const onPosted = options.onPosted
    let batchBytes = 0
    const outbox = new Outbox<Reply>(port, () => {
      grouped.clear()
      onPosted?.(batchBytes)
      batchBytes = 0
    })
    const codec = options.codec
    const post =
      onPosted === undefined
        ? (reply: Reply) => outbox.push(reply)
        : (reply: Reply) => {
            batchBytes += replyBytes(reply)
            outbox.push(reply)
          }
    /** Answers request `id` with how its effect ended: a defect or an interruption is answered too. */
    const answer = (id: number) => (exit: Exit.Exit<unknown, DiscoveryError>) =>
      Effect.sync(() => post(Exit.isSuccess(exit) ? { id, ok: exit.value } : { id, error: toWireCause(exit.cause) }))

    /**
     * Sends `delta` to watch `id`: with the other watches of this turn that
     * get it, when it can be encoded; alone when `early` (a change held back
     * until the watch's start was posted must not join a group posted before
     * that start).
     */
    const relay = (id: number, delta: WatchDelta, epoch: string | undefined, early = false) => {
      if (codec === undefined || epoch === undefined || epoch === "") {
        post({ id, delta: delta._tag === "Updated" ? { ...delta, affiliate: ownAffiliate(delta.affiliate) } : delta })
        return
      }
      if (early) {
        post({ ids: [id], encoded: sharedEncoding(codec, delta, epoch) })
        return
      }
      let group = grouped.get(delta)
      if (group === undefined) {
        group = { ids: [], encoded: sharedEncoding(codec, delta, epoch) }
        grouped.set(delta, group)
        post(group)
      }
      group.ids.push(id)
    }

    const unary = (
      message: Extract<Request, { readonly request: unknown }>
    ): Effect.Effect<unknown, DiscoveryError> => {
      switch (message.op) {
        case "hello":
          return Effect.map(api.hello(message.request as Parameters<typeof api.hello>[0]), (response) =>
            response.clientIp === undefined ? response : { ...response, clientIp: ownBytes(response.clientIp) }
          )
        case "affiliateUpdate":
          return api.affiliateUpdate(fromWireUpdate(message.request as WireUpdate))
        case "affiliateDelete":
          return api.affiliateDelete(message.request as Parameters<typeof api.affiliateDelete>[0])
        case "list":
          return Effect.map(api.list(message.request as Parameters<typeof api.list>[0]), (affiliates) =>
            affiliates.map(ownAffiliate)
          )
        case "stats":
          return options.stats ?? Effect.die(new Error("this host serves no stats"))
        case "history":
          return options.history === undefined
            ? Effect.die(new Error("this host serves no history"))
            : options.history(message.request as ClusterRequest)
        case "live":
          return options.live === undefined
            ? Effect.die(new Error("this host serves no live view"))
            : options.live(message.request as number)
        default:
          return Effect.die(new Error(`not a unary operation: ${message.op}`))
      }
    }

    /** Relays watch `id` until the core ends it (then it is over here too) or it is cancelled. */
    const watch = (id: number, request: WatchRequest) => {
      let started = false
      return Effect.scoped(
        Effect.gen(function* () {
          let early: Array<WatchDelta> | undefined = []
          let endedEarly: SubscriptionLost | Unavailable | undefined
          let epoch: string | undefined
          const ended = yield* Deferred.make<void>()
          const start = yield* subscribe(request, {
            offer: (delta) => {
              if (early === undefined) relay(id, delta, epoch)
              else early.push(delta)
              return true
            },
            end: (error) => {
              // an end before the start was posted follows the start and the changes held back
              if (early === undefined) post({ id, end: toWireError(error) })
              else endedEarly = error
              Deferred.doneUnsafe(ended, Effect.void)
            }
          })
          epoch = start.epoch
          post({ id, start: ownStart(start) })
          started = true
          for (const delta of early ?? []) relay(id, delta, epoch, true)
          early = undefined
          if (endedEarly !== undefined) post({ id, end: toWireError(endedEarly) })
          return yield* Deferred.await(ended)
        })
      ).pipe(
        Effect.onExit((exit) =>
          // a watch that failed before its start is answered as a request, after it as the watch's end
          Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)
            ? Effect.void
            : Effect.sync(() =>
                post(started ? { id, end: toWireCause(exit.cause) } : { id, error: toWireCause(exit.cause) })
              )
        )
      )
    }

    const limiter = options.limiter
    /** Set when the host stops: the watches it ends then leave because the thread they served stopped. */
    let stopping = false
    /** Why the other side is stopping, once the owner has told it to. */
    let stoppingFor: WatchEndCause | undefined
    const leaving = (): WatchEndCause => stoppingFor ?? (stopping ? "thread_stopped" : "client_gone")

    const onRequest = (message: Request) => {
      if ("deadline" in message && message.deadline !== undefined && Date.now() >= message.deadline) {
        post({ id: message.id, error: expiredCall })
        return
      }
      switch (message.op) {
        case "cancel": {
          const fiber = watches.get(message.id)
          watches.delete(message.id)
          if (fiber !== undefined) runFork(Fiber.interrupt(fiber))
          return
        }
        case "watch": {
          const fiber = runFork(
            Effect.provideService(watch(message.id, message.request as WatchRequest), WatchLeaving, leaving)
          )
          watches.set(message.id, fiber)
          fiber.addObserver(() => watches.delete(message.id))
          return
        }
        case "reserve":
          // without a limiter every call may go at once
          if (limiter === undefined) post({ id: message.id, ok: 0 })
          else {
            const id = message.id
            runFork(Effect.map(limiter.reserve(message.key, message.timeoutMillis), (wait) => post({ id, ok: wait })))
          }
          return
        case "release":
          if (limiter !== undefined) runFork(limiter.release(message.key))
          return
        default:
          runFork(Effect.flatMap(Effect.exit(unary(message)), answer(message.id)))
      }
    }
    const onMessage = (batch: ReadonlyArray<Request>) => {
      for (const message of batch) onRequest(message)
    }

    port.on("message", onMessage)
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        stopping = true
        port.off("message", onMessage)
        for (const fiber of watches.values()) yield* Fiber.interrupt(fiber)
        watches.clear()
        port.close()
      })
    )
    return {
      watches: () => watches.size,
      heartbeat: () => outbox.push({ id: 0, ok: undefined }),
      leaving: (cause) => {
        stoppingFor = cause
      }
    }
  })
