/**
 * The real Go discovery client (T58–T61 of PROTOCOL.md §6) against our server,
 * and against the original Go server too, which proves the scenarios
 * themselves: the same test passing on both is the compatibility claim.
 */
import { randomBytes } from "node:crypto"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { buildGoBinaries, type GoBinaries } from "./support/goBuild.ts"
import { type Discovered, GoNodes } from "./support/goNodes.ts"
import { freePort, type ServerOptions, type ServerProcess, startGoServer, startOurServer } from "./support/processes.ts"

let binaries: GoBinaries
beforeAll(() => {
  binaries = buildGoBinaries()
}, 600_000)

type Start = (options?: ServerOptions) => Promise<ServerProcess>

const servers: ReadonlyArray<{ readonly name: string; readonly start: () => Start }> = [
  ...[1, 2].map((threads) => ({
    name: `our server (--io-threads ${threads})`,
    start: (): Start => (options) =>
      startOurServer({ ...options, extraFlags: [...(options?.extraFlags ?? []), `--io-threads=${threads}`] })
  })),
  { name: "the original Go server", start: () => (options) => startGoServer(binaries.discoveryService, options) }
]

const ids = (affiliates: ReadonlyArray<Discovered>) => affiliates.map((a) => a.id).sort()
const ports = (affiliate: Discovered | undefined) =>
  (affiliate?.endpoints ?? []).map((e) => e.port).sort((a, b) => a - b)
const cluster = () => randomBytes(12).toString("base64url")

for (const server of servers) {
  describe(`Go discovery-client against ${server.name}`, () => {
    const running: Array<ServerProcess> = []
    const nodes: Array<GoNodes> = []
    const start = async (options?: ServerOptions) => {
      const started = await server.start()(options)
      running.push(started)
      return started
    }
    const spawnNodes = () => {
      const created = new GoNodes(binaries.nodes)
      nodes.push(created)
      return created
    }

    afterAll(async () => {
      await Promise.all(nodes.map((n) => n.close()))
      await Promise.all(running.map((s) => s.stop()))
    })

    it("T58 two clients find each other, see an endpoint added and a delete", { timeout: 60_000 }, async () => {
      const srv = await start()
      const go = spawnNodes()
      const key = randomBytes(32)
      const c = cluster()
      await go.start("a1", { endpoint: srv.address, cluster: c, key, ttl: "1m" })
      await go.start("a2", { endpoint: srv.address, cluster: c, key, ttl: "1m" })
      await go.set("a1", { hostname: "host-1", addresses: ["10.0.0.1"] })
      await go.set("a2", { hostname: "host-2", addresses: ["fd00::2"] })

      const seenBy2 = await go.until("a2", (a) => a.length === 1 && a[0]!.hostname === "host-1")
      assert.deepStrictEqual(seenBy2, [{ id: "a1", hostname: "host-1", addresses: ["10.0.0.1"], endpoints: [] }])
      const seenBy1 = await go.until("a1", (a) => a.length === 1 && a[0]!.hostname === "host-2")
      assert.deepStrictEqual(seenBy1, [{ id: "a2", hostname: "host-2", addresses: ["fd00::2"], endpoints: [] }])
      assert.strictEqual((await go.state("a1")).publicIp, "127.0.0.1")

      await go.set("a1", { hostname: "host-1", addresses: ["10.0.0.1"], endpoints: [{ ip: "1.2.3.4", port: 5678 }] })
      await go.until("a2", (a) => a[0]?.endpoints?.some((e) => e.ip === "1.2.3.4" && e.port === 5678) === true)

      await go.remove("a1")
      await go.until("a2", (a) => a.length === 0)
      await go.stop("a1")
      await go.stop("a2")
    })

    it("T59 an affiliate whose client stops without deleting expires", { timeout: 60_000 }, async () => {
      const srv = await start({ gcInterval: "1s" })
      const go = spawnNodes()
      const key = randomBytes(32)
      const c = cluster()
      await go.start("short", { endpoint: srv.address, cluster: c, key, ttl: "1s" })
      await go.start("long", { endpoint: srv.address, cluster: c, key, ttl: "1m" })
      await go.set("short", { hostname: "short-lived" })
      await go.set("long", { hostname: "long-lived" })
      await go.until("long", (a) => ids(a).join() === "short")
      await go.stop("short")
      await go.until("long", (a) => a.length === 0, 10_000)
      await go.stop("long")
    })

    // TTL 100 s: the client pings every 10 s (max(10 s, TTL/10)) and refreshes only every 50 s, so four pings in a row
    // meet the server's 10 s rule with no data from the server in between.
    it("keeps the watches of clients pinging every 10 s over four of their pings, with no reconnect", {
      timeout: 90_000
    }, async () => {
      const srv = await start()
      const go = spawnNodes()
      const key = randomBytes(32)
      const c = cluster()
      await go.start("p1", { endpoint: srv.address, cluster: c, key, ttl: "100s" })
      await go.start("p2", { endpoint: srv.address, cluster: c, key, ttl: "100s" })
      await go.set("p1", { hostname: "p1" })
      await go.set("p2", { hostname: "p2" })
      await go.until("p2", (a) => ids(a).join() === "p1")
      // A Watch is logged when it ends: a client sent away for its pings would reconnect and log one.
      const endedWatches = () => srv.output.filter((line) => line.includes("/Watch")).length
      const before = endedWatches()
      await new Promise((resolve) => setTimeout(resolve, 45_000))
      await go.set("p1", { hostname: "p1-later" })
      await go.until("p2", (a) => a[0]?.hostname === "p1-later", 10_000)
      assert.strictEqual(endedWatches(), before, "no watch ended while the clients pinged")
      await go.stop("p1")
      await go.stop("p2")
    })

    for (const n of [5, 15, 50]) {
      it(`T60 a cluster of ${n} clients converges with reported endpoints`, { timeout: 120_000 }, async () => {
        // Each simulated node presents its own address, as real nodes would, so per-IP rate limits apply per node.
        const srv = await start({ trustXRealIp: true })
        const go = spawnNodes()
        const key = randomBytes(32)
        const c = cluster()
        const name = (i: number) => `n${i}`
        for (let i = 0; i < n; i++) {
          const realIp = `198.51.100.${i + 1}`
          await go.start(name(i), { endpoint: srv.address, cluster: c, key, ttl: "10s", realIp })
        }
        for (let i = 0; i < n; i++) {
          const next = (i + 1) % n
          await go.set(name(i), {
            hostname: name(i),
            endpoints: [{ ip: "0.0.0.0", port: (i + 1) * 10 }],
            others: [{ affiliate: name(next), endpoints: [{ ip: "::", port: (next + 1) * 100 }] }]
          })
        }
        for (let i = 0; i < n; i++) {
          const seen = await go.until(
            name(i),
            (a) => a.length === n - 1 && a.every((peer) => (peer.endpoints ?? []).length === 2),
            60_000
          )
          for (const peer of seen) {
            const id = Number(peer.id.slice(1))
            assert.deepStrictEqual(ports(peer), [(id + 1) * 10, (id + 1) * 100], `${name(i)} sees ${peer.id}`)
          }
        }
        for (let i = 0; i < n; i++) await go.stop(name(i))
      })
    }

    it("T61 clients follow a redirect to another server and find each other there", { timeout: 90_000 }, async () => {
      const srv2 = await start()
      const port1 = await freePort()
      let srv1 = await start({ port: port1 })
      const go = spawnNodes()
      const key = randomBytes(32)
      const c = cluster()
      await go.start("r1", { endpoint: srv1.address, cluster: c, key, ttl: "1m" })
      await go.start("r2", { endpoint: srv1.address, cluster: c, key, ttl: "1m" })
      await go.set("r1", { hostname: "r1" })
      await go.set("r2", { hostname: "r2" })
      await go.until("r1", (a) => ids(a).join() === "r2")
      await go.until("r2", (a) => ids(a).join() === "r1")

      srv1.child.kill("SIGKILL")
      await srv1.stop()
      srv1 = await start({ port: port1, redirect: srv2.address })

      await go.set("r1", { hostname: "r1-moved" })
      await go.until("r2", (a) => a[0]?.hostname === "r1-moved", 30_000)
      // No client stream is left on the redirecting server: its graceful stop completes, with status 0.
      await srv1.stop()
      assert.deepStrictEqual([srv1.child.exitCode, srv1.child.signalCode], [0, null])
      await go.set("r1", { hostname: "r1-moved", endpoints: [{ ip: "1.2.3.4", port: 4242 }] })
      await go.until("r2", (a) => a[0]?.endpoints?.some((e) => e.port === 4242) === true, 30_000)
      await go.stop("r1")
      await go.stop("r2")
    })
  })
}
