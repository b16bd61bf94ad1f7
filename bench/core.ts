/**
 * The in-process core alone, the first reference row of `npm run bench`: no
 * transport, no encoding, no logging. Prints one JSON object:
 *
 * - `store`: AffiliateUpdates/s straight into the synchronous `ClusterStore`
 *   (no validation, no Effect);
 * - `state`: AffiliateUpdates/s through the `ClusterState` service (validation,
 *   Effect, Clock), one fiber calling it in a loop;
 * - `fanOut`: deliveries/s to `watchers` in-process watchers of one cluster
 *   (each a `ClusterState.watch` stream drained by its own fiber), with at most
 *   `window` updates in flight (below the buffer of 32, as over gRPC).
 *
 * The update load has the shape of the gRPC rows: 128 clusters of 5
 * affiliates, 256 bytes of data that change on every call, two 32-byte
 * endpoints, TTL 30 minutes. Every loop is bounded in count and time.
 *
 * Run: `node bench/core.ts [--warmup 1] [--duration 3] [--watchers 1000] [--window 16]`.
 */
import { Duration, Effect, Fiber, Stream } from "effect"
import { ClusterState } from "../src/core/server/ClusterState.ts"
import { ClusterStore } from "../src/core/server/ClusterStore.ts"
import type { AffiliateUpdateRequest } from "../src/ports/ClusterApi.ts"

const flag = (name: string, fallback: number): number => {
  const index = process.argv.indexOf(`--${name}`)
  return index === -1 ? fallback : Number(process.argv[index + 1])
}

const warmupMs = flag("warmup", 1) * 1000
const durationMs = flag("duration", 3) * 1000
const watcherCount = flag("watchers", 1000)
const window = flag("window", 16)
const maxOps = 50_000_000

const clusters = 128
const affiliatesPerCluster = 5
const variants = 1024
const ttl = Duration.minutes(30)

const blob = (label: string, size: number): Uint8Array => {
  const bytes = new Uint8Array(size).fill(0x2e)
  bytes.set(new TextEncoder().encode(label).subarray(0, size))
  return bytes
}

/** Request i: cluster i % 128, affiliate (i / 128) % 5, data that differs from the affiliate's previous update. */
const requests: Array<AffiliateUpdateRequest> = Array.from({ length: variants * affiliatesPerCluster }, (_, i) => {
  const cluster = i % clusters
  const affiliate = Math.floor(i / clusters) % affiliatesPerCluster
  const data = blob(`data-${i}`, 256)
  return {
    clusterId: `core-${cluster}`,
    affiliateId: `affiliate-${affiliate}`,
    data,
    endpoints: [blob(`endpoint-${cluster}-${affiliate}-a`, 32), blob(`endpoint-${cluster}-${affiliate}-b`, 32)],
    ttl
  }
})

interface Rate {
  readonly operations: number
  readonly seconds: number
  readonly perSecond: number
}

/**
 * The warm-up and measured window of one row, in real time: `next` is asked
 * before each batch; it says whether the window is still open and calls
 * `onStart` once, when the measurement begins.
 */
class Window {
  private readonly measureAt: number
  private readonly stopAt: number
  private measuredFrom = Number.NaN
  constructor() {
    this.measureAt = performance.now() + warmupMs
    this.stopAt = this.measureAt + durationMs
  }

  next(onStart: () => void): boolean {
    const now = performance.now()
    if (now >= this.stopAt) return false
    if (Number.isNaN(this.measuredFrom) && now >= this.measureAt) {
      this.measuredFrom = now
      onStart()
    }
    return true
  }

  /** Seconds since the measurement began. */
  get seconds(): number {
    return (performance.now() - this.measuredFrom) / 1000
  }
}

/** Runs `step` in batches of 256 for warm-up + duration and counts what ran in the measured part. */
const timed = (step: (i: number) => void): Rate => {
  const measured = new Window()
  let i = 0
  let counted = 0
  while (i < maxOps && measured.next(() => (counted = 0))) {
    for (let j = 0; j < 256; j++) step(i++)
    counted += 256
  }
  const seconds = measured.seconds
  return { operations: counted, seconds, perSecond: counted / seconds }
}

const storeRate = (): Rate => {
  const store = new ClusterStore()
  const now = Date.now()
  return timed((i) => {
    store.update(requests[i % requests.length]!, now + 1_800_000)
  })
}

const stateRate = Effect.gen(function* () {
  const state = yield* ClusterState
  const measured = new Window()
  let i = 0
  let counted = 0
  while (i < maxOps && measured.next(() => (counted = 0))) {
    for (let j = 0; j < 256; j++) yield* state.update(requests[i++ % requests.length]!)
    counted += 256
  }
  const seconds = measured.seconds
  return { operations: counted, seconds, perSecond: counted / seconds } satisfies Rate
})

interface FanOut extends Rate {
  readonly watchers: number
  readonly window: number
  readonly updates: number
}

const fanOut = Effect.gen(function* () {
  const state = yield* ClusterState
  const clusterId = "core-fan-out"
  const base = requests[0]!
  const update = (seq: number) => {
    const data = new Uint8Array(256)
    new DataView(data.buffer).setFloat64(0, seq)
    return state.update({ ...base, clusterId, affiliateId: "watched", data })
  }
  yield* update(0)
  let delivered = 0
  let snapshots = 0
  const fibers = yield* Effect.forEach(
    Array.from({ length: watcherCount }, (_, i) => i),
    () =>
      Effect.forkChild(
        Stream.runForEach(state.watch({ clusterId }), (event) =>
          Effect.sync(() => {
            if (event._tag === "Snapshot") snapshots++
            else delivered++
          })
        )
      )
  )
  const settle = (target: () => boolean) =>
    Effect.gen(function* () {
      for (let spins = 0; spins < 1_000_000 && !target(); spins++) yield* Effect.yieldNow
      if (!target()) return yield* Effect.die(new Error("watchers did not catch up"))
    })
  yield* settle(() => snapshots === watcherCount)

  const measured = new Window()
  let seq = 0
  let deliveredAtStart = 0
  let updatesAtStart = 0
  const start = () => {
    deliveredAtStart = delivered
    updatesAtStart = seq
  }
  while (seq < maxOps / watcherCount && measured.next(start)) {
    for (let j = 0; j < window; j++) yield* update(++seq)
    const target = seq * watcherCount
    yield* settle(() => delivered === target)
  }
  const seconds = measured.seconds
  yield* Fiber.interruptAll(fibers)
  const operations = delivered - deliveredAtStart
  return {
    operations,
    seconds,
    perSecond: operations / seconds,
    watchers: watcherCount,
    window,
    updates: seq - updatesAtStart
  } satisfies FanOut
})

const main = Effect.gen(function* () {
  const store = storeRate()
  const state = yield* stateRate
  const fan = yield* fanOut
  return { store, state, fanOut: fan }
}).pipe(Effect.scoped, Effect.provide(ClusterState.layer))

const result = await Effect.runPromise(main)
process.stdout.write(`${JSON.stringify(result)}\n`)
