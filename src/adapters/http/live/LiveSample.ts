/**
 * What the live view shows: one sample of the service each second, the
 * last 15 minutes of them, and the rows of the threads and instances that
 * serve now. Plain data: it is sent as JSON to browsers and posted between
 * threads.
 *
 * @since 0.1.0
 */
import type { InstanceAnnouncement } from "../../../ports/InstanceDirectory.ts"

/**
 * One thread serving the gRPC port (0 is the main thread).
 *
 * @category models
 * @since 0.1.0
 */
export interface ThreadRow {
  readonly index: number
  /** Connections it holds now, when the threads share connection counts. */
  readonly connections: number | undefined
  /** Watches it relays now. */
  readonly watches: number
  /** Bytes of requests it holds now (its part of the request memory budget). */
  readonly requestBytes: number | undefined
  /** Bytes posted to it that it has not read yet (0 for the main thread). */
  readonly unreadBytes: number
}

/**
 * The figures of one second; rates are per second since the previous sample.
 *
 * @category models
 * @since 0.1.0
 */
export interface LiveSample {
  /** When it was taken, in milliseconds since the epoch. */
  readonly at: number
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
  readonly watches: number
  readonly updatesPerSecond: number
  readonly deliveriesPerSecond: number
  readonly cutOffPerSecond: number
  /** Watchers cut off (too slow to keep up) since the start. */
  readonly cutOffTotal: number
  /** Bytes of requests held now, and the budget they share. */
  readonly requestBytes: number | undefined
  readonly requestBudgetBytes: number | undefined
  readonly backendAvailable: boolean
}

/**
 * This instance, as the live view introduces it.
 *
 * @category models
 * @since 0.1.0
 */
export interface LiveSelf {
  readonly name: string
  readonly version: string
  readonly startedAt: number
  /** `memory`, or the state backend's kind (`redis`). */
  readonly state: string
}

/**
 * What a viewer receives: the samples it has not seen yet (all of the last
 * 15 minutes on its first frame), and the rows of now.
 *
 * @category models
 * @since 0.1.0
 */
export interface LiveFrame {
  readonly self: LiveSelf
  readonly samples: ReadonlyArray<LiveSample>
  readonly threads: ReadonlyArray<ThreadRow>
  /** The instances on the shared state, when there is one (else `undefined`). */
  readonly instances: ReadonlyArray<InstanceAnnouncement> | undefined
  /** Why the instances could not be listed, when they could not. */
  readonly instancesError: string | undefined
}

/**
 * How many samples the view keeps: 15 minutes, one per second.
 *
 * @category models
 * @since 0.1.0
 */
export const keptSamples = 15 * 60

/**
 * The last `capacity` samples, oldest first.
 *
 * @category models
 * @since 0.1.0
 */
export class SampleRing {
  readonly #samples: Array<LiveSample> = []
  readonly #capacity: number

  constructor(capacity: number = keptSamples) {
    this.#capacity = capacity
  }

  /** Keeps `sample`, dropping the oldest past the capacity. */
  push(sample: LiveSample): void {
    this.#samples.push(sample)
    if (this.#samples.length > this.#capacity) this.#samples.splice(0, this.#samples.length - this.#capacity)
  }

  /** The newest sample, if any. */
  get latest(): LiveSample | undefined {
    return this.#samples.at(-1)
  }

  /** The samples taken after `at` (all of them for 0), oldest first. */
  since(at: number): Array<LiveSample> {
    let first = this.#samples.length
    while (first > 0 && this.#samples[first - 1]!.at > at) first--
    return this.#samples.slice(first)
  }
}
