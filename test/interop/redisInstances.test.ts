/**
 * Real Go discovery-client nodes (the published client) spread over three of
 * our servers sharing one Redis (`--state redis://…`): they form one cluster
 * and see each other, and a change published through one instance reaches
 * the nodes on the other two. Redis is a real `redis-server` the test starts.
 */
import { randomBytes } from "node:crypto"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { type RedisServer, startRedis } from "../adapters/redis/redisServer.ts"
import { buildGoBinaries, type GoBinaries } from "./support/goBuild.ts"
import { GoNodes } from "./support/goNodes.ts"
import { type ServerProcess, startOurServer } from "./support/processes.ts"

let binaries: GoBinaries
let redis: (RedisServer & { cleanup(): Promise<void> }) | undefined
const running: Array<ServerProcess> = []
const nodes: Array<GoNodes> = []

beforeAll(async () => {
  binaries = buildGoBinaries()
  redis = await startRedis()
}, 600_000)

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.close()))
  await Promise.all(running.map((s) => s.stop()))
  await redis?.cleanup()
})

describe("Go discovery-client nodes over three instances on one Redis", () => {
  it("form one cluster, see each other, and follow changes made through another instance", {
    timeout: 90_000
  }, async () => {
    const prefix = `interop-${randomBytes(4).toString("hex")}:`
    const flags = [`--state=${redis!.url}`, `--state-key-prefix=${prefix}`]
    const servers = await Promise.all([0, 1, 2].map(() => startOurServer({ extraFlags: flags })))
    running.push(...servers)
    const go = new GoNodes(binaries.nodes)
    nodes.push(go)
    const key = randomBytes(32)
    const cluster = randomBytes(12).toString("base64url")
    const names = ["n0", "n1", "n2", "n3", "n4", "n5"]
    for (const [i, name] of names.entries()) {
      await go.start(name, { endpoint: servers[i % 3]!.address, cluster, key, ttl: "1m" })
      await go.set(name, { hostname: `host-${name}`, endpoints: [{ ip: "10.0.0.1", port: 1000 + i }] })
    }
    for (const name of names) {
      const seen = await go.until(name, (peers) => peers.length === names.length - 1, 30_000)
      assert.deepStrictEqual(
        seen.map((peer) => peer.hostname).sort(),
        names.filter((other) => other !== name).map((other) => `host-${other}`)
      )
    }
    await go.set("n0", { hostname: "host-n0-renamed", endpoints: [{ ip: "10.0.0.1", port: 1000 }] })
    for (const name of names.slice(1)) {
      await go.until(name, (peers) => peers.some((peer) => peer.hostname === "host-n0-renamed"), 30_000)
    }
    await go.stop("n1")
    for (const name of ["n0", "n2", "n3", "n4", "n5"]) await go.stop(name)
  })
})
