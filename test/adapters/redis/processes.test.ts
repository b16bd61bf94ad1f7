/**
 * Several service processes on one real Redis, black-box over gRPC on
 * loopback: each is the `discovery-service` command started with
 * `--state redis://…`. Changes made through one instance reach the watchers
 * of the others in the same order; kill -9 of an instance under 16 writers
 * loses no acknowledged update; Redis stopped and started again makes calls
 * fail with UNAVAILABLE and `/readyz` answer 503, then the instances recover
 * by themselves. Every process is started here and stopped by PID.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { Duration, Effect, Fiber, Stream } from "effect"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { GrpcClient } from "../../../src/adapters/grpc/index.ts"
import type { ClusterApi, WatchEvent } from "../../../src/ports/ClusterApi.ts"
import { listening } from "../../e2e/listening.ts"
import { selfSigned } from "../grpc/certificates.ts"
import { freePort, redisClusterForTests, redisForTests, restartHeld, startRedis } from "./redisServer.ts"

const root = resolve(import.meta.dirname, "../../..")

interface Service {
  readonly child: ChildProcess
  readonly port: number
  readonly metricsPort: number
}

const redis = redisForTests()
const services: Array<Service> = []

afterAll(() => {
  for (const service of services) if (service.child.exitCode === null) service.child.kill("SIGKILL")
})

/** Starts the command on the test's Redis with `prefix`, on loopback ports the system picks. */
const startService = async (
  prefix: string,
  extra: ReadonlyArray<string> = [],
  state = () => `--state=${redis.server.url}`,
  env: Record<string, string> = {}
): Promise<Service> => {
  const child = spawn(
    process.execPath,
    [
      "src/cli/main.ts",
      state(),
      `--state-key-prefix=${prefix}`,
      ...(extra.some((flag) => flag.startsWith("--addr=")) ? [] : ["--addr=127.0.0.1:0"]),
      "--landing-addr=",
      "--metrics-addr=127.0.0.1:0",
      "--rate-limit-rps=0",
      "--gc-interval=1s",
      ...extra
    ],
    { cwd: root, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } }
  )
  const { ports } = await listening(child)
  const service = { child, port: ports.port!, metricsPort: ports.metrics_port! }
  services.push(service)
  return service
}

const clientOf = (service: Service) =>
  GrpcClient.make({ endpoint: `127.0.0.1:${service.port}`, tls: false, callTimeout: "5 seconds" })

const readyz = async (service: Service): Promise<number> =>
  (await fetch(`http://127.0.0.1:${service.metricsPort}/readyz`)).status

const update = (api: ClusterApi["Service"], clusterId: string, affiliateId: string, data: string) =>
  api.affiliateUpdate({
    clusterId,
    affiliateId,
    data: new TextEncoder().encode(data),
    endpoints: [],
    ttl: Duration.minutes(5)
  })

const textOf = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

const describeEvent = (event: WatchEvent) => {
  switch (event._tag) {
    case "Snapshot":
      return `snapshot:${event.affiliates.length}`
    case "Resumed":
      return `resumed:${event.revision}`
    case "Updated":
      return `${event.affiliate.id}=${textOf(event.affiliate.data)}`
    case "Deleted":
      return `-${event.affiliateId}`
  }
}

describe("service processes on one Redis", () => {
  it.live(
    "updates through one instance reach the watchers of the other two in the same order",
    () =>
      Effect.gen(function* () {
        const prefix = `procs-${Date.now()}:`
        const [a, b, c] = yield* Effect.promise(() =>
          Promise.all([startService(prefix), startService(prefix), startService(prefix)])
        )
        const [viaA, viaB, viaC] = yield* Effect.all([clientOf(a!), clientOf(b!), clientOf(c!)])
        const clusterId = "shared"
        const changes = 40
        const watchOn = (api: ClusterApi["Service"]) =>
          Effect.forkChild(Stream.runCollect(Stream.take(api.watch({ clusterId }), changes + 1)))
        const onB = yield* watchOn(viaB!)
        const onC = yield* watchOn(viaC!)
        yield* Effect.sleep("300 millis")
        for (let i = 0; i < changes; i++) {
          const via = i % 2 === 0 ? viaA! : viaB!
          if (i % 7 === 6) yield* via.affiliateDelete({ clusterId, affiliateId: `af${i % 5}` })
          else yield* update(via, clusterId, `af${i % 5}`, `v${i}`)
        }
        const seenB = (yield* Fiber.join(onB)).map(describeEvent)
        const seenC = (yield* Fiber.join(onC)).map(describeEvent)
        assert.strictEqual(seenB.length, changes + 1)
        assert.deepStrictEqual(seenC, seenB)
        const listed = (yield* viaC!.list({ clusterId })).map((x) => `${x.id}=${textOf(x.data)}`).sort()
        const replayed = new Map<string, string>()
        for (const event of seenB.slice(1)) {
          if (event.startsWith("-")) replayed.delete(event.slice(1))
          else replayed.set(event.split("=")[0]!, event)
        }
        assert.deepStrictEqual([...replayed.values()].sort(), listed)
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "kill -9 of an instance under 16 writers loses no acknowledged update",
    () =>
      Effect.gen(function* () {
        const prefix = `kill-${Date.now()}:`
        const [victim, survivor] = yield* Effect.promise(() =>
          Promise.all([startService(prefix), startService(prefix)])
        )
        const viaVictim = yield* clientOf(victim!)
        const viaSurvivor = yield* clientOf(survivor!)
        const acknowledged = new Array<number>(16).fill(-1)
        const writer = (n: number) =>
          Effect.gen(function* () {
            for (let i = 0; ; i++) {
              const exit = yield* Effect.exit(update(viaVictim, "killed", `writer${n}`, String(i)))
              if (exit._tag === "Failure") return
              acknowledged[n] = i
            }
          })
        const writers = yield* Effect.forkChild(
          Effect.all(
            Array.from({ length: 16 }, (_, n) => writer(n)),
            { concurrency: "unbounded" }
          )
        )
        yield* Effect.sleep("500 millis")
        victim!.child.kill("SIGKILL")
        yield* Effect.promise(() => once(victim!.child, "exit"))
        yield* Fiber.join(writers)
        assert.isTrue(
          acknowledged.every((i) => i >= 0),
          "every writer had updates acknowledged before the kill"
        )
        const listed = new Map(
          (yield* viaSurvivor.list({ clusterId: "killed" })).map((x) => [x.id, Number(textOf(x.data))])
        )
        acknowledged.forEach((i, n) => {
          const stored = listed.get(`writer${n}`)
          assert.isDefined(stored, `writer${n} is readable through the other instance`)
          assert.isTrue(stored! >= i, `writer${n}: stored ${stored}, acknowledged ${i}`)
        })
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "Redis stopped: calls fail with UNAVAILABLE and /readyz is 503; started again: the instance recovers by itself",
    () =>
      Effect.gen(function* () {
        const prefix = `outage-${Date.now()}:`
        const service = yield* Effect.promise(() => startService(prefix))
        const api = yield* clientOf(service)
        yield* update(api, "outage", "af1", "before")
        assert.strictEqual(yield* Effect.promise(() => readyz(service)), 200)
        const watch = yield* Effect.forkChild(Stream.runCollect(api.watch({ clusterId: "outage" })))
        yield* Effect.sleep("200 millis")
        yield* Effect.promise(() => redis.server.stop(true))
        const failed = yield* Effect.flip(update(api, "outage", "af1", "during"))
        assert.strictEqual(failed._tag, "Unavailable")
        assert.include(failed.message, "state backend unavailable")
        const watchEnd = yield* Effect.flip(Fiber.join(watch))
        assert.strictEqual(watchEnd._tag, "Unavailable", "the open watch ends with UNAVAILABLE")
        assert.strictEqual(yield* Effect.promise(() => readyz(service)), 503)
        yield* Effect.promise(() => restartHeld(redis))
        let recovered = false
        for (let i = 0; i < 100 && !recovered; i++) {
          recovered = (yield* Effect.exit(update(api, "outage", "af1", "after")))._tag === "Success"
          if (!recovered) yield* Effect.sleep("100 millis")
        }
        assert.isTrue(recovered, "updates succeed again once Redis is back")
        assert.strictEqual(yield* Effect.promise(() => readyz(service)), 200)
        assert.deepStrictEqual(
          (yield* api.list({ clusterId: "outage" })).map((x) => textOf(x.data)),
          ["after"],
          "the node's republishing restores what the restart lost"
        )
        assert.isNull(service.child.exitCode, "the process stayed up")
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "discovery-state export writes a snapshot file of what the instances hold, and import loads it into another state",
    () =>
      Effect.gen(function* () {
        const from = `export-${Date.now()}:`
        const into = `import-${Date.now()}:`
        const source = yield* Effect.promise(() => startService(from))
        const viaSource = yield* clientOf(source)
        for (let i = 0; i < 3; i++) yield* update(viaSource, `moved${i}`, "af1", `data${i}`)
        const file = join(mkdtempSync(join(tmpdir(), "discovery-state-")), "state.binpb")
        const state = (command: string, prefix: string) =>
          JSON.parse(
            execFileSync(
              process.execPath,
              [
                "src/cli/stateCommand.ts",
                command,
                `--state=${redis.server.url}`,
                `--state-key-prefix=${prefix}`,
                `--snapshot-path=${file}`
              ],
              { cwd: root }
            ).toString()
          ) as Record<string, unknown>
        assert.include(state("export", from), { clusters: 3, affiliates: 3 })
        assert.include(state("import", into), { clusters: 3, affiliates: 3 })
        const target = yield* Effect.promise(() => startService(into))
        const viaTarget = yield* clientOf(target)
        for (let i = 0; i < 3; i++) {
          assert.deepStrictEqual(
            (yield* viaTarget.list({ clusterId: `moved${i}` })).map((x) => textOf(x.data)),
            [`data${i}`]
          )
        }
      }).pipe(Effect.scoped),
    60_000
  )

  it.live(
    "two instances started with --reuse-port share one port: the kernel spreads connections over both",
    () =>
      Effect.gen(function* () {
        const prefix = `reuse-${Date.now()}:`
        const port = yield* Effect.promise(() => freePort())
        const flags = [`--addr=127.0.0.1:${port}`, "--reuse-port"]
        const first = yield* Effect.promise(() => startService(prefix, flags))
        const second = yield* Effect.promise(() => startService(prefix, flags))
        assert.strictEqual(first.port, port)
        assert.strictEqual(second.port, port)
        for (let i = 0; i < 30; i++) {
          yield* Effect.scoped(
            Effect.flatMap(clientOf(first), (api) => update(api, "reused", `af${i}`, `via connection ${i}`))
          )
        }
        const served = (service: Service) =>
          Effect.promise(async () => {
            const text = await (await fetch(`http://127.0.0.1:${service.metricsPort}/metrics`)).text()
            return text
              .split("\n")
              .filter((line) => line.startsWith("grpc_server_handled_total") && line.includes("AffiliateUpdate"))
              .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0)
          })
        const [byFirst, bySecond] = [yield* served(first), yield* served(second)]
        assert.strictEqual(byFirst + bySecond, 30)
        assert.isAbove(byFirst, 0, "the first instance took connections")
        assert.isAbove(bySecond, 0, "the second instance took connections")
        const viaSecond = yield* clientOf(second)
        assert.strictEqual((yield* viaSecond.list({ clusterId: "reused" })).length, 30, "one state behind both")
      }).pipe(Effect.scoped),
    60_000
  )
})

describe("service processes on a Redis Cluster", () => {
  const redisCluster = redisClusterForTests(3)

  it.live(
    "two instances on a Redis Cluster of 3 primaries serve one state: a watcher on one sees updates made through the other",
    () =>
      Effect.gen(function* () {
        const state = () => `--state=${redisCluster.cluster.url}`
        const prefix = `cluster-${Date.now()}:`
        const [a, b] = yield* Effect.promise(() =>
          Promise.all([
            startService(prefix, ["--state-cluster"], state),
            startService(prefix, ["--state-cluster"], state)
          ])
        )
        const [viaA, viaB] = yield* Effect.all([clientOf(a!), clientOf(b!)])
        const clusterIds = Array.from({ length: 12 }, (_, i) => `spread-${i}`)
        const watch = yield* Effect.forkChild(
          Stream.runCollect(Stream.take(viaB.watch({ clusterId: clusterIds[0]! }), 4))
        )
        yield* Effect.sleep("300 millis")
        for (const [i, clusterId] of clusterIds.entries()) yield* update(viaA, clusterId, "af1", `v${i}`)
        yield* update(viaA, clusterIds[0]!, "af2", "second")
        yield* viaA.affiliateDelete({ clusterId: clusterIds[0]!, affiliateId: "af1" })
        assert.deepStrictEqual((yield* Fiber.join(watch)).map(describeEvent), [
          "snapshot:0",
          "af1=v0",
          "af2=second",
          "-af1"
        ])
        for (const [i, clusterId] of clusterIds.entries()) {
          if (i === 0) continue
          assert.deepStrictEqual(
            (yield* viaB.list({ clusterId })).map((x) => textOf(x.data)),
            [`v${i}`]
          )
        }
      }).pipe(Effect.scoped),
    60_000
  )
})

describe("a service process on Redis over TLS", () => {
  it.live("reaches Redis at a rediss:// URL, trusting the server's certificate through NODE_EXTRA_CA_CERTS", () =>
    Effect.gen(function* () {
      const dir = mkdtempSync(join(tmpdir(), "discovery-redis-tls-"))
      const pem = selfSigned("redis")
      writeFileSync(join(dir, "cert.pem"), pem.certificate)
      writeFileSync(join(dir, "key.pem"), pem.privateKey)
      const tlsPort = yield* Effect.promise(() => freePort())
      const tls = yield* Effect.acquireRelease(
        Effect.promise(() =>
          startRedis([
            "--tls-port",
            String(tlsPort),
            "--tls-cert-file",
            join(dir, "cert.pem"),
            "--tls-key-file",
            join(dir, "key.pem"),
            "--tls-ca-cert-file",
            join(dir, "cert.pem"),
            "--tls-auth-clients",
            "no"
          ])
        ),
        (server) => Effect.promise(() => server.cleanup())
      )
      assert.isDefined(tls)
      const service = yield* Effect.promise(() =>
        startService(`tls-${Date.now()}:`, [], () => `--state=rediss://127.0.0.1:${tlsPort}`, {
          NODE_EXTRA_CA_CERTS: join(dir, "cert.pem")
        })
      )
      const api = yield* clientOf(service)
      yield* update(api, "over-tls", "af1", "encrypted in transit")
      assert.deepStrictEqual(
        (yield* api.list({ clusterId: "over-tls" })).map((x) => textOf(x.data)),
        ["encrypted in transit"]
      )
    }).pipe(Effect.scoped)
  )
})
