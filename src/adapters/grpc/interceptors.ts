/**
 * The chain every call of the service goes through, as interceptors in the
 * Connect-ES sense: each adds its concern around the rest of the chain, and
 * the chain is an array, outermost first. The server's order is the
 * original's (PROTOCOL.md §3.2): the request log, the per-client rate
 * limiter, the metrics, then the handler; so a call the limiter refuses is
 * logged but not counted.
 *
 * An interceptor is hooks rather than a function of the inner effect: the
 * chain runs every `start` synchronously and every `end` from one exit hook,
 * so a call costs the same few Effect steps whatever the chain's length (a
 * wrapper per concern cost about 5 µs of CPU per call on the server).
 *
 * @since 0.1.0
 */
import * as grpc from "@grpc/grpc-js"
import { Cause, Effect, Exit } from "effect"
import { CallDeadline } from "../../ports/CallDeadline.ts"
import type { DiscoveryError } from "../../ports/DiscoveryError.ts"
import type { RpcInfo } from "./ClusterService.ts"
import type { DecodedRequest } from "./codec.ts"
import type { GrpcStatus } from "./status.ts"
import { fromCause } from "./status.ts"

/**
 * What the interceptors use of a call, on either transport.
 *
 * @category models
 * @since 0.1.0
 */
export interface Call {
  readonly cancelled: boolean
  readonly metadata: grpc.Metadata
  getPeer(): string
  getDeadline(): grpc.Deadline
  on(event: "cancelled", listener: () => void): unknown
}

/**
 * One call as the chain sees it: its RPC, the call, the decoded request and
 * the client's address (`undefined` when unknown).
 *
 * @category models
 * @since 0.1.0
 */
export interface CallContext {
  // biome-ignore lint/suspicious/noExplicitAny: the chain serves every RPC; each reads the request of its own.
  readonly rpc: RpcInfo<any>
  readonly call: Call
  readonly decoded: DecodedRequest<unknown>
  readonly address: Uint8Array | undefined
}

/**
 * One concern of the chain. When the call reaches it, `admit` runs (an
 * effect that must succeed before the rest of the chain: a wait, a
 * refusal), then `start` (synchronous; what it returns is handed to `end`);
 * once the call ended, `end` runs for every interceptor whose `start` ran,
 * innermost first, and may return an effect to run then (a log line).
 *
 * @category models
 * @since 0.1.0
 */
export interface Interceptor<S = unknown> {
  readonly name: string
  admit?(context: CallContext): Effect.Effect<void, DiscoveryError> | undefined
  start?(context: CallContext): S
  end?(context: CallContext, exit: Exit.Exit<unknown, DiscoveryError>, started: S): Effect.Effect<void> | undefined
}

/**
 * The effect of one call: `handler` inside `interceptors`, the first one
 * outermost. The hooks of the interceptors that admit at once run now, so
 * the effect is run once, for that call.
 *
 * @category constructors
 * @since 0.1.0
 */
export const intercept = <A>(
  interceptors: ReadonlyArray<Interceptor>,
  context: CallContext,
  handler: Effect.Effect<A, DiscoveryError>
): Effect.Effect<A, DiscoveryError> => {
  const count = interceptors.length
  if (count === 0) return handler
  const started: Array<unknown> = []
  const enterFrom = (first: number): Effect.Effect<A, DiscoveryError> => {
    for (let i = first; i < count; i++) {
      const interceptor = interceptors[i]!
      const admission = interceptor.admit?.(context)
      if (admission !== undefined)
        return Effect.andThen(
          admission,
          Effect.suspend(() => startFrom(i))
        )
      started.push(interceptor.start?.(context))
    }
    return handler
  }
  const startFrom = (i: number): Effect.Effect<A, DiscoveryError> => {
    started.push(interceptors[i]!.start?.(context))
    return enterFrom(i + 1)
  }
  return Effect.onExit(enterFrom(0), (exit) => {
    let after: Effect.Effect<void> | undefined
    for (let i = started.length - 1; i >= 0; i--) {
      const effect = interceptors[i]!.end?.(context, exit, started[i])
      if (effect !== undefined) after = after === undefined ? effect : Effect.andThen(after, effect)
    }
    return after ?? Effect.void
  })
}

/**
 * The server's chain in the original's order, leaving out the concerns
 * that are turned off.
 *
 * @category constructors
 * @since 0.1.0
 */
export const serverChain = (concerns: {
  readonly requestLog?: Interceptor | undefined
  readonly rateLimit?: Interceptor | undefined
  readonly metrics?: Interceptor | undefined
}): ReadonlyArray<Interceptor> =>
  [concerns.requestLog, concerns.rateLimit, concerns.metrics].filter(
    (interceptor): interceptor is Interceptor => interceptor !== undefined
  )

const ok: GrpcStatus = { code: grpc.status.OK, details: "" }
const cancelled: GrpcStatus = { code: grpc.status.CANCELLED, details: "call cancelled by the client" }

/**
 * The status a call ended with as the log and the metrics report it: a
 * client's cancel is OK for a Watch (that is how a watch ends) and CANCELLED
 * for a unary call; an interrupt without one is the server shutting down.
 *
 * @category constructors
 * @since 0.1.0
 */
export const statusOf = (exit: Exit.Exit<unknown, DiscoveryError>, context: CallContext): GrpcStatus => {
  if (Exit.isSuccess(exit)) return ok
  if (context.call.cancelled && Cause.hasInterruptsOnly(exit.cause)) return context.rpc.streaming ? ok : cancelled
  return fromCause(exit.cause)
}

/**
 * Milliseconds left until the call's deadline (real time), `Infinity` without one.
 *
 * @category constructors
 * @since 0.1.0
 */
export const timeLeft = (call: Call): number => {
  const at = deadlineOf(call)
  return at === Number.POSITIVE_INFINITY ? at : at - Date.now()
}

/** The call's deadline in milliseconds since the epoch, `Infinity` without one. */
const deadlineOf = (call: Call): number => {
  const deadline = call.getDeadline()
  return deadline instanceof Date ? deadline.getTime() : deadline
}

/**
 * `effect` told the call's deadline (`CallDeadline`) when it has one, so
 * that a `ClusterApi` that queues calls skips it once its caller has gone.
 *
 * @category combinators
 * @since 0.1.0
 */
export const withCallDeadline = <A, E, R>(call: Call, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const at = deadlineOf(call)
  return at === Number.POSITIVE_INFINITY ? effect : Effect.provideService(effect, CallDeadline, at)
}
