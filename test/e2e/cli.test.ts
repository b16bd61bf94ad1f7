/**
 * Black-box test of the `discovery-service` command: it is started as a child
 * process on loopback ports, and a generic gRPC client that knows only the
 * files in proto/ (loaded at run time by @grpc/proto-loader) calls all five
 * RPCs, then SIGTERM ends an open watch with UNAVAILABLE and the process exits
 * 0. The HTTP listeners answer, and the state survives a restart through the
 * snapshot file.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtempSync, readFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { fromBinary } from "@bufbuild/protobuf"
import * as grpc from "@grpc/grpc-js"
import * as protoLoader from "@grpc/proto-loader"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Duration, Effect, Option, Stream } from "effect"
import * as GrpcClient from "../../src/adapters/grpc/GrpcClient.ts"
import { StateSnapshotSchema } from "../../src/gen/discovery/storage/discovery_pb.ts"
import type { ResumePoint } from "../../src/ports/ClusterApi.ts"
import { listening } from "./listening.ts"

const root = resolve(import.meta.dirname, "../..")

interface Started {
  readonly child: ChildProcess
  readonly port: number
  readonly landingPort: number
  readonly metricsPort: number
  readonly lines: Array<string>
}

const scratch = mkdtempSync(join(tmpdir(), "discovery-e2e-"))

/**
 * The single executable to test instead of the sources (`npm run build:exe`,
 * copied alone into an empty folder): its children run with no Node on PATH.
 */
const executable = process.env.DISCOVERY_EXECUTABLE
const noNode = executable === undefined ? undefined : { ...process.env, PATH: mkdtempSync(join(tmpdir(), "no-node-")) }

/** How to run the command with `args`: the executable under test, or the sources' entry with this Node. */
const command = (args: ReadonlyArray<string>, entry = "src/cli/main.ts"): [string, Array<string>] =>
  executable !== undefined && entry === "src/cli/main.ts"
    ? [executable, [...args]]
    : [process.execPath, [entry, ...args]]

/**
 * Starts the command (`entry`: the sources' executable unless told) on loopback ports chosen by the system, with a
 * snapshot file in a scratch directory.
 */
const start = async (
  args: ReadonlyArray<string>,
  snapshotPath = join(scratch, "state.binpb"),
  entry = "src/cli/main.ts"
): Promise<Started> => {
  const defaults = ["--landing-addr=127.0.0.1:0", "--metrics-addr=127.0.0.1:0", `--snapshot-path=${snapshotPath}`]
  const child = spawn(...command([...defaults, ...args], entry), {
    cwd: root,
    env: noNode,
    stdio: ["ignore", "pipe", "pipe"]
  })
  const { ports, lines } = await listening(child)
  return { child, port: ports.port!, landingPort: ports.landing_port!, metricsPort: ports.metrics_port!, lines }
}

const stop = async (started: Started): Promise<number | null> => {
  started.child.kill("SIGTERM")
  const [code] = (await once(started.child, "exit")) as [number | null]
  return code
}

/** A client of the service's proto; `ownConnection` gives it a connection no other client shares. */
const loadClient = (port: number, ownConnection = false) => {
  const definition = protoLoader.loadSync("discovery/server/cluster.proto", {
    includeDirs: [resolve(root, "proto")],
    keepCase: true,
    longs: String,
    defaults: true
  })
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    sidero: { discovery: { server: { Cluster: grpc.ServiceClientConstructor } } }
  }
  return new loaded.sidero.discovery.server.Cluster(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    ...(ownConnection ? { "grpc.use_local_subchannel_pool": 1 } : {})
  })
}

interface HealthClient extends grpc.Client {
  Check(
    request: { readonly service: string },
    callback: (error: grpc.ServiceError | null, response?: { readonly status: string }) => void
  ): grpc.ClientUnaryCall
}

const loadHealthClient = (port: number): HealthClient => {
  const definition = protoLoader.loadSync("grpc/health/v1/health.proto", {
    includeDirs: [resolve(root, "proto")],
    enums: String,
    defaults: true
  })
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } }
  }
  return new loaded.grpc.health.v1.Health(
    `127.0.0.1:${port}`,
    grpc.credentials.createInsecure()
  ) as unknown as HealthClient
}

interface Affiliate {
  readonly id: string
  readonly data: Uint8Array
  readonly endpoints: ReadonlyArray<Uint8Array>
}

interface Reply {
  readonly client_ip: Uint8Array
  readonly redirect: { readonly endpoint: string }
  readonly affiliates: ReadonlyArray<Affiliate>
  readonly deleted: boolean
}

type Unary = (request: object, callback: (error: grpc.ServiceError | null, response: Reply) => void) => void

const call = (client: grpc.Client, method: string, request: object): Promise<Reply> =>
  new Promise((resolveCall, reject) =>
    (client as unknown as Record<string, Unary>)[method]!.call(client, request, (error, response) =>
      error ? reject(error) : resolveCall(response)
    )
  )

const failure = (promise: Promise<unknown>): Promise<grpc.ServiceError> =>
  promise.then(
    () => assert.fail("expected the call to fail"),
    (error: grpc.ServiceError) => error
  )

/**
 * Each case starts one to three service processes; a cold start (no compile
 * cache yet, as in a fresh clone) on a loaded 2-core machine can take
 * seconds, so the default 5 s is too tight.
 */
const processTimeout = 30_000

/** The black-box tests run with the port served on the state's thread and by two I/O threads. */
const threadChoices = [1, 2] as const

for (const threads of threadChoices)
  describe(`discovery-service command, --io-threads ${threads}`, { timeout: processTimeout }, () => {
    let server: Started
    let client: grpc.Client

    beforeAll(async () => {
      server = await start([
        "--addr",
        "127.0.0.1:0",
        "--redirect-endpoint",
        "other.example:443",
        `--io-threads=${threads}`
      ])
      client = loadClient(server.port)
    })

    afterAll(() => {
      client?.close()
      server?.child.kill("SIGKILL")
    })

    it("answers Hello, and refuses an invalid one, on whichever thread a connection lands", async () => {
      const clients = Array.from({ length: 8 }, () => loadClient(server.port, true))
      try {
        for (const each of clients) {
          const hello = await call(each, "Hello", { cluster_id: "e2e", client_version: "v1.8.3" })
          assert.deepStrictEqual([...hello.client_ip], [127, 0, 0, 1])
          assert.strictEqual(hello.redirect.endpoint, "other.example:443")
          const refused = await failure(call(each, "Hello", { cluster_id: "", client_version: "v1.8.3" }))
          assert.strictEqual(refused.code, grpc.status.INVALID_ARGUMENT)
        }
      } finally {
        for (const each of clients) each.close()
      }
    })

    it("serves all five RPCs to a client that has only the proto files", async () => {
      const hello = await call(client, "Hello", { cluster_id: "e2e", client_version: "v1.8.3" })
      assert.deepStrictEqual([...hello.client_ip], [127, 0, 0, 1])
      assert.strictEqual(hello.redirect.endpoint, "other.example:443")

      const watch = (client as unknown as { Watch: (request: object) => grpc.ClientReadableStream<Reply> }).Watch({
        cluster_id: "e2e"
      })
      const messages: Array<Reply> = []
      watch.on("data", (message) => messages.push(message))
      const ended = new Promise<grpc.ServiceError | undefined>((resolveEnd) => {
        watch.on("error", (error: grpc.ServiceError) => resolveEnd(error))
        watch.on("end", () => resolveEnd(undefined))
      })

      const endpoint = Buffer.alloc(16, 7)
      await call(client, "AffiliateUpdate", {
        cluster_id: "e2e",
        affiliate_id: "node-1",
        affiliate_data: Buffer.from("sealed"),
        affiliate_endpoints: [endpoint],
        ttl: { seconds: 60 }
      })
      const listed = await call(client, "List", { cluster_id: "e2e" })
      assert.strictEqual(listed.affiliates.length, 1)
      const [affiliate] = listed.affiliates
      assert.strictEqual(affiliate?.id, "node-1")
      assert.strictEqual(Buffer.from(affiliate!.data).toString(), "sealed")
      assert.deepStrictEqual(Buffer.from(affiliate!.endpoints[0]!), endpoint)

      await call(client, "AffiliateDelete", { cluster_id: "e2e", affiliate_id: "node-1" })
      assert.deepStrictEqual((await call(client, "List", { cluster_id: "e2e" })).affiliates, [])

      const tooBig = await failure(
        call(client, "AffiliateUpdate", { cluster_id: "e2e", affiliate_id: "x", affiliate_data: Buffer.alloc(2049) })
      )
      assert.strictEqual(tooBig.code, grpc.status.INVALID_ARGUMENT)
      assert.strictEqual(tooBig.details, "affiliate data is too big")
      const noCluster = await failure(call(client, "List", { cluster_id: "" }))
      assert.strictEqual(noCluster.code, grpc.status.INVALID_ARGUMENT)
      assert.strictEqual(noCluster.details, "cluster ID can't be empty")

      while (messages.length < 3) await once(watch, "data")
      assert.deepStrictEqual(
        messages.map((m) => [m.deleted, m.affiliates.map((a) => a.id)]),
        [
          [false, []],
          [false, ["node-1"]],
          [true, ["node-1"]]
        ]
      )

      const code = stop(server)
      const status = await ended
      assert.strictEqual(status?.code, grpc.status.UNAVAILABLE)
      assert.strictEqual(await code, 0)
    })
  })

const ttls = (path: string): Map<string, number> => {
  const snapshot = fromBinary(StateSnapshotSchema, readFileSync(path))
  const result = new Map<string, number>()
  for (const cluster of snapshot.clusters) {
    for (const affiliate of cluster.affiliates) {
      result.set(`${cluster.id}/${affiliate.id}`, Number(affiliate.ttl?.seconds ?? 0n))
      for (const [i, endpoint] of affiliate.endpoints.entries()) {
        result.set(`${cluster.id}/${affiliate.id}/${i}`, Number(endpoint.ttl?.seconds ?? 0n))
      }
    }
  }
  return result
}

for (const threads of threadChoices)
  describe(`discovery-service operations, --io-threads ${threads}`, { timeout: processTimeout }, () => {
    const flags = ["--addr", "127.0.0.1:0", `--io-threads=${threads}`]

    it("serves the landing page, stats, metrics and readiness next to gRPC", async () => {
      const server = await start(flags, join(scratch, `ops-${threads}.binpb`))
      try {
        const client = loadClient(server.port)
        await call(client, "AffiliateUpdate", { cluster_id: "ops", affiliate_id: "a", ttl: { seconds: 60 } })
        client.close()
        const landing = await fetch(`http://127.0.0.1:${server.landingPort}/`)
        assert.strictEqual(landing.status, 200)
        assert.include(await landing.text(), "discovery service")
        const stats = await fetch(`http://127.0.0.1:${server.landingPort}/stats`)
        assert.strictEqual(await stats.text(), '{"affiliates":1}')
        // The gRPC port serves the same site to requests that are not gRPC, as the original's does (HTTP/1.1 here).
        const onGrpcPort = await fetch(`http://127.0.0.1:${server.port}/stats`)
        assert.strictEqual(await onGrpcPort.text(), '{"affiliates":1}')
        assert.include(await (await fetch(`http://127.0.0.1:${server.port}/`)).text(), "discovery service")
        assert.strictEqual((await fetch(`http://127.0.0.1:${server.metricsPort}/readyz`)).status, 200)
        const metrics = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text()
        for (const line of [
          "discovery_state_affiliates 1",
          'discovery_storage_operations_total{operation="load",status="success"} 1',
          'grpc_server_handled_total{grpc_code="OK",grpc_method="AffiliateUpdate",grpc_service="sidero.discovery.server.Cluster",grpc_type="unary"} 1'
        ]) {
          assert.include(metrics, line)
        }
        // One log stream: the request log lines of the threads that served the calls are the process's own lines.
        const requestLineOf = () =>
          server.lines
            .map((line) => JSON.parse(line) as { message: string; annotations: Record<string, unknown> })
            .find((entry) => entry.message === "/sidero.discovery.server.Cluster/AffiliateUpdate")
        // log lines are written in batches: wait for it (at most 5 s)
        for (let i = 0; i < 100 && requestLineOf() === undefined; i++) await new Promise((r) => setTimeout(r, 50))
        const requestLine = requestLineOf()
        assert.strictEqual(requestLine?.annotations.cluster_id, "ops")
        if (threads > 1) assert.isNumber(requestLine?.annotations.thread)
      } finally {
        assert.strictEqual(await stop(server), 0)
      }
    })

    it("says the cause of each change once, in the debug log, the metrics and the inspect page, whichever thread served it", async () => {
      const server = await start([...flags, "--log-level", "debug"], join(scratch, `causes-${threads}.binpb`))
      const clients = Array.from({ length: 8 }, () => loadClient(server.port, true))
      try {
        // a watcher, so that the cluster keeps its history in memory
        const watch = (clients[0] as unknown as { Watch: (request: object) => grpc.ClientReadableStream<Reply> }).Watch(
          {
            cluster_id: "causes"
          }
        )
        watch.on("error", () => undefined)
        await once(watch, "data")
        await Promise.all(
          clients.map((each, i) =>
            call(each, "AffiliateUpdate", { cluster_id: "causes", affiliate_id: `n${i}`, ttl: { seconds: 60 } })
          )
        )
        await call(clients[1]!, "AffiliateDelete", { cluster_id: "causes", affiliate_id: "n1" })
        const metrics = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text()
        assert.include(metrics, 'discovery_changes_total{cause="created"} 8')
        assert.include(metrics, 'discovery_changes_total{cause="deleted"} 1')
        const changeLines = () =>
          server.lines
            .map((line) => JSON.parse(line) as { message: string; annotations: Record<string, unknown> })
            .filter((entry) => entry.annotations.cluster_id === "causes" && entry.annotations.cause !== undefined)
        for (let i = 0; i < 100 && changeLines().length < 9; i++) await new Promise((r) => setTimeout(r, 50))
        await new Promise((r) => setTimeout(r, 200))
        const causes = changeLines().map((entry) => `${entry.message} ${entry.annotations.affiliate_id}`)
        assert.strictEqual(causes.filter((line) => line.startsWith("affiliate created")).length, 8)
        assert.deepStrictEqual(
          causes.filter((line) => !line.startsWith("affiliate created")),
          ["affiliate deleted n1"]
        )
        assert.include(changeLines()[0]!.annotations.client_ip as string, "127.0.0.1")
        // the same history from the landing port (main thread) and the gRPC port (any thread)
        for (const port of [server.landingPort, server.port, server.port]) {
          const page = await (await fetch(`http://127.0.0.1:${port}/inspect?clusterID=causes`)).text()
          const rows = [...page.matchAll(/<td class="cause"[^>]*>([a-z_]+)</g)].map((match) => match[1])
          assert.deepStrictEqual(rows, ["deleted", ...Array.from({ length: 8 }, () => "created")])
        }
        watch.cancel()
      } finally {
        for (const each of clients) each.close()
        assert.strictEqual(await stop(server), 0)
      }
    })

    it("keeps affiliates, endpoints and TTLs across a restart", async () => {
      const path = join(scratch, `restart-${threads}.binpb`)
      const first = await start(flags, path)
      const client = loadClient(first.port)
      await call(client, "AffiliateUpdate", {
        cluster_id: "restart",
        affiliate_id: "node-1",
        affiliate_data: Buffer.from("sealed-1"),
        affiliate_endpoints: [Buffer.alloc(16, 1), Buffer.alloc(32, 2)],
        ttl: { seconds: 600 }
      })
      await call(client, "AffiliateUpdate", {
        cluster_id: "restart",
        affiliate_id: "node-2",
        affiliate_data: Buffer.from("sealed-2"),
        ttl: { seconds: 90 }
      })
      const before = (await call(client, "List", { cluster_id: "restart" })).affiliates
      client.close()
      assert.strictEqual(await stop(first), 0)
      const saved = ttls(path)
      const savedAt = Date.now()

      const second = await start(flags, path)
      const again = loadClient(second.port)
      const after = (await call(again, "List", { cluster_id: "restart" })).affiliates
      again.close()
      assert.strictEqual(await stop(second), 0)
      const elapsed = (Date.now() - savedAt) / 1000

      const byId = (list: ReadonlyArray<Affiliate>) =>
        [...list]
          .sort((a, b) => a.id.localeCompare(b.id))
          .map((a) => [
            a.id,
            Buffer.from(a.data).toString("hex"),
            a.endpoints.map((e) => Buffer.from(e).toString("hex"))
          ])
      assert.deepStrictEqual(byId(after), byId(before))
      const resaved = ttls(path)
      assert.deepStrictEqual([...resaved.keys()].sort(), [...saved.keys()].sort())
      for (const [key, ttl] of saved) {
        const lost = ttl - resaved.get(key)!
        assert.isAtLeast(lost, 0, key)
        assert.isAtMost(lost, elapsed + 1, key)
      }
    })
  })

describe("discovery-service shutdown", { timeout: processTimeout }, () => {
  it("exits at once on a second signal while the first one's graceful stop is under way", async () => {
    const path = join(scratch, "signals.binpb")
    const server = await start(["--addr", "127.0.0.1:0"], path)
    // The final save opens <path>.tmp for writing; as a FIFO with no reader that open blocks, so the graceful
    // stop cannot finish by itself.
    execFileSync("mkfifo", [`${path}.tmp`])
    const exited = once(server.child, "exit")
    try {
      server.child.kill("SIGTERM")
      await new Promise((resolveWait) => setTimeout(resolveWait, 500))
      assert.isNull(server.child.exitCode, "still stopping after the first signal")
      server.child.kill("SIGTERM")
      const [, signal] = (await exited) as [number | null, string | null]
      assert.strictEqual(signal, "SIGKILL")
    } finally {
      server.child.kill("SIGKILL")
    }
  })

  it("does not write the snapshot when it fails to start", async () => {
    const path = join(scratch, "busy.binpb")
    const first = await start(["--addr", "127.0.0.1:0"], path)
    const client = loadClient(first.port)
    await call(client, "AffiliateUpdate", { cluster_id: "busy", affiliate_id: "kept", ttl: { seconds: 600 } })
    client.close()
    assert.strictEqual(await stop(first), 0)
    const saved = readFileSync(path)

    const blocker = await start(["--addr", "127.0.0.1:0", "--snapshots-enabled=false"])
    const child = spawn(
      ...command([`--addr=127.0.0.1:${blocker.port}`, "--landing-addr=", "--metrics-addr=", `--snapshot-path=${path}`]),
      { cwd: root, env: noNode, stdio: "ignore" }
    )
    const [code] = (await once(child, "exit")) as [number | null]
    assert.strictEqual(await stop(blocker), 0)
    assert.notStrictEqual(code, 0)
    assert.deepStrictEqual(readFileSync(path), saved)
  })
})

describe.skipIf(executable !== undefined)("npm start", { timeout: processTimeout }, () => {
  it("serves the Cluster and health services from the start-up bundle, built first when missing", async () => {
    const server = await start(["--addr", "127.0.0.1:0", "--snapshots-enabled=false"], undefined, "scripts/start.mjs")
    try {
      const client = loadClient(server.port)
      const hello = await call(client, "Hello", { cluster_id: "bundle", client_version: "v1.8.3" })
      assert.deepStrictEqual([...hello.client_ip], [127, 0, 0, 1])
      client.close()
      const health = loadHealthClient(server.port)
      const reply = await new Promise<{ readonly status: string }>((resolveCheck, reject) =>
        health.Check({ service: "sidero.discovery.server.Cluster" }, (error, response) =>
          error ? reject(error) : resolveCheck(response!)
        )
      )
      health.close()
      assert.strictEqual(reply.status, "SERVING")
    } finally {
      assert.strictEqual(await stop(server), 0)
    }
  })
})

describe("discovery-service flags", { timeout: processTimeout }, () => {
  const run = async (args: ReadonlyArray<string>) => {
    const child = spawn(...command(args), { cwd: root, env: noNode })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    const [code] = (await once(child, "exit")) as [number | null]
    return { code, output }
  }

  it("refuses a flag whose feature is not built", async () => {
    const { code, output } = await run(["--addr", "127.0.0.1:0", "-debug-addr=:2123"])
    assert.notStrictEqual(code, 0)
    assert.include(output, "--debug-addr: the debug server is not available in this build yet")
  })

  it("refuses a GC interval that is not positive", async () => {
    const { code, output } = await run(["--addr", "127.0.0.1:0", "--gc-interval", "0s"])
    assert.notStrictEqual(code, 0)
    assert.include(output, "is not a positive duration")
  })

  it("refuses --reuse-port without a shared state, a --state that is no URL, and an unset password variable", async () => {
    const reuse = await run(["--addr", "127.0.0.1:0", "--reuse-port"])
    assert.notStrictEqual(reuse.code, 0)
    assert.include(reuse.output, "--reuse-port: instances on one port need a shared --state")
    const state = await run(["--addr", "127.0.0.1:0", "--state", "postgres://x"])
    assert.notStrictEqual(state.code, 0)
    assert.include(state.output, "--state must be memory or a redis:// or rediss:// URL")
    const password = await run([
      "--addr",
      "127.0.0.1:0",
      "--state",
      "redis://127.0.0.1:1",
      "--state-password-env",
      "DISCOVERY_TEST_UNSET_PASSWORD"
    ])
    assert.notStrictEqual(password.code, 0)
    assert.include(password.output, "DISCOVERY_TEST_UNSET_PASSWORD is not set")
  })

  for (const [flags, expected] of [
    [[], "Resumed"],
    [["--watch-log-length", "0"], "Snapshot"]
  ] as const) {
    it(`a watcher that comes back ${expected === "Resumed" ? "resumes" : "gets a snapshot with --watch-log-length 0"}`, async () => {
      const server = await start(["--addr", "127.0.0.1:0", "--snapshots-enabled=false", ...flags])
      try {
        const first = await Effect.runPromise(
          Effect.scoped(
            Effect.gen(function* () {
              const api = yield* GrpcClient.make({ endpoint: `127.0.0.1:${server.port}`, tls: false })
              const update = (data: number) =>
                api.affiliateUpdate({
                  clusterId: "c",
                  affiliateId: "a",
                  data: Uint8Array.of(data),
                  endpoints: [],
                  ttl: Duration.minutes(1)
                })
              const head = (resume?: ResumePoint) =>
                Effect.map(Stream.runHead(api.watch({ clusterId: "c", resume })), Option.getOrThrow)
              yield* update(1)
              const snapshot = yield* head()
              yield* update(2)
              const epoch = snapshot._tag === "Snapshot" ? snapshot.epoch! : ""
              return yield* head({ epoch, revision: snapshot.revision })
            })
          )
        )
        assert.strictEqual(first._tag, expected)
        const metrics = await (await fetch(`http://127.0.0.1:${server.metricsPort}/metrics`)).text()
        assert.match(
          metrics,
          new RegExp(
            `discovery_watches_started_total\\{start="${expected === "Resumed" ? "resumed" : "snapshot"}"\\} [12]`
          )
        )
      } finally {
        await stop(server)
      }
    })
  }

  it("refuses a negative --watch-log-length", async () => {
    const { code, output } = await run(["--addr", "127.0.0.1:0", "--watch-log-length", "-1"])
    assert.notStrictEqual(code, 0)
    assert.include(output, "--watch-log-length must not be negative, got -1")
  })

  it("prints the flags with --help", async () => {
    const { code, output } = await run(["--help"])
    assert.strictEqual(code, 0)
    for (const flag of [
      "--addr",
      "--gc-interval",
      "--redirect-endpoint",
      "--trust-x-real-ip",
      "--max-watches",
      "--max-concurrent-streams",
      "--request-memory-budget",
      "--max-connections-per-address",
      "--handshake-timeout",
      "--idle-timeout",
      "--keepalive-min-time",
      "--failure-log-rate",
      "--state",
      "--state-cluster",
      "--state-password-env",
      "--state-key-prefix",
      "--reuse-port",
      "--watch-log-length"
    ]) {
      assert.include(output, flag)
    }
  })
})
