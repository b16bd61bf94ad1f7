/**
 * Helpers for the conformance cases: byte values, a comparable form of affiliates
 * and watch events, a step-by-step watch reader, and failure assertions. Nothing
 * here knows which target runs.
 *
 * @since 0.1.0
 */
import { randomUUID } from "node:crypto"
import type { Cause, Scope } from "effect"
import { Effect, Stream } from "effect"
import { assert } from "./check.ts"
import type { AffiliateView, ResumePoint, WatchEvent } from "../ports/ClusterApi.ts"
import { ClusterApi } from "../ports/ClusterApi.ts"
import type { DiscoveryError } from "../ports/DiscoveryError.ts"

/** A cluster ID no other case uses. */
export const newClusterId = (): string => `contract-${randomUUID()}`

/** UTF-8 bytes of a text. */
export const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text)

/** A byte array of `size` bytes, all `fill`. */
export const filled = (size: number, fill = 0x61): Uint8Array => new Uint8Array(size).fill(fill)

/** A string of exactly `size` UTF-8 bytes. */
export const ascii = (size: number): string => "a".repeat(size)

/**
 * A distinct 16-byte endpoint blob (one AES block, as a real client sends for
 * IPv4). Blobs for different `n` differ; the same `n` gives equal bytes.
 */
export const endpoint = (n: number): Uint8Array => {
  const blob = new Uint8Array(16).fill(0x5a)
  blob[0] = 0xe0
  blob[1] = (n >>> 8) & 0xff
  blob[2] = n & 0xff
  return blob
}

/** Affiliate data of exactly 2048 bytes that starts with `label`. */
export const maxData = (label: string): Uint8Array => {
  const data = filled(2048, 0x2e)
  data.set(utf8(label))
  return data
}

const hex = (bytes: Uint8Array): string => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("hex")

/** An affiliate in a form `assert.deepStrictEqual` compares by value, whatever byte container a transport uses. */
export interface Shown {
  readonly id: string
  readonly data: string
  readonly endpoints: ReadonlyArray<string>
}

/** The comparable form of an affiliate. */
export const show = (view: AffiliateView): Shown => ({
  id: view.id,
  data: hex(view.data),
  endpoints: view.endpoints.map(hex)
})

/** The comparable form of what a List or snapshot should hold: `data` as text, endpoints as blobs. */
export const expected = (id: string, data = "", endpoints: ReadonlyArray<Uint8Array> = []): Shown => ({
  id,
  data: hex(utf8(data)),
  endpoints: endpoints.map(hex)
})

/** The comparable form of a set of affiliates, sorted by ID (List and snapshot order is unspecified). */
export const showAll = (views: ReadonlyArray<AffiliateView>): Array<Shown> =>
  views.map(show).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))

/** The comparable form of a watch event, without the revision (transports may renumber it). */
export type ShownEvent =
  | { readonly _tag: "Snapshot"; readonly affiliates: ReadonlyArray<Shown> }
  | { readonly _tag: "Updated"; readonly affiliate: Shown }
  | { readonly _tag: "Deleted"; readonly affiliateId: string }
  | { readonly _tag: "Resumed"; readonly revision: number }

/** The comparable form of a watch event. */
export const showEvent = (event: WatchEvent): ShownEvent => {
  switch (event._tag) {
    case "Snapshot":
      return { _tag: "Snapshot", affiliates: showAll(event.affiliates) }
    case "Updated":
      return { _tag: "Updated", affiliate: show(event.affiliate) }
    case "Deleted":
      return { _tag: "Deleted", affiliateId: event.affiliateId }
    case "Resumed":
      return { _tag: "Resumed", revision: event.revision }
  }
}

/** An expected snapshot holding `affiliates` (in any order). */
export const snapshot = (...affiliates: ReadonlyArray<Shown>): ShownEvent => ({
  _tag: "Snapshot",
  affiliates: [...affiliates].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
})
/** An expected update carrying `affiliate`'s full state. */
export const updated = (affiliate: Shown): ShownEvent => ({ _tag: "Updated", affiliate })
/** An expected deletion of `affiliateId`. */
export const deleted = (affiliateId: string): ShownEvent => ({ _tag: "Deleted", affiliateId })

/** Replays watch events onto a map, as a client does: the state the watcher believes in. */
export const replay = (events: ReadonlyArray<WatchEvent>): Array<Shown> => {
  const state = new Map<string, AffiliateView>()
  for (const event of events) {
    switch (event._tag) {
      case "Snapshot":
        state.clear()
        for (const affiliate of event.affiliates) state.set(affiliate.id, affiliate)
        break
      case "Updated":
        state.set(event.affiliate.id, event.affiliate)
        break
      case "Deleted":
        state.delete(event.affiliateId)
        break
    }
  }
  return showAll([...state.values()])
}

/**
 * A watch read one event at a time, pulled only when the test asks, so a
 * watcher that is not read really is not reading.
 */
export interface WatchCursor {
  /** The next event; fails with the error the watch ended with, or `Cause.Done` if it completed. */
  readonly next: Effect.Effect<WatchEvent, DiscoveryError | Cause.Done>
  /** Reads the next event and checks it equals `event`. */
  readonly expect: (event: ShownEvent) => Effect.Effect<void, DiscoveryError | Cause.Done>
}

/**
 * How long a watch may take to deliver an expected message, in real time:
 * a server that never sends it fails the case rather than holding it.
 */
export const expectWithinMillis = 5000

/** Waits `millis` of real time (never the test clock). */
export const realSleep = (millis: number): Effect.Effect<void> =>
  Effect.promise(() => new Promise<void>((resume) => setTimeout(resume, millis)))

/**
 * `effect`, or a failed check naming `expected` when it takes longer than
 * `millis` of real time (never the test clock, which cases move by minutes).
 */
const withinRealTime = <A, E>(effect: Effect.Effect<A, E>, millis: number, expected: ShownEvent) =>
  Effect.raceFirst(
    effect,
    Effect.flatMap(realSleep(millis), () =>
      Effect.sync(() =>
        assert.fail(`expected ${JSON.stringify(expected)} on the watch, but nothing came in ${millis} ms`)
      )
    )
  )

/** Opens a watch in the current scope; closing the scope closes the watch. Nothing is read yet. */
export const openWatch = (
  clusterId: string,
  resume?: ResumePoint | undefined
): Effect.Effect<WatchCursor, never, ClusterApi | Scope.Scope> =>
  Effect.gen(function* () {
    const api = yield* ClusterApi
    const pull = yield* Stream.toPull(api.watch({ clusterId, resume }))
    const buffered: Array<WatchEvent> = []
    const next: Effect.Effect<WatchEvent, DiscoveryError | Cause.Done> = Effect.suspend(() => {
      const head = buffered.shift()
      if (head !== undefined) return Effect.succeed(head)
      return Effect.map(pull, (chunk) => {
        buffered.push(...chunk.slice(1))
        return chunk[0]
      })
    })
    const expect = (event: ShownEvent) =>
      Effect.map(withinRealTime(next, expectWithinMillis, event), (actual) => {
        assert.deepStrictEqual(showEvent(actual), event)
      })
    return { next, expect }
  })

/** Opens a watch and checks its first event is the snapshot `first`. */
export const watchFrom = (
  clusterId: string,
  first: ShownEvent
): Effect.Effect<WatchCursor, DiscoveryError | Cause.Done, ClusterApi | Scope.Scope> =>
  Effect.tap(openWatch(clusterId), (cursor) => cursor.expect(first))

/** Runs `effect`, which must fail with the error `tag` and exactly `message`. */
export const expectFailure = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
  tag: DiscoveryError["_tag"],
  message: string
): Effect.Effect<void, never, R> =>
  Effect.match(effect, {
    onSuccess: () => assert.fail(`expected ${tag} "${message}", but it succeeded`),
    onFailure: (error) => {
      const { _tag, message: actual } = error as { readonly _tag?: unknown; readonly message?: unknown }
      assert.strictEqual(_tag, tag, `error tag (message: "${String(actual)}")`)
      assert.strictEqual(actual, message)
    }
  })

const realPause = realSleep(10)

/**
 * Reads `read` until `done` holds, pausing 10 ms of real time between tries, at
 * most `withinMillis` (2 s); returns the last value (the caller asserts on it). In process every
 * effect is already visible, so the first read succeeds and no time passes; over
 * a transport, a closed stream reaches the server a little later.
 */
export const settled = <A, E, R>(
  read: Effect.Effect<A, E, R>,
  done: (value: A) => boolean,
  withinMillis = 2000
): Effect.Effect<A, E, R> =>
  Effect.gen(function* () {
    for (let attempt = 0; ; attempt++) {
      const value = yield* read
      if (done(value) || attempt >= withinMillis / 10) return value
      yield* realPause
    }
  })
