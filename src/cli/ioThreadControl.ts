/**
 * What the thread that owns the state and its I/O threads tell each other
 * besides the `ClusterApi` calls (which have their own port): what a new
 * thread is given, that it listens (or could not), its metrics when asked,
 * its connections to count against the caps, and when to stop; and how
 * deltas cross.
 *
 * @since 0.1.0
 */
import type { MessagePort } from "node:worker_threads"
import { decodeDeltaForms, encodeDeltaForms } from "../adapters/grpc/encodedDelta.ts"
import type { WireSeries } from "../adapters/http/MergedMetrics.ts"

/**
 * The `workerData` of an I/O thread.
 *
 * @category models
 * @since 0.1.0
 */
export interface ThreadData {
  readonly kind: typeof threadKind
  /** Which of the threads it is, from 0. */
  readonly index: number
  /** The `ClusterApi` of the owner (`ClusterApiHost` at the other end). */
  readonly api: MessagePort
  /** This channel's end. */
  readonly control: MessagePort
  /** The request budget of all threads (`SharedRequestBudget`), when they share one; the thread is its holder `index + 1`. */
  readonly requestBudget: SharedArrayBuffer | undefined
  /** The addresses to try, in order; the first that binds is the thread's. */
  readonly addresses: ReadonlyArray<string>
  /** Where the thread counts the batches from the owner it has handled (`ThreadProgress`). */
  readonly progress: SharedArrayBuffer
}

/**
 * The `kind` that marks the `workerData` of an I/O thread.
 *
 * @category models
 * @since 0.1.0
 */
export const threadKind = "talos-discovery/io-thread"

/**
 * What an I/O thread tells the owner.
 *
 * @category models
 * @since 0.1.0
 */
export type ThreadMessage =
  | { readonly type: "listening"; readonly address: string; readonly port: number }
  | { readonly type: "failed"; readonly message: string }
  /** Its metrics: the answer to the owner's request `id`, or (`id` 0) its own report, each second and when it stops. */
  | { readonly type: "metrics"; readonly id: number; readonly series: ReadonlyArray<WireSeries> }
  | { readonly type: "admit"; readonly id: number; readonly address: string }
  | { readonly type: "disconnect"; readonly address: string }

/**
 * What the owner tells an I/O thread.
 *
 * @category models
 * @since 0.1.0
 */
export type OwnerMessage =
  | { readonly type: "stop" }
  | { readonly type: "metrics"; readonly id: number }
  | { readonly type: "admitted"; readonly id: number; readonly ok: boolean }

/**
 * Deltas cross to the threads as the gRPC service's WatchResponse bytes:
 * encoded once by the owner, sent by the threads as they are.
 *
 * @category models
 * @since 0.1.0
 */
export const deltaCodec = { encode: encodeDeltaForms, decode: decodeDeltaForms }
