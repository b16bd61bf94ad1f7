/**
 * Watch calls alone do not grow Redis: a cluster that only ever had watchers
 * keeps its meta (its epoch, revision 0) only while some instance watches it
 * and for a short lease after, so watches of random cluster IDs leave
 * nothing behind once the lease runs out (issue 22). A watched empty cluster
 * keeps its epoch for as long as it is watched, as every instance reads it.
 */
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { command, directConnection, eventually, instanceOn, pause, recordingSink } from "./fixtures/backendState.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests()

describe("the lease of a cluster that only has watchers", () => {
  it.live("200 watches of random cluster IDs, each closed at once, leave no key once the lease is over", () =>
    Effect.gen(function* () {
      const keyPrefix = `lease-${randomUUID()}:`
      const { state } = yield* instanceOn(redis.server.url, { keyPrefix, watchLeaseMillis: 400 })
      const probe = yield* directConnection(redis.server.url)
      const keys = () =>
        Effect.map(command(probe, "KEYS", `${keyPrefix}*`), (reply) => (reply as Array<unknown>).length)
      const baseline = yield* keys()
      yield* Effect.all(
        Array.from({ length: 200 }, () =>
          Effect.scoped(state.subscribe({ clusterId: `random-${randomUUID()}` }, recordingSink().sink))
        ),
        { concurrency: 20 }
      )
      yield* eventually(
        () => Effect.runPromise(Effect.map(keys(), (count) => count === baseline)),
        "every watched-only cluster's keys expired",
        3000
      )
    }).pipe(Effect.scoped)
  )

  it.live("a watched empty cluster keeps its epoch past many leases", () =>
    Effect.gen(function* () {
      const keyPrefix = `lease-${randomUUID()}:`
      const watching = yield* instanceOn(redis.server.url, {
        keyPrefix,
        watchLeaseMillis: 300,
        probeIntervalMillis: 50
      })
      const other = yield* instanceOn(redis.server.url, { keyPrefix, watchLeaseMillis: 300, probeIntervalMillis: 50 })
      const clusterId = `quiet-${randomUUID()}`
      const first = yield* watching.state.subscribe({ clusterId }, recordingSink().sink)
      assert.strictEqual(first._tag, "Snapshot")
      yield* pause(1500)
      const second = yield* Effect.scoped(other.state.subscribe({ clusterId }, recordingSink().sink))
      assert.strictEqual(second._tag, "Snapshot")
      if (first._tag === "Snapshot" && second._tag === "Snapshot") assert.strictEqual(second.epoch, first.epoch)
    }).pipe(Effect.scoped)
  )
})
