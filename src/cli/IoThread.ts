/**
 * The I/O thread's side: what a worker started by `IoThreads` runs. It
 * reaches the owner's state through `ClusterApi` over its port, takes rate
 * limiter tokens from the owner, has each connection counted by the owner,
 * answers the owner's requests for its metrics and reports them each second
 * unasked (and once more when it has stopped), and stops (draining its
 * calls) when told to.
 *
 * @since 0.1.0
 */
import { isMainThread, workerData } from "node:worker_threads"
import type { Scope } from "effect"
import { Effect, Fiber } from "effect"
import { ClusterApi } from "../ports/ClusterApi.ts"
import type { ConnectionAdmission } from "../adapters/grpc/http2/ConnectionCounts.ts"
import { SharedRequestBudget } from "../adapters/grpc/http2/RequestBudget.ts"
import { snapshotWire } from "../adapters/http/MergedMetrics.ts"
import * as ClusterApiClient from "../adapters/message-port/ClusterApiClient.ts"
import type { OwnerMessage, ThreadData, ThreadMessage } from "./ioThreadControl.ts"
import { deltaCodec, threadKind } from "./ioThreadControl.ts"
import { acknowledger } from "./ThreadProgress.ts"

/** How often a thread reports its metrics to the owner unasked. */
const metricsReportMillis = 1000

/**
 * Whether this thread was started by `IoThreads`.
 *
 * @category guards
 * @since 0.1.0
 */
export const isIoThread = (): boolean =>
  !isMainThread && (workerData as Partial<ThreadData> | undefined)?.kind === threadKind

/**
 * What the thread's listener is given.
 *
 * @category models
 * @since 0.1.0
 */
export interface ThreadContext {
  readonly index: number
  /** Where to listen, in order of preference (always with SO_REUSEPORT). */
  readonly addresses: ReadonlyArray<string>
  /** The request budget shared with the other threads, with this thread's holder number. */
  readonly requestBudget: { readonly budget: SharedRequestBudget; readonly holder: number } | undefined
  /** The owner's connection caps, which every connection of this thread is counted against. */
  readonly admission: ConnectionAdmission
  /** Token reservations of the owner's rate limiter. */
  readonly limiter: ClusterApiClient.Connection["limiter"]
  /** The owner's state counts. */
  readonly stats: ClusterApiClient.Connection["stats"]
  /** A cluster's last changes, asked of the owner. */
  readonly history: ClusterApiClient.Connection["history"]
  /** The live view's frames, asked of the owner. */
  readonly live: ClusterApiClient.Connection["live"]
}

/**
 * Runs `listen` (which opens the thread's gRPC server over the `ClusterApi`
 * it is provided, and gives where it listens) until the owner says stop;
 * then its scope closes, which drains the server. A listener that fails is
 * reported to the owner, and the thread ends.
 *
 * @category constructors
 * @since 0.1.0
 */
export const run = <E extends { readonly message: string }>(
  listen: (
    context: ThreadContext
  ) => Effect.Effect<{ readonly address: string; readonly port: number }, E, ClusterApi | Scope.Scope>
): Effect.Effect<void> => {
  let finalReport: (() => void) | undefined
  return Effect.scoped(
    Effect.gen(function* () {
      const data = workerData as ThreadData
      const control = data.control
      const post = (message: ThreadMessage) => control.postMessage(message)
      const context = yield* Effect.context<never>()
      const admissions = new Map<number, (admitted: boolean) => void>()
      let nextAdmission = 1
      const stopped = yield* Effect.callback<void>((resume) => {
        const onMessage = (message: OwnerMessage) => {
          if (message.type === "stop") resume(Effect.void)
          else if (message.type === "admitted") {
            const answer = admissions.get(message.id)
            admissions.delete(message.id)
            answer?.(message.ok)
          } else post({ type: "metrics", id: message.id, series: snapshotWire(context) })
        }
        control.on("message", onMessage)
        control.once("close", () => resume(Effect.void))
        return Effect.sync(() => control.off("message", onMessage))
      }).pipe(Effect.forkScoped)
      const connection = yield* ClusterApiClient.connect(data.api, deltaCodec, acknowledger(data.progress))
      const listened = yield* listen({
        index: data.index,
        addresses: data.addresses,
        admission: {
          acquire: (address, answer) => {
            const id = nextAdmission++
            admissions.set(id, answer)
            post({ type: "admit", id, address })
          },
          release: (address) => post({ type: "disconnect", address })
        },
        limiter: connection.limiter,
        stats: connection.stats,
        history: connection.history,
        live: connection.live,
        requestBudget:
          data.requestBudget === undefined
            ? undefined
            : { budget: SharedRequestBudget.attach(data.requestBudget), holder: data.index + 1 }
      }).pipe(Effect.provideService(ClusterApi, connection.api), Effect.result)
      if (listened._tag === "Failure") {
        post({ type: "failed", message: listened.failure.message })
        return
      }
      post({ type: "listening", address: listened.success.address, port: listened.success.port })
      // the owner keeps what a thread reported when it is gone: a report each second bounds what a crash loses
      const report = () => post({ type: "metrics", id: 0, series: snapshotWire(context) })
      const reporting = setInterval(report, metricsReportMillis)
      reporting.unref()
      yield* Effect.addFinalizer(() => Effect.sync(() => clearInterval(reporting)))
      finalReport = report
      yield* Fiber.join(stopped)
    })
  ).pipe(
    // once the server has drained: its last counts, then the end of the channel
    Effect.ensuring(
      Effect.sync(() => {
        finalReport?.()
        ;(workerData as ThreadData).control.close()
      })
    )
  )
}
