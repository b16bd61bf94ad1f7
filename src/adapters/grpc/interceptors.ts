/**
 * The chain every call of the service goes through, as interceptors in the
 * Connect-ES sense: each wraps the call's effect with its concern and hands
 * it on, and the chain is an array, outermost first. The server's order is
 * the original's (PROTOCOL.md §3.2): the request log, the per-client rate
 * limiter, the metrics, then the handler; so a call the limiter refuses is
 * logged but not counted.
 *
 * @since 0.1.0
 */
import * as grpc from "@grpc/grpc-js"
import type { Effect } from "effect"
import { Cause, Exit } from "effect"
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
 * One concern of the chain: wraps the effect of the rest of the chain.
 *
 * @category models
 * @since 0.1.0
 */
export interface Interceptor {
  readonly name: string
  readonly around: <A>(context: CallContext, next: Effect.Effect<A, DiscoveryError>) => Effect.Effect<A, DiscoveryError>
}

/**
 * `handler` wrapped by `interceptors`, the first one outermost.
 *
 * @category constructors
 * @since 0.1.0
 */
export const intercept = <A>(
  interceptors: ReadonlyArray<Interceptor>,
  context: CallContext,
  handler: Effect.Effect<A, DiscoveryError>
): Effect.Effect<A, DiscoveryError> => {
  let effect = handler
  for (let i = interceptors.length - 1; i >= 0; i--) effect = interceptors[i]!.around(context, effect)
  return effect
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
  const deadline = call.getDeadline()
  const at = deadline instanceof Date ? deadline.getTime() : deadline
  return at === Number.POSITIVE_INFINITY ? at : at - Date.now()
}
