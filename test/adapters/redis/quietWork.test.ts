/**
 * What an instance on Redis does while nothing changes costs no more with
 * more watched clusters: a GC pass with nothing due sends a few commands
 * whatever the number of mirrors, and the state gauges follow what other
 * instances do within about a second, not at the next GC pass (issue 22).
 */
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { assert, describe, it } from "@effect/vitest"
import type { RedisConnection } from "../../../src/adapters/redis/RedisConnection.ts"
import { command, directConnection, eventually, instanceOn, recordingSink, updateOf } from "./fixtures/backendState.ts"
import { redisForTests } from "./redisServer.ts"

const redis = redisForTests()

/** Commands Redis has run so far (all kinds, from `INFO commandstats`). */
const commandsRun = (probe: RedisConnection) =>
  Effect.map(command(probe, "INFO", "commandstats"), (reply) =>
    String(reply)
      .split("\n")
      .map((line) => /calls=(\d+)/.exec(line)?.[1])
      .reduce((sum, calls) => sum + Number(calls ?? 0), 0)
  )

describe("an instance on Redis while nothing changes", () => {
  it.live("a GC pass over 50 watched quiet clusters sends a few commands, not one or two per cluster", () =>
    Effect.gen(function* () {
      const { backend, state } = yield* instanceOn(redis.server.url)
      const clusters = Array.from({ length: 50 }, (_, i) => `quiet-${i}`)
      for (const clusterId of clusters) {
        yield* state.update(updateOf(clusterId, "a"))
        yield* state.subscribe({ clusterId }, recordingSink().sink)
      }
      const probe = yield* directConnection(redis.server.url)
      yield* backend.collectGarbage(Date.now())
      const before = yield* commandsRun(probe)
      yield* backend.collectGarbage(Date.now())
      const sent = (yield* commandsRun(probe)) - before - 1
      assert.isAtMost(sent, 10, `a quiet GC pass sent ${sent} commands`)
    }).pipe(Effect.scoped)
  )

  it.live("the clusters and affiliates gauges follow another instance's changes within about a second", () =>
    Effect.gen(function* () {
      const keyPrefix = `gauges-${randomUUID()}:`
      const watching = yield* instanceOn(redis.server.url, { keyPrefix })
      const writing = yield* instanceOn(redis.server.url, { keyPrefix })
      yield* writing.state.update(updateOf("new", "a"))
      yield* writing.state.update(updateOf("new", "b"))
      yield* eventually(
        () =>
          Effect.runPromise(
            Effect.map(watching.backend.stats, (stats) => stats.clusters === 1 && stats.affiliates === 2)
          ),
        "the gauges show the new cluster",
        1500
      )
    }).pipe(Effect.scoped)
  )
})
