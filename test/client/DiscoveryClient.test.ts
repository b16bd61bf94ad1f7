import { createCipheriv } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Layer, Metric, Stream } from "effect"
import { TestClock } from "effect/testing"
import { ClusterConnector } from "../../src/core/client/ClusterConnector.ts"
import * as DiscoveryClient from "../../src/core/client/DiscoveryClient.ts"
import type { AffiliateInfoInit } from "../../src/core/client/payload.ts"
import { watchesStartedTotal } from "../../src/core/server/ClusterState.ts"
import type { Api, Client } from "./fixtures.ts"
import {
  byName,
  clientOptions,
  endpointsOf,
  eventually,
  instrument,
  key32,
  only,
  seenIds,
  server,
  settle,
  startClient,
  timesOf,
  toHex
} from "./fixtures.ts"

const node = (name: string): AffiliateInfoInit => ({
  nodeId: `id-${name}`,
  hostname: name,
  nodename: name,
  machineType: "worker",
  addresses: [Uint8Array.of(10, 0, 0, 1)],
  kubespan: { publicKey: `key-${name}`, address: new Uint8Array(16).fill(0xfd), additionalAddresses: [] }
})

const ids = (list: ReadonlyArray<{ readonly id: string }>) => list.map((a) => a.id).sort()

const listed = (api: Api) => Effect.map(Effect.orDie(api.list({ clusterId: "c1" })), ids)

/** How many watches the service started resumed, and from a snapshot. */
const watchStarts = Effect.gen(function* () {
  const count = (start: string) =>
    Effect.map(Metric.value(Metric.withAttributes(watchesStartedTotal, { start })), (state) => state.count)
  return { resumed: yield* count("resumed"), snapshot: yield* count("snapshot") }
})

const hostnameSeen = (client: Client, id: string) =>
  Effect.map(client.affiliates, (list) => list.find((a) => a.id === id)?.affiliate.hostname)

describe("DiscoveryClient", () => {
  describe("end to end in process", () => {
    it.effect("two clients find each other, see an endpoint update and a delete (T58)", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const one = yield* startClient(clientOptions("af1"), only(api))
        const two = yield* startClient(clientOptions("af2"), only(api))
        yield* one.client.setLocalData({ affiliate: node("one") })
        yield* two.client.setLocalData({ affiliate: node("two") })
        yield* eventually(seenIds(one.client), (seen) => seen.join() === "af2")
        yield* eventually(seenIds(two.client), (seen) => seen.join() === "af1")

        const [peer] = yield* two.client.affiliates
        assert.deepStrictEqual(peer, {
          id: "af1",
          affiliate: {
            nodeId: "id-one",
            addresses: [Uint8Array.of(10, 0, 0, 1)],
            hostname: "one",
            nodename: "one",
            machineType: "worker",
            operatingSystem: "",
            kubespan: { publicKey: "key-one", address: new Uint8Array(16).fill(0xfd), additionalAddresses: [] },
            controlPlane: undefined
          },
          endpoints: []
        })

        yield* one.client.setLocalData({
          affiliate: node("one"),
          endpoints: [{ ip: Uint8Array.of(1, 2, 3, 4), port: 5678 }]
        })
        yield* eventually(two.client.affiliates, (list) => endpointsOf(list[0]).join() === "01020304:5678")

        yield* one.client.deleteLocalAffiliate
        yield* eventually(seenIds(two.client), (seen) => seen.length === 0)
        assert.deepStrictEqual(yield* listed(api), ["af2"])
      })
    )

    it.effect("publishes endpoints for peers; each peer ends up with both (T60, n = 3)", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const n = 3
        const clients: Array<Client> = []
        for (let i = 0; i < n; i++)
          clients.push((yield* startClient(clientOptions(`${i}`, { ttl: "10 seconds" }), only(api))).client)
        for (let i = 0; i < n; i++) {
          const next = (i + 1) % n
          yield* clients[i]!.setLocalData(
            { affiliate: { nodeId: `${i}` }, endpoints: [{ ip: Uint8Array.of(0, 0, 0, 0), port: (i + 1) * 10 }] },
            [{ affiliateId: `${next}`, endpoints: [{ ip: new Uint8Array(16), port: (next + 1) * 100 }] }]
          )
        }
        for (const client of clients) {
          yield* eventually(
            client.affiliates,
            (list) =>
              list.length === n - 1 &&
              list.every((peer) => {
                const id = Number(peer.id)
                return (
                  peer.endpoints
                    .map((e) => e.port)
                    .sort((a, b) => a - b)
                    .join() === `${(id + 1) * 10},${(id + 1) * 100}`
                )
              })
          )
        }
      })
    )

    it.effect("a client that stops without deleting expires and disappears at GC (T59)", () =>
      Effect.gen(function* () {
        const { api, state } = yield* server()
        const one = yield* startClient(clientOptions("af1", { ttl: "1 second" }), only(api))
        const two = yield* startClient(clientOptions("af2"), only(api))
        yield* one.client.setLocalData({ affiliate: node("one") })
        yield* two.client.setLocalData({ affiliate: node("two") })
        yield* eventually(seenIds(two.client), (seen) => seen.join() === "af1")
        yield* one.stop
        assert.strictEqual((yield* state.stats).watches, 1, "the stopped client's watch is gone")
        yield* TestClock.adjust("2 seconds")
        yield* state.collectGarbage
        yield* eventually(seenIds(two.client), (seen) => seen.length === 0)
        assert.deepStrictEqual(yield* listed(api), ["af2"])
      })
    )

    it.effect("a change that skips a revision ends the session, and the next watch starts from a snapshot", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        // the first watch loses the second change of af2
        let changesOfTwo = 0
        const front = yield* instrument(api, {
          drop: (watch, event) =>
            watch === 1 && event._tag === "Updated" && event.affiliate.id === "af2" && ++changesOfTwo === 2
        })
        const one = yield* startClient(clientOptions("af1"), only(front.api))
        const two = yield* startClient(clientOptions("af2"), only(api))
        yield* one.client.setLocalData({ affiliate: node("one") })
        yield* eventually(listed(api), (seen) => seen.join() === "af1")
        yield* two.client.setLocalData({ affiliate: node("two") })
        yield* eventually(seenIds(one.client), (seen) => seen.join() === "af2")
        yield* two.client.setLocalData({ affiliate: node("two-b") })
        // two-b is lost on its way to one; the change after it shows the gap
        yield* settle
        yield* two.client.setLocalData({ affiliate: node("two-c") })
        yield* eventually(hostnameSeen(one.client, "af2"), (hostname) => hostname === "two-c", { within: "10 seconds" })
        const watches = (yield* front.calls).filter((call) => call.method === "watch")
        assert.strictEqual(watches.length, 2)
        assert.isUndefined(watches[1]!.resume, "no resume point after a gap")
      })
    )

    for (const logLength of [64, 0]) {
      it.effect(
        `after a reconnect it resumes its watch and ends up as a fresh client does (log of ${logLength} changes)`,
        () =>
          Effect.gen(function* () {
            const { api } = yield* server({ caps: { watchLogLength: logLength } })
            const front = yield* instrument(api)
            const one = yield* startClient(clientOptions("af1"), only(front.api))
            const two = yield* startClient(clientOptions("af2"), only(api))
            const three = yield* startClient(clientOptions("af3"), only(api))
            yield* one.client.setLocalData({ affiliate: node("one") })
            yield* two.client.setLocalData({ affiliate: node("two") })
            yield* three.client.setLocalData({ affiliate: node("three") })
            yield* eventually(seenIds(one.client), (seen) => seen.join() === "af2,af3")
            const startedBefore = yield* watchStarts

            // its watch ends; while it waits to reconnect, a peer changes and another leaves
            yield* front.killWatches
            yield* settle
            yield* two.client.setLocalData({ affiliate: node("two-b") })
            yield* three.client.deleteLocalAffiliate
            yield* eventually(listed(api), (seen) => seen.join() === "af1,af2")
            yield* eventually(hostnameSeen(one.client, "af2"), (hostname) => hostname === "two-b", {
              within: "10 seconds"
            })
            assert.deepStrictEqual(yield* seenIds(one.client), ["af2"])

            const watches = (yield* front.calls).filter((call) => call.method === "watch")
            assert.strictEqual(watches.length, 2)
            assert.isUndefined(watches[0]!.resume)
            assert.isString(watches[1]!.resume?.epoch)
            const startedAfter = yield* watchStarts
            assert.deepStrictEqual(
              {
                resumed: startedAfter.resumed - startedBefore.resumed,
                snapshot: startedAfter.snapshot - startedBefore.snapshot
              },
              logLength > 0 ? { resumed: 1, snapshot: 0 } : { resumed: 0, snapshot: 1 }
            )

            // what it rebuilt is what a client that starts now sees
            const four = yield* startClient(clientOptions("af4"), only(api))
            yield* eventually(seenIds(four.client), (seen) => seen.join() === "af1,af2")
            const fresh = (yield* four.client.affiliates).filter((a) => a.id !== "af1")
            assert.deepStrictEqual(yield* one.client.affiliates, fresh)
          })
      )
    }

    it.effect("follows a redirect from a restarted server to another one (T61)", () =>
      Effect.gen(function* () {
        const srv1 = yield* server()
        const srv2 = yield* server()
        let redirecting = false
        const front = yield* instrument(srv1.api, { hello: () => (redirecting ? { redirect: "srv2" } : undefined) })
        const connect = byName({ srv1: front.api, srv2: srv2.api })
        const one = yield* startClient(clientOptions("af1"), connect)
        const two = yield* startClient(clientOptions("af2"), connect)
        yield* one.client.setLocalData({ affiliate: node("one") })
        yield* two.client.setLocalData({ affiliate: node("two") })
        yield* eventually(seenIds(two.client), (seen) => seen.join() === "af1")

        // "restart" srv1 with a redirect: its watches end, Hello now redirects
        redirecting = true
        yield* front.killWatches
        yield* eventually(listed(srv2.api), (seen) => seen.join() === "af1,af2", { within: "3 seconds" })
        yield* eventually(seenIds(one.client), (seen) => seen.join() === "af2")
        yield* eventually(seenIds(two.client), (seen) => seen.join() === "af1")
        assert.strictEqual(yield* one.client.endpoint, "srv2")
        assert.strictEqual((yield* srv1.state.stats).watches, 0, "no client stream remains on srv1")

        yield* one.client.setLocalData({
          affiliate: node("one"),
          endpoints: [{ ip: Uint8Array.of(1, 2, 3, 4), port: 1 }]
        })
        yield* eventually(two.client.affiliates, (list) => endpointsOf(list[0]).join() === "01020304:1")
      })
    )

    it.effect("guards a redirect loop: a few hops at once, then one per backoff", () =>
      Effect.gen(function* () {
        const a = yield* instrument((yield* server({ redirectEndpoint: "b" })).api)
        const b = yield* instrument((yield* server({ redirectEndpoint: "a" })).api)
        yield* startClient(clientOptions("af1", { endpoint: "a", maxRedirects: 5 }), byName({ a: a.api, b: b.api }))
        yield* settle
        const hellos = Effect.map(Effect.all([a.calls, b.calls]), ([x, y]) =>
          [...timesOf(x, "hello"), ...timesOf(y, "hello")].sort((p, q) => p - q)
        )
        assert.deepStrictEqual(yield* hellos, [0, 0, 0, 0, 0, 0], "the first Hello and 5 redirects, at once")
        for (let i = 0; i < 60; i++) yield* TestClock.adjust("1 second")
        const times = yield* hellos
        assert.isAtLeast(times.length, 10)
        assert.isAtMost(times.length, 30, "a minute of backoff, not a busy loop")
        for (let i = 6; i < times.length; i++) assert.isAtLeast(times[i]! - times[i - 1]!, 250)
      })
    )

    it.effect("exposes the public IP from Hello, as a copy", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const front = yield* instrument(api, { hello: () => ({ clientIp: Uint8Array.of(203, 0, 113, 7) }) })
        const { client } = yield* startClient(clientOptions("af1"), only(front.api))
        const ip = yield* eventually(client.publicIp, (value) => value !== undefined)
        assert.deepStrictEqual(ip, Uint8Array.of(203, 0, 113, 7))
        ip!.fill(0)
        assert.deepStrictEqual(yield* client.publicIp, Uint8Array.of(203, 0, 113, 7))
      })
    )

    it.effect("streams the list: the current one, then every change", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const one = yield* startClient(clientOptions("af1"), only(api))
        const two = yield* startClient(clientOptions("af2"), only(api))
        const lists = yield* one.client.changes.pipe(
          Stream.map(ids),
          Stream.take(3),
          Stream.runCollect,
          Effect.forkChild
        )
        yield* settle
        yield* two.client.setLocalData({ affiliate: node("two") })
        yield* eventually(seenIds(one.client), (seen) => seen.length === 1)
        yield* two.client.deleteLocalAffiliate
        yield* eventually(seenIds(one.client), (seen) => seen.length === 0)
        assert.deepStrictEqual(Array.from(yield* Fiber.join(lists)), [[], ["af2"], []])
      })
    )

    it.effect("coalesces local changes into one refresh with the latest data", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const front = yield* instrument(api)
        const one = yield* startClient(clientOptions("af1"), only(front.api))
        const two = yield* startClient(clientOptions("af2"), only(api))
        yield* one.client.setLocalData({ affiliate: node("v1") })
        yield* eventually(hostnameSeen(two.client, "af1"), (h) => h === "v1")
        const before = timesOf(yield* front.calls, "affiliateUpdate").length
        yield* one.client.setLocalData({ affiliate: node("v2") })
        yield* one.client.setLocalData({ affiliate: node("v3") })
        yield* one.client.setLocalData({ affiliate: node("v4") })
        yield* eventually(hostnameSeen(two.client, "af1"), (h) => h === "v4")
        assert.strictEqual(timesOf(yield* front.calls, "affiliateUpdate").length - before, 1)
      })
    )
  })

  describe("retries", () => {
    it.effect("connects at once, then backs off exponentially with ±50 % jitter while Hello fails", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const front = yield* instrument(api, { failures: (method, n) => method === "hello" && n <= 4 })
        const { client } = yield* startClient(clientOptions("af1"), only(front.api))
        yield* client.setLocalData({ affiliate: node("one") })
        yield* eventually(listed(api), (seen) => seen.join() === "af1", { step: "10 millis", within: "10 seconds" })
        const hellos = timesOf(yield* front.calls, "hello")
        assert.strictEqual(hellos.length, 5)
        assert.strictEqual(hellos[0], 0, "no backoff before the first attempt (Q18)")
        for (let k = 0; k < 4; k++) {
          const interval = 500 * 1.5 ** k
          const gap = hellos[k + 1]! - hellos[k]!
          assert.isAtLeast(gap, interval * 0.5 - 10, `delay ${k}`)
          assert.isAtMost(gap, interval * 1.5 + 10, `delay ${k}`)
        }
      })
    )

    it.effect("starts the backoff over after a healthy session", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        // three failures use up three backoff steps before the first healthy session
        const front = yield* instrument(api, { failures: (method, n) => method === "hello" && n <= 3 })
        const { client } = yield* startClient(clientOptions("af1"), only(front.api))
        yield* client.setLocalData({ affiliate: node("one") })
        yield* eventually(listed(api), (seen) => seen.length === 1, { within: "10 seconds" })
        yield* TestClock.adjust("5 minutes")
        const killedAt = yield* Clock.currentTimeMillis
        yield* front.killWatches
        const hellos = yield* eventually(
          Effect.map(front.calls, (calls) => timesOf(calls, "hello")),
          (times) => times.length === 5,
          { step: "10 millis", within: "10 seconds" }
        )
        // the fourth step would be 1687.5 ms ± 50 %; a fresh backoff is 500 ms ± 50 %
        assert.isAtLeast(hellos[4]! - killedAt, 250 - 10)
        assert.isAtMost(hellos[4]! - killedAt, 750 + 10)
      })
    )

    it.effect("retries a failed refresh after the backoff, not after TTL/2 (Q18)", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const front = yield* instrument(api, { failures: (method, n) => method === "affiliateUpdate" && n <= 2 })
        const { client } = yield* startClient(clientOptions("af1", { ttl: "30 minutes" }), only(front.api))
        yield* client.setLocalData({ affiliate: node("one") })
        yield* eventually(listed(api), (seen) => seen.join() === "af1", { step: "50 millis", within: "5 seconds" })
        assert.deepStrictEqual(
          (yield* front.calls).filter((c) => c.method === "affiliateUpdate").map((c) => c.failed),
          [true, true, false]
        )
      })
    )

    it.effect("sends a delete until it succeeds once, then never again (Q18)", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const front = yield* instrument(api, { failures: (method, n) => method === "affiliateDelete" && n <= 2 })
        const { client } = yield* startClient(clientOptions("af1"), only(front.api))
        yield* client.setLocalData({ affiliate: node("one") })
        yield* eventually(listed(api), (seen) => seen.length === 1)
        yield* client.deleteLocalAffiliate
        yield* eventually(listed(api), (seen) => seen.length === 0, { step: "50 millis", within: "5 seconds" })
        const deletes = Effect.map(front.calls, (calls) => calls.filter((c) => c.method === "affiliateDelete"))
        assert.deepStrictEqual(
          (yield* deletes).map((c) => c.failed),
          [true, true, false]
        )
        const updates = timesOf(yield* front.calls, "affiliateUpdate").length
        for (let i = 0; i < 12; i++) {
          yield* TestClock.adjust("10 minutes")
          yield* settle
        }
        assert.strictEqual((yield* deletes).length, 3, "no delete after the one that succeeded")
        assert.strictEqual(timesOf(yield* front.calls, "affiliateUpdate").length, updates, "nothing published")
        // publishing again works
        yield* client.setLocalData({ affiliate: node("back") })
        yield* eventually(listed(api), (seen) => seen.join() === "af1")
      })
    )
  })

  describe("what peers send", () => {
    it.effect("drops a peer whose data stops opening, until it publishes readable data again (Q21)", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const one = yield* startClient(clientOptions("af1"), only(api))
        const two = yield* startClient(clientOptions("af2", { ttl: "10 seconds" }), only(api))
        yield* two.client.setLocalData({ affiliate: node("two") })
        yield* eventually(seenIds(one.client), (seen) => seen.join() === "af2")
        // anyone who knows the IDs can write: garbage data under af2
        yield* Effect.orDie(
          api.affiliateUpdate({
            clusterId: "c1",
            affiliateId: "af2",
            data: new Uint8Array(64).fill(1),
            endpoints: [],
            ttl: Duration.seconds(10)
          })
        )
        yield* eventually(seenIds(one.client), (seen) => seen.length === 0)
        // af2's next refresh (TTL/2) brings it back
        yield* eventually(seenIds(one.client), (seen) => seen.join() === "af2", { within: "6 seconds" })
      })
    )

    it.effect("skips a forged endpoint blob and keeps the peer with its real endpoints (Q19)", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const one = yield* startClient(clientOptions("af1"), only(api))
        const two = yield* startClient(clientOptions("af2"), only(api))
        yield* two.client.setLocalData({
          affiliate: node("two"),
          endpoints: [{ ip: Uint8Array.of(1, 2, 3, 4), port: 5678 }]
        })
        yield* eventually(one.client.affiliates, (list) => list.length === 1)
        const cipher = createCipheriv("aes-256-ecb", key32, null)
        cipher.setAutoPadding(false)
        const block = new Uint8Array(16)
        block[0] = 200
        const forged = new Uint8Array(Buffer.concat([cipher.update(block), cipher.final()]))
        yield* Effect.orDie(
          api.affiliateUpdate({ clusterId: "c1", affiliateId: "af2", endpoints: [forged], ttl: Duration.minutes(1) })
        )
        yield* settle
        const listedApi = yield* Effect.orDie(api.list({ clusterId: "c1" }))
        assert.strictEqual(listedApi.find((a) => a.id === "af2")?.endpoints.length, 2, "the forged blob is stored")
        yield* eventually(one.client.affiliates, (list) => list.length === 1)
        assert.deepStrictEqual(endpointsOf((yield* one.client.affiliates)[0]), ["01020304:5678"])
      })
    )
  })

  describe("options and local data", () => {
    const build = (options: Partial<DiscoveryClient.ClientOptions>) =>
      Effect.gen(function* () {
        const { api } = yield* server()
        return yield* DiscoveryClient.make(clientOptions("af1", options)).pipe(
          Effect.provide(Layer.succeed(ClusterConnector, ClusterConnector.of({ connect: only(api) })))
        )
      })

    it.effect("refuses unusable options", () =>
      Effect.gen(function* () {
        const cases: Array<[Partial<DiscoveryClient.ClientOptions>, string]> = [
          [{ ttl: "1 nanos" }, "at least 2 ns"],
          [{ ttl: 1n }, "at least 2 ns"],
          [{ ttl: 0 }, "at least 2 ns"],
          [{ ttl: "31 minutes" }, "at most 30 minutes"],
          [{ ttl: "Infinity" }, "finite"],
          [{ key: new Uint8Array(20) }, "16, 24 or 32"],
          [{ clusterId: "" }, "cluster ID can't be empty"],
          [{ affiliateId: "x".repeat(257) }, "longer than 256"],
          [{ endpoint: "" }, "endpoint"],
          [{ maxRedirects: -1 }, "maxRedirects"]
        ]
        for (const [options, message] of cases) {
          const error = yield* Effect.flip(build(options))
          assert.strictEqual(error._tag, "InvalidClientOptions")
          assert.include(error.message, message)
        }
        yield* build({ ttl: 2n })
        yield* build({ ttl: "30 minutes", key: new Uint8Array(16) })
      })
    )

    it("derives the keepalive interval from the TTL: max(10 s, TTL/10)", () => {
      assert.strictEqual(Duration.toMillis(DiscoveryClient.keepaliveTime("1 minute")), 10_000)
      assert.strictEqual(Duration.toMillis(DiscoveryClient.keepaliveTime("30 minutes")), 180_000)
      assert.strictEqual(Duration.toMillis(DiscoveryClient.keepaliveTime("200 seconds")), 20_000)
    })

    it.effect("refuses local data the service would reject and keeps what was published", () =>
      Effect.gen(function* () {
        const { api } = yield* server()
        const { client } = yield* startClient(clientOptions("af1"), only(api))
        const two = yield* startClient(clientOptions("af2"), only(api))
        yield* client.setLocalData({ affiliate: node("kept") })
        yield* eventually(hostnameSeen(two.client, "af1"), (h) => h === "kept")
        const bad: Array<[Parameters<Client["setLocalData"]>, string]> = [
          [[{ affiliate: { hostname: "h".repeat(2100) } }], "at most 2048"],
          [[{ affiliate: {}, endpoints: [{ ip: new Uint8Array(16), port: -1 }] }], "not a uint32"],
          [[{ affiliate: {}, endpoints: [{ ip: new Uint8Array(30), port: 1 }] }], "at most 32"],
          [[{ affiliate: {} }, [{ affiliateId: "", endpoints: [] }]], "can't be empty"]
        ]
        for (const [args, message] of bad) {
          const error = yield* Effect.flip(client.setLocalData(...args))
          assert.strictEqual(error._tag, "InvalidLocalData")
          assert.include(error.message, message)
        }
        yield* TestClock.adjust("1 minute")
        yield* settle
        assert.strictEqual(yield* hostnameSeen(two.client, "af1"), "kept")
        const [entry] = (yield* Effect.orDie(api.list({ clusterId: "c1" }))).filter((a) => a.id === "af1")
        assert.isAbove(entry?.data.length ?? 0, 28)
        assert.notStrictEqual(toHex(entry!.data), "")
      })
    )
  })
})
