/**
 * Our discovery client against the original Go server and ours, alone and in
 * mixed clusters with real Go client nodes: each side must open what the other
 * sealed, and identical endpoints sealed by both must deduplicate on the
 * server (which only happens when the sealing is byte-exact).
 */
import { randomBytes } from "node:crypto"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Duration, Effect, Option, Stream } from "effect"
import * as GrpcClient from "../../src/adapters/grpc/GrpcClient.ts"
import type { ResumePoint } from "../../src/ports/ClusterApi.ts"
import { createDiscoveryClient, type PromiseClient } from "../../src/client/index.ts"
import { buildGoBinaries, type GoBinaries } from "./support/goBuild.ts"
import { GoNodes } from "./support/goNodes.ts"
import { freePort, type ServerOptions, type ServerProcess, startGoServer, startOurServer } from "./support/processes.ts"

let binaries: GoBinaries
beforeAll(() => {
  binaries = buildGoBinaries()
}, 600_000)

const servers: ReadonlyArray<{
  readonly name: string
  readonly start: (options?: ServerOptions) => Promise<ServerProcess>
}> = [
  ...[1, 2].map((threads) => ({
    name: `our server (--io-threads ${threads})`,
    start: (options?: ServerOptions) =>
      startOurServer({ ...options, extraFlags: [...(options?.extraFlags ?? []), `--io-threads=${threads}`] })
  })),
  { name: "the original Go server", start: (options) => startGoServer(binaries.discoveryService, options) }
]

const ipv4 = (text: string) => Uint8Array.from(text.split(".").map(Number))
const cluster = () => randomBytes(12).toString("base64url")

const until = async <A>(read: () => A, predicate: (value: A) => boolean, what: string, timeoutMs = 15_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = read()
    if (predicate(value)) return value
    if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value)}`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

for (const server of servers) {
  describe(`our client against ${server.name}`, () => {
    const running: Array<ServerProcess> = []
    const clients: Array<PromiseClient> = []
    const goNodes: Array<GoNodes> = []
    const start = async (options?: ServerOptions) => {
      const started = await server.start(options)
      running.push(started)
      return started
    }
    const client = async (endpoint: string, clusterId: string, affiliateId: string, key: Uint8Array) => {
      const created = await createDiscoveryClient({
        endpoint,
        clusterId,
        affiliateId,
        key,
        ttl: "1 minute",
        tls: false
      })
      clients.push(created)
      return created
    }

    afterAll(async () => {
      await Promise.all(clients.map((c) => c.close()))
      await Promise.all(goNodes.map((n) => n.close()))
      await Promise.all(running.map((s) => s.stop()))
    })

    it("two of our clients find each other, see an endpoint added and a delete", { timeout: 60_000 }, async () => {
      const srv = await start()
      const key = randomBytes(32)
      const c = cluster()
      const one = await client(srv.address, c, "ts-1", key)
      const two = await client(srv.address, c, "ts-2", key)
      await one.setLocalData({ affiliate: { nodeId: "ts-1", hostname: "one", addresses: [ipv4("10.0.0.1")] } })
      await two.setLocalData({ affiliate: { nodeId: "ts-2", hostname: "two" } })
      const seen = await until(
        () => two.affiliates(),
        (a) => a.length === 1 && a[0]!.affiliate.hostname === "one",
        "two sees one"
      )
      assert.deepStrictEqual([...seen[0]!.affiliate.addresses[0]!], [10, 0, 0, 1])
      await until(
        () => one.affiliates(),
        (a) => a[0]?.affiliate.hostname === "two",
        "one sees two"
      )
      assert.deepStrictEqual([...(one.publicIp() ?? [])], [127, 0, 0, 1])

      await one.setLocalData({
        affiliate: { nodeId: "ts-1", hostname: "one" },
        endpoints: [{ ip: ipv4("1.2.3.4"), port: 5678 }]
      })
      await until(
        () => two.affiliates(),
        (a) => a[0]?.endpoints.some((e) => e.port === 5678) === true,
        "two sees one's endpoint"
      )
      await one.deleteLocalAffiliate()
      await until(
        () => two.affiliates(),
        (a) => a.length === 0,
        "two sees one deleted"
      )
    })

    it("a mixed cluster of Go nodes and our clients opens each other's data and deduplicates endpoints", {
      timeout: 60_000
    }, async () => {
      const srv = await start()
      const key = randomBytes(32)
      const c = cluster()
      const go = new GoNodes(binaries.nodes)
      goNodes.push(go)
      await go.start("go-1", { endpoint: srv.address, cluster: c, key, ttl: "1m" })
      const ts = await client(srv.address, c, "ts-1", key)
      const observer = await client(srv.address, c, "ts-observer", key)

      // Both report the same endpoint for go-1: the server keeps one blob only if the bytes are identical.
      await go.set("go-1", {
        hostname: "go-host",
        addresses: ["10.1.1.1"],
        endpoints: [{ ip: "192.168.1.10", port: 51820 }]
      })
      await ts.setLocalData(
        { affiliate: { nodeId: "ts-1", hostname: "ts-host" }, endpoints: [{ ip: ipv4("10.2.2.2"), port: 7 }] },
        [{ affiliateId: "go-1", endpoints: [{ ip: ipv4("192.168.1.10"), port: 51820 }] }]
      )
      await observer.setLocalData({ affiliate: { nodeId: "ts-observer", hostname: "observer" } })

      const fromGo = await go.until("go-1", (a) => a.length === 2 && a.some((p) => p.hostname === "ts-host"), 15_000)
      const tsSeenByGo = fromGo.find((p) => p.id === "ts-1")!
      assert.deepStrictEqual(tsSeenByGo.endpoints, [{ ip: "10.2.2.2", port: 7 }])

      const seen = await until(
        () => observer.affiliates(),
        (a) => a.length === 2 && a.some((p) => p.affiliate.hostname === "go-host"),
        "observer sees both"
      )
      const goSeen = seen.find((p) => p.id === "go-1")!
      assert.strictEqual(goSeen.affiliate.nodeId, "go-1")
      assert.deepStrictEqual([...goSeen.affiliate.addresses[0]!], [10, 1, 1, 1])
      assert.deepStrictEqual(
        goSeen.endpoints.map((e) => [[...e.ip].join("."), e.port]),
        [["192.168.1.10", 51820]],
        "one blob for the endpoint both sides reported"
      )
      await go.stop("go-1")
    })

    it("a watch that asks to resume: ours resumes, the original answers with the snapshot it always sends", {
      timeout: 60_000
    }, async () => {
      const srv = await start()
      const c = cluster()
      const [firstEvent, resumedEvent] = await Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const api = yield* GrpcClient.make({ endpoint: srv.address, tls: false })
            yield* api.affiliateUpdate({
              clusterId: c,
              affiliateId: "af1",
              data: Uint8Array.of(1),
              endpoints: [],
              ttl: Duration.minutes(1)
            })
            const take = (resume?: ResumePoint) =>
              Stream.runHead(api.watch({ clusterId: c, resume })).pipe(
                Effect.map((head) => head.pipe(Option.getOrThrow))
              )
            const first = yield* take()
            const epoch = first._tag === "Snapshot" ? first.epoch : undefined
            // the original names no epoch: a client that never got one still asks, with a stale point
            const second = yield* take({ epoch: epoch ?? "from-elsewhere", revision: first.revision })
            return [first, second] as const
          })
        )
      )
      if (server.name.startsWith("our server")) {
        assert.isString(firstEvent._tag === "Snapshot" ? firstEvent.epoch : undefined)
        assert.strictEqual(resumedEvent._tag, "Resumed")
      } else {
        assert.deepStrictEqual(firstEvent, {
          _tag: "Snapshot",
          revision: 0,
          affiliates: [{ id: "af1", data: Uint8Array.of(1), endpoints: [] }]
        })
        assert.deepStrictEqual(resumedEvent, firstEvent)
      }
    })

    it("our client comes back after its server restarts and sees the cluster again", { timeout: 60_000 }, async () => {
      const port = await freePort()
      const srv = await start({ port })
      const key = randomBytes(32)
      const c = cluster()
      const one = await client(srv.address, c, "ts-1", key)
      const two = await client(srv.address, c, "ts-2", key)
      await one.setLocalData({ affiliate: { nodeId: "ts-1", hostname: "one" } })
      await two.setLocalData({ affiliate: { nodeId: "ts-2", hostname: "two" } })
      await until(
        () => one.affiliates(),
        (a) => a[0]?.affiliate.hostname === "two",
        "one sees two"
      )
      await srv.stop()
      await start({ port })
      // the state is gone with the process: the clients republish, watch again from a snapshot, and meet again
      await two.setLocalData({ affiliate: { nodeId: "ts-2", hostname: "two-again" } })
      await until(
        () => one.affiliates(),
        (a) => a[0]?.affiliate.hostname === "two-again",
        "one sees two again",
        30_000
      )
      await until(
        () => two.affiliates(),
        (a) => a[0]?.affiliate.hostname === "one",
        "two sees one again",
        30_000
      )
    })

    it("our client follows a redirect to another server", { timeout: 60_000 }, async () => {
      const target = await start()
      const redirecting = await start({ redirect: target.address })
      const key = randomBytes(32)
      const c = cluster()
      const moved = await client(redirecting.address, c, "ts-moved", key)
      const stayed = await client(target.address, c, "ts-stayed", key)
      await moved.setLocalData({ affiliate: { nodeId: "ts-moved", hostname: "moved" } })
      await stayed.setLocalData({ affiliate: { nodeId: "ts-stayed", hostname: "stayed" } })
      await until(
        () => stayed.affiliates(),
        (a) => a[0]?.affiliate.hostname === "moved",
        "the redirected client publishes on the target"
      )
      assert.strictEqual(moved.endpoint(), target.address)
    })
  })
}
