/**
 * `ClusterApi` over a `MessagePort`, for a thread that does not hold the
 * state (a gRPC worker): each call is a message to the owner
 * (`ClusterApiHost.serve`) and its reply; a watch is pushed (`subscribe`), its
 * changes offered to the sink as they arrive, with the core's rule that a
 * sink that refuses one is cut off with a lost-update error. A change that
 * comes for several watches is read once and the same delta, which keeps
 * its encoded bytes, goes to each of them. If the port closes (the owner is
 * gone), calls waiting for an answer fail and watches end, with UNAVAILABLE.
 *
 * @since 0.1.0
 */
import type { MessagePort } from "node:worker_threads"
import type { Scope } from "effect"
import { Effect, type Fiber } from "effect"
import { CallDeadline } from "../../ports/CallDeadline.ts"
import type { StoreStats } from "../../core/server/ClusterStore.ts"
import { watchFromSubscribe } from "../../core/server/pushedWatch.ts"
import type { ChangeRecord } from "../../ports/ChangeCause.ts"
import type {
  AffiliateDeleteRequest,
  ClusterRequest,
  HelloRequest,
  WatchRequest,
  WatchSink,
  WatchStart
} from "../../ports/ClusterApi.ts"
import { ClusterApi } from "../../ports/ClusterApi.ts"
import { type DiscoveryError, lostUpdateMessage, SubscriptionLost, Unavailable } from "../../ports/DiscoveryError.ts"
import { ownBytes, toWireUpdate } from "./compact.ts"
import { Outbox } from "./Outbox.ts"
import {
  type DeltaCodec,
  fromWireError,
  type Reply,
  type Request,
  type TokenReservations,
  type UnaryOperation
} from "./protocol.ts"

/**
 * What the other side of the port offers: its `ClusterApi`, the token
 * reservations of its rate limiter, and the state's counts.
 *
 * @category models
 * @since 0.1.0
 */
export interface Connection {
  readonly api: ClusterApi["Service"]
  readonly limiter: TokenReservations
  /** The state's counts (when the host serves them). */
  readonly stats: Effect.Effect<StoreStats, DiscoveryError>
  /** A cluster's last changes (when the host serves them). */
  readonly history: (request: ClusterRequest) => Effect.Effect<ReadonlyArray<ChangeRecord>, DiscoveryError>
  /** The live view's frame after `since` (when the host serves it), as the host's `live` gives it. */
  readonly live: (since: number) => Effect.Effect<unknown, DiscoveryError>
}

const ownerGone = () => new Unavailable({ message: "state owner is gone" })

/** The deadline of the call `fiber` runs, when it has one. */
const deadlineOf = (fiber: Fiber.Fiber<unknown, unknown>): number | undefined => {
  const deadline = fiber.getRef(CallDeadline)
  return deadline === Number.POSITIVE_INFINITY ? undefined : deadline
}

/**
 * Connects to the host at the other end of `port`; the port is closed with
 * the scope. `codec` reads the deltas a host with the same codec encodes;
 * `handled` is told each time a batch of replies has been handled.
 *
 * @category constructors
 * @since 0.1.0
 */
export const connect = (
  port: MessagePort,
  codec?: Pick<DeltaCodec, "decode">,
  handled?: () => void
): Effect.Effect<Connection, never, Scope.Scope> =>
  Effect.gen(function* () {
    let nextId = 1
    let closed = false
    const pending = new Map<number, (reply: Reply | undefined) => void>()
    const outbox = new Outbox<Request>(port)
    const post = (request: Request) => outbox.push(request)
    const onReply = (reply: Reply) => {
      if ("ids" in reply) {
        if (codec === undefined) throw new Error("a delta arrived encoded, and this side of the port has no codec")
        const delta = codec.decode(reply.encoded)
        for (const id of reply.ids) pending.get(id)?.({ id, delta })
      } else pending.get(reply.id)?.(reply)
    }
    const onMessage = (batch: ReadonlyArray<Reply>) => {
      for (const reply of batch) onReply(reply)
      handled?.()
    }
    /** Everything waiting hears `undefined`: the owner is gone. */
    const onClose = () => {
      closed = true
      for (const listener of [...pending.values()]) listener(undefined)
      pending.clear()
    }
    port.on("message", onMessage)
    port.on("close", onClose)
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        port.off("message", onMessage)
        port.off("close", onClose)
        port.close()
      })
    )

    const request = <A>(
      make: (id: number, deadline: number | undefined) => Request,
      answer: (reply: Reply) => Effect.Effect<A, DiscoveryError> | undefined
    ): Effect.Effect<A, DiscoveryError> =>
      Effect.withFiber((fiber) =>
        Effect.callback<A, DiscoveryError>((resume) => {
          if (closed) {
            resume(Effect.fail(ownerGone()))
            return
          }
          const id = nextId++
          pending.set(id, (reply) => {
            pending.delete(id)
            if (reply === undefined) resume(Effect.fail(ownerGone()))
            else {
              const result = answer(reply)
              if (result !== undefined) resume(result)
            }
          })
          post(make(id, deadlineOf(fiber)))
          return Effect.sync(() => pending.delete(id))
        })
      )

    const answerOf = <A>(reply: Reply): Effect.Effect<A, DiscoveryError> | undefined => {
      if ("ok" in reply) return Effect.succeed(reply.ok as A)
      if ("error" in reply) return Effect.fail(fromWireError(reply.error))
      return undefined
    }

    const call =
      <A>(op: UnaryOperation, wire: (request: never) => unknown = (request) => request) =>
      (body: unknown): Effect.Effect<A, DiscoveryError> =>
        request((id, deadline) => ({ id, op, request: wire(body as never), deadline }), answerOf<A>)

    const subscribe = (
      watchRequest: WatchRequest,
      sink: WatchSink
    ): Effect.Effect<WatchStart, DiscoveryError, Scope.Scope> =>
      Effect.acquireRelease(
        Effect.withFiber((fiber) =>
          Effect.callback<{ readonly id: number; readonly start: WatchStart }, DiscoveryError>((resume) => {
            if (closed) {
              resume(Effect.fail(ownerGone()))
              return
            }
            const id = nextId++
            const cancel = () => {
              if (!pending.delete(id)) return
              post({ id, op: "cancel" })
            }
            let started = false
            pending.set(id, (reply) => {
              if (reply === undefined) {
                if (started) sink.end(ownerGone())
                else resume(Effect.fail(ownerGone()))
              } else if ("start" in reply) {
                started = true
                resume(Effect.succeed({ id, start: reply.start }))
              } else if ("delta" in reply) {
                if (!sink.offer(reply.delta)) {
                  cancel()
                  sink.end(new SubscriptionLost({ message: lostUpdateMessage }))
                }
              } else if ("end" in reply) {
                pending.delete(id)
                const error = fromWireError(reply.end) as SubscriptionLost | Unavailable
                if (started) sink.end(error)
                else resume(Effect.fail(error))
              } else if ("error" in reply) {
                pending.delete(id)
                resume(Effect.fail(fromWireError(reply.error)))
              }
            })
            post({ id, op: "watch", request: watchRequest, deadline: deadlineOf(fiber) })
            return Effect.sync(cancel)
          })
        ),
        ({ id }) =>
          Effect.sync(() => {
            if (pending.delete(id)) post({ id, op: "cancel" })
          })
      ).pipe(Effect.map(({ start }) => start))

    const api = ClusterApi.of({
      hello: call("hello", (request: HelloRequest) =>
        request.clientAddress === undefined ? request : { ...request, clientAddress: ownBytes(request.clientAddress) }
      ),
      affiliateUpdate: call("affiliateUpdate", toWireUpdate),
      affiliateDelete: call("affiliateDelete", (request: AffiliateDeleteRequest) =>
        request.clientAddress === undefined ? request : { ...request, clientAddress: ownBytes(request.clientAddress) }
      ),
      list: call("list"),
      watch: watchFromSubscribe(subscribe),
      subscribe
    })
    const limiter: Connection["limiter"] = {
      reserve: (key, timeoutMillis) =>
        Effect.callback<number>((resume) => {
          // a limiter that cannot be reached lets the call through: the call itself then fails UNAVAILABLE
          if (closed) {
            resume(Effect.succeed(0))
            return
          }
          const id = nextId++
          let abandoned = false
          pending.set(id, (reply) => {
            pending.delete(id)
            const wait = reply !== undefined && "ok" in reply ? (reply.ok as number) : 0
            // a call that stopped waiting for the answer gives back the token it was to wait for
            if (abandoned) {
              if (wait > 0) post({ id: 0, op: "release", key })
            } else resume(Effect.succeed(wait))
          })
          post({ id, op: "reserve", key, timeoutMillis })
          return Effect.sync(() => {
            abandoned = true
          })
        }),
      release: (key) => Effect.sync(() => post({ id: 0, op: "release", key }))
    }
    return {
      api,
      limiter,
      stats: call<StoreStats>("stats")(undefined),
      history: call<ReadonlyArray<ChangeRecord>>("history"),
      live: call<unknown>("live")
    }
  })

/**
 * The port's `ClusterApi` over `port`; the port is closed with the scope.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (port: MessagePort): Effect.Effect<ClusterApi["Service"], never, Scope.Scope> =>
  Effect.map(connect(port), (connection) => connection.api)
