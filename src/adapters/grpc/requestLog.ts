/**
 * The request log as an interceptor: one line per call once it ended, with
 * the method path as the message and the annotations `peer.address`, `code`
 * (Go's spelling), `duration` (seconds), `error` (when it failed) and the
 * request's own fields (`RpcInfo.logFields`). Info level; Error when the call
 * failed (not when the client or a shutdown cut it short). Lines of calls
 * that did not end OK pass the failure log first, when there is one.
 *
 * @since 0.1.0
 */
import * as grpc from "@grpc/grpc-js"
import type { Clock } from "effect"
import { Cause, Effect, Exit, Result } from "effect"
import { formatIp } from "./clientAddress.ts"
import type { FailureLog } from "./failureLog.ts"
import type { Interceptor } from "./interceptors.ts"
import { statusOf } from "./interceptors.ts"
import { goCodeNames } from "./metrics.ts"

/**
 * The request log on `clock`, bounded by `failureLog` when given.
 *
 * @category constructors
 * @since 0.1.0
 */
export const interceptor = (clock: Clock.Clock, failureLog: FailureLog | undefined): Interceptor<bigint> => ({
  name: "requestLog",
  start: () => clock.monotonicTimeNanosUnsafe(),
  end: (context, exit, startedAt) => {
    const status = statusOf(exit, context)
    if (failureLog !== undefined && !failureLog.admitUnsafe(status.code, context.address)) return undefined
    const annotations: Record<string, unknown> = {
      "peer.address": formatIp(context.address),
      code: goCodeNames[status.code] ?? String(status.code),
      duration: Number(clock.monotonicTimeNanosUnsafe() - startedAt) / 1_000_000_000
    }
    const decoded = context.decoded
    if (Result.isSuccess(decoded)) Object.assign(annotations, context.rpc.logFields(decoded.success))
    if (status.code !== grpc.status.OK) annotations.error = status.details
    const failed = Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause)
    return Effect.annotateLogs(Effect.logWithLevel(failed ? "Error" : "Info")(context.rpc.path), annotations)
  }
})
