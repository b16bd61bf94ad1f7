/**
 * The live view's routes: `/live/events` (the landing page's frames, as
 * server-sent events, one a second), `/inspect/events?clusterID=…` (a
 * cluster's frames, sent when it changes) and the page scripts and chart
 * library under `/assets/`. The inspect stream reads with `list` and
 * `history`, as the page does: it creates no cluster and holds no watch.
 * Open streams are capped per listener; past the cap, 503.
 *
 * @since 0.1.0
 */
import { Clock, Effect, Schedule, Stream } from "effect"
import { HttpServerResponse } from "effect/http"
import { ClusterState } from "../../../core/server/ClusterState.ts"
import { chartFile, chartFiles } from "./chartLibrary.ts"
import { inspectFrame } from "./inspectFrame.ts"
import { inspectScript } from "./inspectScript.ts"
import { liveScript } from "./liveScript.ts"
import type { LiveView } from "./LiveView.ts"

/**
 * Open event streams one listener serves at most.
 *
 * @category models
 * @since 0.1.0
 */
export const maxOpenStreams = 32

const encoder = new TextEncoder()
const event = (data: unknown) => encoder.encode(`data: ${JSON.stringify(data)}\n\n`)
const retry = encoder.encode("retry: 2000\n\n")
const keepAlive = encoder.encode(": still here\n\n")

const streamHeaders = { "cache-control": "no-store", "x-accel-buffering": "no" }
const eventStream = (body: Stream.Stream<Uint8Array>) =>
  HttpServerResponse.stream(body, { contentType: "text/event-stream", headers: streamHeaders })

const asset = (body: string, contentType: string) =>
  HttpServerResponse.text(body, {
    contentType,
    headers: { "cache-control": "public, max-age=3600", "x-content-type-options": "nosniff" }
  })

/**
 * The assets, by path.
 *
 * @category constructors
 * @since 0.1.0
 */
export const assets = {
  "/assets/live.js": () => asset(liveScript, "text/javascript; charset=utf-8"),
  "/assets/inspect.js": () => asset(inspectScript, "text/javascript; charset=utf-8"),
  "/assets/chart.js": () => asset(chartFile(chartFiles.script), "text/javascript; charset=utf-8"),
  "/assets/chart.css": () => asset(chartFile(chartFiles.style), "text/css; charset=utf-8")
} as const

/**
 * Counts the open streams of one listener.
 *
 * @category models
 * @since 0.1.0
 */
export class OpenStreams {
  #open = 0

  /** The streams open now. */
  get open(): number {
    return this.#open
  }

  /**
   * `body` counted while it runs, or `undefined` when the cap is reached. It
   * counts from when the body starts, not when the response is made: a body
   * the server never runs (a HEAD request, a client already gone) never
   * holds a place.
   */
  admit(body: Stream.Stream<Uint8Array>): Stream.Stream<Uint8Array> | undefined {
    if (this.#open >= maxOpenStreams) return undefined
    return Stream.unwrap(
      Effect.sync(() => {
        this.#open++
        return body.pipe(Stream.ensuring(Effect.sync(() => this.#open--)))
      })
    )
  }
}

const busy = () =>
  HttpServerResponse.text("too many live views open, try again later\n", {
    status: 503,
    headers: { "retry-after": "10" }
  })

/**
 * The landing page's event stream: every second, the samples this viewer
 * has not had yet, with the threads and instances of now.
 *
 * @category constructors
 * @since 0.1.0
 */
export const liveEvents = (view: LiveView["Service"], streams: OpenStreams): HttpServerResponse.HttpServerResponse => {
  const body = Stream.suspend(() => {
    let since = 0
    const next = Effect.map(
      Effect.suspend(() => view.frame(since)),
      (frame) => {
        since = frame.samples.at(-1)?.at ?? since
        return event(frame)
      }
    )
    return Stream.concat(Stream.make(retry), Stream.fromEffectSchedule(next, Schedule.spaced("1 second")))
  })
  const admitted = streams.admit(body)
  return admitted === undefined ? busy() : eventStream(admitted)
}

/** How often a cluster is read for its viewers, and how often a quiet stream says it is still there. */
const pollEvery = "1 second"
const keepAliveEvery = 15

/**
 * A cluster's event stream: it is read every second (List and its last
 * changes) and a frame is sent when what the page shows changed; a comment
 * keeps a quiet stream open. A read that fails ends the stream with a
 * `failed` event (the browser reconnects after the stream's `retry`).
 *
 * @category constructors
 * @since 0.1.0
 */
export const inspectEvents = (
  state: ClusterState["Service"],
  clusterId: string,
  streams: OpenStreams
): HttpServerResponse.HttpServerResponse => {
  const body = Stream.suspend(() => {
    let last = ""
    let quiet = 0
    const read = Effect.gen(function* () {
      const affiliates = yield* state.list({ clusterId })
      const history = yield* Effect.result(state.history({ clusterId }))
      const now = yield* Clock.currentTimeMillis
      const frame = inspectFrame(affiliates, history._tag === "Success" ? history.success : undefined, now)
      const shown = JSON.stringify({ ...frame, now: 0 })
      if (shown !== last || ++quiet >= keepAliveEvery) {
        const changed = shown !== last
        last = shown
        quiet = 0
        return changed ? event(frame) : keepAlive
      }
      return undefined
    })
    const frames = Stream.fromEffectSchedule(read, Schedule.spaced(pollEvery)).pipe(
      Stream.filter((chunk) => chunk !== undefined),
      Stream.catch((error) => Stream.make(encoder.encode(`event: failed\ndata: ${JSON.stringify(error.message)}\n\n`)))
    )
    return Stream.concat(Stream.make(retry), frames)
  })
  const admitted = streams.admit(body)
  return admitted === undefined ? busy() : eventStream(admitted)
}

/**
 * The stream of `clusterId` as a handler's answer, or 400 for an ID the
 * state refuses.
 *
 * @category constructors
 * @since 0.1.0
 */
export const inspectEventsFor = (clusterId: string, streams: OpenStreams) =>
  Effect.gen(function* () {
    const state = yield* ClusterState
    const checked = yield* Effect.result(state.list({ clusterId }))
    if (checked._tag === "Failure" && checked.failure._tag === "InvalidArgument") {
      return HttpServerResponse.text(`${checked.failure.message}\n`, { status: 400 })
    }
    return inspectEvents(state, clusterId, streams)
  })
