import { assert, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Stream } from "effect"
import { TestClock } from "effect/testing"
import { ClusterApi, DiscoveryServer } from "../../src/index.ts"

it.effect("smoke", () =>
  Effect.gen(function*() {
    const api = yield* ClusterApi
    const bytes = (s: string) => new TextEncoder().encode(s)
    const fiber = yield* api.watch({ clusterId: "c" }).pipe(Stream.take(3), Stream.runCollect, Effect.forkChild)
    yield* Effect.yieldNow
    yield* api.affiliateUpdate({ clusterId: "c", affiliateId: "a", data: bytes("d"), endpoints: [new Uint8Array(16)], ttl: Duration.minutes(1) })
    yield* TestClock.adjust("2 minutes")
    const events = yield* Fiber.join(fiber)
    console.log(JSON.stringify(events))
    assert.deepStrictEqual(yield* api.list({ clusterId: "c" }), [])
  }).pipe(Effect.provide(DiscoveryServer.layer())))
