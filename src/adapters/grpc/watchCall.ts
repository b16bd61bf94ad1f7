/**
 * The send path of a Watch call, in one place: the snapshot encoded into
 * messages of at most the snapshot budget, each delta encoded once for every
 * watcher that gets it, and the two ways of sending. A `ClusterApi` with the
 * push form (`subscribe`) hands deltas to a `CallSink` that the shared
 * `FanOut` writes, with no fiber per delta; one with only the Stream form
 * (`watch`) is pulled by one fiber that writes and waits for "drain". Either
 * way the call follows flow control, so a client that stops reading fills
 * its core buffer and is cut off instead of growing memory.
 *
 * @since 0.1.0
 */
import type { Exit } from "effect"
import { Effect, Stream } from "effect"
import type { WatchRequest as ProtoWatchRequest } from "../../gen/discovery/server/cluster_pb.ts"
import { Limits } from "../../core/server/limits.ts"
import type { ClusterApi, WatchDelta, WatchEvent, WatchRequest, WatchStart } from "../../ports/ClusterApi.ts"
import type { DiscoveryError, SubscriptionLost, Unavailable } from "../../ports/DiscoveryError.ts"
import type { DecodedRequest } from "./codec.ts"
import { encodeDelta, encodeResumed, encodeSnapshot } from "./codec.ts"
import { knownEncoding } from "./encodedDelta.ts"
import type { Call } from "./interceptors.ts"
import { SnapshotCache } from "./snapshotCache.ts"
import type { GrpcStatus } from "./status.ts"
import { fromCause } from "./status.ts"
import type { WritableCall } from "./watchSink.ts"
import { CallSink, FanOut } from "./watchSink.ts"

/**
 * A Watch call as its handler sees it, on either transport.
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchCall extends Call, WritableCall {
  readonly request: DecodedRequest<ProtoWatchRequest>
  end(): unknown
  emit(event: "error", status: GrpcStatus): unknown
  on(event: "cancelled" | "drain" | "close", listener: () => void): unknown
  off(event: "drain" | "close", listener: () => void): unknown
}

/**
 * Ends a Watch call as its effect ended: OK, or the failure's status.
 *
 * @category constructors
 * @since 0.1.0
 */
export const watchReply =
  (call: WatchCall) =>
  (exit: Exit.Exit<void, DiscoveryError>): void => {
    if (call.destroyed || call.writableEnded) return
    if (exit._tag === "Success") call.end()
    else call.emit("error", fromCause(exit.cause))
  }

const awaitDrain = (call: WatchCall): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    if (call.destroyed) {
      resume(Effect.interrupt)
      return
    }
    const cleanup = () => {
      call.off("drain", onDrain)
      call.off("close", onClose)
    }
    const onDrain = () => {
      cleanup()
      resume(Effect.void)
    }
    const onClose = () => {
      cleanup()
      resume(Effect.interrupt)
    }
    call.on("drain", onDrain)
    call.on("close", onClose)
    return Effect.sync(cleanup)
  })

/**
 * The Watch calls of one server: they share the fan-out and the encoded
 * bytes of each delta.
 *
 * @category models
 * @since 0.1.0
 */
export class WatchSender {
  private readonly snapshotBudget: number
  private readonly countSent: (messages: number) => void
  private readonly fanOut = new FanOut()
  /** Each delta's message as the original's, and with its epoch and revision (for clients that read them). */
  private readonly plain = new DeltaMessages()
  private readonly positioned = new DeltaMessages()
  /** Watchers that come back together get one encoding of their cluster's snapshot, in either form. */
  private readonly plainSnapshots = new SnapshotCache(8 * 1024 * 1024)
  private readonly positionedSnapshots = new SnapshotCache(8 * 1024 * 1024)

  /** `countSent` is told how many messages each write sent (the metrics' `grpc_server_msg_sent_total`). */
  constructor(snapshotBudget: number, countSent: (messages: number) => void) {
    this.snapshotBudget = snapshotBudget
    this.countSent = countSent
  }

  /**
   * A delta's message, encoded once for all watchers (they get it one after
   * another): with `epoch` (its watch's) and its revision, or as the
   * original's when `epoch` is undefined.
   */
  readonly encodeDelta = (delta: WatchDelta, epoch: string | undefined): Uint8Array =>
    epoch === undefined ? this.plain.of(delta, undefined) : this.positioned.of(delta, epoch)

  /**
   * Sends the watch of `request` on `call` until the call, the watch or the
   * scope ends; with `withRevisions`, every message carries its epoch and
   * revision, else it is the original's.
   */
  serve(
    api: ClusterApi["Service"],
    call: WatchCall,
    request: WatchRequest,
    withRevisions: boolean
  ): Effect.Effect<void, DiscoveryError> {
    const subscribe = api.subscribe
    if (subscribe !== undefined) return this.pushed(call, request, subscribe, withRevisions)
    let epoch: string | undefined
    return Stream.runForEach(api.watch(request), (event) => {
      if (event._tag === "Snapshot" || event._tag === "Resumed") epoch = event.epoch
      return this.send(call, this.messagesOf(request.clusterId, event, epoch, withRevisions))
    })
  }

  /** The messages of a watch's start: the snapshot's, or the resumed start and the changes it missed. */
  private startMessages(clusterId: string, start: WatchStart, withRevisions: boolean): ReadonlyArray<Uint8Array> {
    if (start._tag === "Snapshot") return this.messagesOf(clusterId, start, start.epoch, withRevisions)
    const messages = [encodeResumed(start)]
    for (const delta of start.missed) messages.push(this.encodeDelta(delta, start.epoch))
    return messages
  }

  /** An event's messages; `epoch` names the watch's revisions, and goes on the messages `withRevisions`. */
  private messagesOf(
    clusterId: string,
    event: WatchEvent,
    epoch: string | undefined,
    withRevisions: boolean
  ): ReadonlyArray<Uint8Array> {
    const written = withRevisions ? epoch : undefined
    switch (event._tag) {
      case "Snapshot": {
        const encode = () =>
          encodeSnapshot(
            event.affiliates,
            this.snapshotBudget,
            written === undefined ? undefined : { epoch: written, revision: event.revision }
          )
        if (epoch === undefined) return encode()
        const cache = withRevisions ? this.positionedSnapshots : this.plainSnapshots
        return cache.messages(clusterId, epoch, event.revision, encode)
      }
      case "Resumed":
        return [encodeResumed(event)]
      default:
        return [this.encodeDelta(event, written)]
    }
  }

  /** The pull form: one fiber writes each event and waits for "drain" when the call pushes back. */
  private send(call: WatchCall, messages: ReadonlyArray<Uint8Array>): Effect.Effect<void> {
    return Effect.suspend(() => {
      let ready = true
      for (const bytes of messages) ready = call.write(bytes)
      this.countSent(messages.length)
      return ready ? Effect.void : awaitDrain(call)
    })
  }

  /** The push form: the core hands deltas to a sink that the fan-out writes. */
  private pushed(
    call: WatchCall,
    request: WatchRequest,
    subscribe: NonNullable<ClusterApi["Service"]["subscribe"]>,
    withRevisions: boolean
  ): Effect.Effect<void, DiscoveryError> {
    return Effect.scoped(
      Effect.suspend(() => {
        const sink = new CallSink(call, this.fanOut, this.encodeDelta, this.countSent, Limits.watchBuffer)
        return Effect.andThen(
          Effect.tap(subscribe(request, sink), (start) =>
            Effect.sync(() =>
              sink.start(
                this.startMessages(request.clusterId, start, withRevisions),
                withRevisions ? start.epoch : undefined
              )
            )
          ),
          Effect.callback<void, SubscriptionLost | Unavailable>((resume) => {
            sink.whenEnded((error) => resume(Effect.fail(error)))
            // A call that ends on its own (a message it could not send) takes its watch with it.
            const closed = () => resume(Effect.void)
            call.on("close", closed)
            return Effect.sync(() => {
              call.off("close", closed)
              sink.close()
            })
          })
        )
      })
    )
  }
}

/**
 * The messages of deltas in one form, each made once: the last one is at
 * hand, the others weakly held. A delta belongs to one cluster, so its epoch
 * is always the same. A delta that came encoded from the owner of the state
 * (`encodedDelta.ts`) is not encoded again.
 */
class DeltaMessages {
  private readonly byDelta = new WeakMap<WatchDelta, Uint8Array>()
  private last: WatchDelta | undefined
  private lastBytes: Uint8Array = new Uint8Array(0)

  of(delta: WatchDelta, epoch: string | undefined): Uint8Array {
    if (delta === this.last) return this.lastBytes
    let bytes = this.byDelta.get(delta)
    if (bytes === undefined) {
      bytes = knownEncoding(delta, epoch) ?? encodeDelta(delta, epoch)
      this.byDelta.set(delta, bytes)
    }
    this.last = delta
    this.lastBytes = bytes
    return bytes
  }
}
