/**
 * Black-box test of the `discovery-service` command: it is started as a child
 * process on a loopback port, and a generic gRPC client that knows only the
 * files in proto/ (loaded at run time by @grpc/proto-loader) calls all five
 * RPCs, then SIGTERM ends an open watch with UNAVAILABLE.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { resolve } from "node:path"
import { createInterface } from "node:readline"
import * as grpc from "@grpc/grpc-js"
import * as protoLoader from "@grpc/proto-loader"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"

const root = resolve(import.meta.dirname, "../..")

interface Started {
  readonly child: ChildProcess
  readonly port: number
  readonly lines: Array<string>
}

const start = async (args: ReadonlyArray<string>): Promise<Started> => {
  const child = spawn(process.execPath, ["src/cli/main.ts", ...args], { cwd: root, stdio: ["ignore", "pipe", "pipe"] })
  const lines: Array<string> = []
  const port = await new Promise<number>((resolvePort, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      lines.push(line)
      const entry = JSON.parse(line) as { message: unknown; annotations: Record<string, unknown> }
      if (entry.message === "discovery service listening") resolvePort(entry.annotations.port as number)
    })
    child.on("exit", (code) => reject(new Error(`exited with ${code}: ${lines.join("\n")}`)))
  })
  return { child, port, lines }
}

const loadClient = (port: number) => {
  const definition = protoLoader.loadSync("discovery/server/cluster.proto", {
    includeDirs: [resolve(root, "proto")],
    keepCase: true,
    longs: String,
    defaults: true
  })
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    sidero: { discovery: { server: { Cluster: grpc.ServiceClientConstructor } } }
  }
  return new loaded.sidero.discovery.server.Cluster(`127.0.0.1:${port}`, grpc.credentials.createInsecure())
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

describe("discovery-service command", () => {
  let server: Started
  let client: grpc.Client

  beforeAll(async () => {
    server = await start(["--addr", "127.0.0.1:0", "--redirect-endpoint", "other.example:443"])
    client = loadClient(server.port)
  })

  afterAll(() => {
    client?.close()
    server?.child.kill("SIGKILL")
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

    server.child.kill("SIGTERM")
    const status = await ended
    assert.strictEqual(status?.code, grpc.status.UNAVAILABLE)
    const [code] = (await once(server.child, "exit")) as [number | null]
    assert.strictEqual(code, 0)
  })
})

describe("discovery-service flags", () => {
  const run = async (args: ReadonlyArray<string>) => {
    const child = spawn(process.execPath, ["src/cli/main.ts", ...args], { cwd: root })
    let output = ""
    child.stdout.on("data", (chunk) => (output += chunk))
    child.stderr.on("data", (chunk) => (output += chunk))
    const [code] = (await once(child, "exit")) as [number | null]
    return { code, output }
  }

  it("refuses a flag whose feature is not built yet", async () => {
    const { code, output } = await run(["--addr", "127.0.0.1:0", "-snapshot-path=/tmp/state.binpb"])
    assert.notStrictEqual(code, 0)
    assert.include(output, "--snapshot-path: state snapshots is not available in this build yet")
  })

  it("refuses a GC interval that is not positive", async () => {
    const { code, output } = await run(["--addr", "127.0.0.1:0", "--gc-interval", "0s"])
    assert.notStrictEqual(code, 0)
    assert.include(output, "is not a positive duration")
  })

  it("prints the flags with --help", async () => {
    const { code, output } = await run(["--help"])
    assert.strictEqual(code, 0)
    for (const flag of ["--addr", "--gc-interval", "--redirect-endpoint", "--trust-x-real-ip", "--max-watches"]) {
      assert.include(output, flag)
    }
  })
})
