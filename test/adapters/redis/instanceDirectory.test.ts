/**
 * The instances' directory on a real Redis: announcements are listed by
 * name until their TTL (on the test clock) passes, the next announcement
 * removes what expired, the hash itself expires with the latest renewal,
 * an instance withdraws on the way out, and a Redis that is down gives
 * UNAVAILABLE.
 */
import { randomUUID } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit } from "effect"
import { TestClock } from "effect/testing"
import * as RedisInstanceDirectory from "../../../src/adapters/redis/RedisInstanceDirectory.ts"
import type { InstanceAnnouncement } from "../../../src/ports/InstanceDirectory.ts"
import { redisForTests, startRedis } from "./redisServer.ts"

const redis = redisForTests()

const announcement = (name: string, at: number): InstanceAnnouncement => ({
  name,
  address: `${name}.example:3000`,
  version: "0.1.0",
  startedAt: 0,
  announcedAt: at,
  threads: 2,
  watches: 3,
  updatesPerSecond: 4.5,
  deliveriesPerSecond: 9
})

const directoryOn = (url: string) => {
  const keyPrefix = `t-${randomUUID()}:`
  return Effect.map(RedisInstanceDirectory.make({ url, keyPrefix }), (directory) => ({ directory, keyPrefix }))
}

const send = (url: string, args: ReadonlyArray<string>) =>
  Effect.promise(async () => {
    const { createClient } = await import("redis")
    const client = createClient({ url })
    await client.connect()
    try {
      return (await client.sendCommand([...args])) as unknown
    } finally {
      client.destroy()
    }
  })

describe("RedisInstanceDirectory", () => {
  it.effect("lists the instances by name until their announcement expires", () =>
    Effect.gen(function* () {
      const { directory, keyPrefix } = yield* directoryOn(redis.server.url)
      yield* directory.announce(announcement("b", 0), 15_000)
      yield* directory.announce(announcement("a", 0), 15_000)
      assert.deepStrictEqual(
        (yield* directory.list).map((one) => one.name),
        ["a", "b"]
      )
      assert.deepStrictEqual((yield* directory.list)[0], announcement("a", 0))
      const ttl = Number(yield* send(redis.server.url, ["PTTL", `${keyPrefix}instances`]))
      assert.isAbove(ttl, 10_000)
      assert.isAtMost(ttl, 15_000)
      yield* TestClock.adjust("10 seconds")
      yield* directory.announce(announcement("a", 10_000), 15_000)
      yield* TestClock.adjust("6 seconds")
      assert.deepStrictEqual(
        (yield* directory.list).map((one) => one.name),
        ["a"]
      )
      // the next announcement removes what expired
      yield* directory.announce(announcement("a", 16_000), 15_000)
      assert.deepStrictEqual(yield* send(redis.server.url, ["HKEYS", `${keyPrefix}instances`]), ["a"])
      yield* directory.withdraw("a")
      assert.deepStrictEqual(yield* directory.list, [])
    }).pipe(Effect.scoped)
  )

  it.effect("skips a value it cannot read instead of failing the list", () =>
    Effect.gen(function* () {
      const { directory, keyPrefix } = yield* directoryOn(redis.server.url)
      yield* directory.announce(announcement("a", 0), 15_000)
      yield* send(redis.server.url, ["HSET", `${keyPrefix}instances`, "broken", "{not json"])
      assert.deepStrictEqual(
        (yield* directory.list).map((one) => one.name),
        ["a"]
      )
    }).pipe(Effect.scoped)
  )

  it.live("gives UNAVAILABLE while Redis is down", () =>
    Effect.gen(function* () {
      const server = yield* Effect.promise(() => startRedis())
      const { directory } = yield* directoryOn(server.url)
      yield* directory.announce(announcement("a", Date.now()), 15_000)
      yield* Effect.promise(() => server.cleanup())
      const listed = yield* Effect.exit(directory.list)
      assert.isTrue(Exit.isFailure(listed))
      assert.include(String(Exit.isFailure(listed) && listed.cause), "Unavailable")
    }).pipe(Effect.scoped)
  )
})
