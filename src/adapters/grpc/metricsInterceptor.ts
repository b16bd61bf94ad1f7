/**
 * The metrics of the server's chain as an interceptor (see `metrics.ts` for
 * the series).
 *
 * @since 0.1.0
 */
import * as grpc from "@grpc/grpc-js"
import type { Clock, Context } from "effect"
import type { Interceptor } from "./interceptors.ts"
import { statusOf } from "./interceptors.ts"

/**
 * The metrics as an interceptor, counting in the registry of `context`: a
 * call is started and its request received when the chain reaches it (after
 * the rate limiter), and when it ends, its code, its handling time and, for a
 * unary call, its reply are counted. An RPC's own request series
 * (`RpcInfo.countRequest`) is counted at the start too.
 *
 * @category constructors
 * @since 0.1.0
 */
export const interceptor = (context: Context.Context<never>, clock: Clock.Clock): Interceptor<bigint> => ({
  name: "metrics",
  start: (call) => {
    const metrics = call.rpc.metrics
    metrics.started.updateUnsafe(1, context)
    metrics.received.updateUnsafe(1, context)
    call.rpc.countRequest?.(call.decoded).updateUnsafe(1, context)
    return clock.monotonicTimeNanosUnsafe()
  },
  end: (call, exit, startedAt) => {
    const metrics = call.rpc.metrics
    const status = statusOf(exit, call)
    if (!call.rpc.streaming) metrics.sent.updateUnsafe(1, context)
    const handled = metrics.handled[status.code] ?? metrics.handled[grpc.status.UNKNOWN]!
    handled.updateUnsafe(1, context)
    metrics.handlingSeconds.updateUnsafe(Number(clock.monotonicTimeNanosUnsafe() - startedAt) / 1e9, context)
    return undefined
  }
})
