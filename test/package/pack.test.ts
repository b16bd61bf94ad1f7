/**
 * The package as a user gets it: `npm pack` makes the tarball (its `prepack`
 * builds `dist`), which holds what a user needs and no tests; installed into
 * an empty project, the README's Embedding examples run as plain JavaScript
 * (in process, standalone and mounted, the client transport and the
 * Promise-based discovery client, against each other over loopback) and
 * type-check as TypeScript against the packed `.d.ts`, and the `bin` serves
 * from the package. The examples are read from the README itself, with only
 * their free variables given values, ports made loopback and a line that
 * prints what they got.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { freePort } from "../adapters/redis/redisServer.ts"
import { listening } from "../e2e/listening.ts"

const run = promisify(execFile)
const root = resolve(import.meta.dirname, "../..")
const node = process.execPath
const npm = "npm"

/** The ```ts blocks of the README's Embedding section, in order. */
const embeddingExamples = async (): Promise<ReadonlyArray<string>> => {
  const readme = await readFile(join(root, "README.md"), "utf8")
  const section = readme.slice(readme.indexOf("## Embedding"), readme.indexOf("## Benchmark"))
  return [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!)
}

/** `example` with `from` replaced by `to`, failing the test when `from` is not there (the README changed). */
const replaced = (example: string, from: string, to: string): string => {
  assert.include(example, from, "the README example changed: update this test's edits")
  return example.replace(from, to)
}

let scratch: string
let project: string
let tarball: string
const children: Array<ChildProcess> = []

/** Runs `file` in the project with the node of the tests, and gives its stdout once it exits. */
const runExample = async (file: string): Promise<string> => {
  const { stdout } = await run(node, [file], { cwd: project, timeout: 60_000 })
  return stdout
}

/** Starts `file` in the project and resolves once it printed `ready`. */
const startExample = async (file: string): Promise<ChildProcess> => {
  const child = spawn(node, [file], { cwd: project, stdio: ["ignore", "pipe", "inherit"] })
  children.push(child)
  let output = ""
  child.stdout!.on("data", (chunk: Buffer) => {
    output += chunk.toString()
  })
  for (let i = 0; i < 300 && !output.includes("ready"); i++) await new Promise((r) => setTimeout(r, 50))
  assert.include(output, "ready", `${file} did not start`)
  return child
}

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "discovery-pack-"))
  project = join(scratch, "project")
  const { stdout } = await run(npm, ["pack", "--json", "--pack-destination", scratch], {
    cwd: root,
    timeout: 120_000,
    maxBuffer: 64 * 1024 * 1024
  })
  const [packed] = JSON.parse(stdout.slice(stdout.indexOf("["))) as Array<{ filename: string }>
  tarball = join(scratch, packed!.filename)
  await run("mkdir", ["-p", project])
  await writeFile(join(project, "package.json"), JSON.stringify({ name: "embedder", private: true, type: "module" }))
  await run(npm, ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", tarball], {
    cwd: project,
    timeout: 300_000
  })
}, 400_000)

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true })
})

describe("the npm package", { timeout: 120_000 }, () => {
  it("holds what a user needs: the build, the protos, the licence and the README, no tests", async () => {
    const { stdout } = await run("tar", ["-tzf", tarball], { maxBuffer: 64 * 1024 * 1024 })
    const files = stdout.split("\n").filter((line) => line !== "")
    for (const needed of [
      "package/LICENSE",
      "package/README.md",
      "package/package.json",
      "package/dist/index.js",
      "package/dist/index.d.ts",
      "package/dist/cli/main.js",
      "package/dist/adapters/grpc/index.d.ts",
      "package/proto/discovery/server/cluster.proto"
    ]) {
      assert.include(files, needed)
    }
    assert.isEmpty(files.filter((file) => /^package\/(test|bench|scripts|\.ci|src)\//.test(file)))
    const manifest = JSON.parse(await readFile(join(project, "node_modules/talos-discovery/package.json"), "utf8"))
    assert.notProperty(manifest, "private")
    assert.strictEqual(manifest.license, "MPL-2.0")
    assert.include(
      await readFile(join(project, "node_modules/talos-discovery/LICENSE"), "utf8"),
      "Mozilla Public License Version 2.0"
    )
  })

  it("runs the README's examples as plain JavaScript", async () => {
    const [inProcess, servers, remote, discoveryClient] = await embeddingExamples()
    assert.isDefined(discoveryClient, "four examples in the Embedding section")
    const standalonePort = await freePort()
    const mountedPort = await freePort()

    await writeFile(
      join(project, "in-process.mjs"),
      [
        "const sealedData = new Uint8Array([1, 2, 3])",
        "const sealedEndpoint = new Uint8Array(16).fill(7)",
        replaced(inProcess!, "Effect.runPromise(program", "const listed = await Effect.runPromise(program"),
        "console.log(JSON.stringify(listed.map((affiliate) => affiliate.id)))"
      ].join("\n")
    )
    assert.deepStrictEqual(JSON.parse(await runExample("in-process.mjs")), ["node-1"])

    let both = replaced(
      servers!,
      `GrpcServer.layer({ address: "0.0.0.0:3000" })`,
      `GrpcServer.layer({ address: "127.0.0.1:${standalonePort}" })`
    )
    both = replaced(both, `server.bindAsync("0.0.0.0:3000",`, `server.bindAsync("127.0.0.1:${mountedPort}",`)
    both = replaced(both, "() => {})", `() => console.log("ready"))`)
    await writeFile(join(project, "servers.mjs"), both)
    await startExample("servers.mjs")

    for (const port of [standalonePort, mountedPort]) {
      const client = replaced(
        remote!,
        `GrpcClient.layer({ endpoint: "discovery.example.com:443" })`,
        `GrpcClient.layer({ endpoint: "127.0.0.1:${port}", tls: false })`
      )
      await writeFile(
        join(project, `remote-${port}.mjs`),
        `${client}\nconsole.log(JSON.stringify(await Effect.runPromise(program)))\n`
      )
      assert.deepStrictEqual(JSON.parse(await runExample(`remote-${port}.mjs`)), [], `served on ${port}`)
    }

    const discovery = replaced(
      discoveryClient!,
      `endpoint: "discovery.example.com:443", // TLS by default; tls: false for plaintext`,
      `endpoint: "127.0.0.1:${standalonePort}", tls: false,`
    )
    await writeFile(
      join(project, "discovery-client.mjs"),
      [
        "const clusterKey = new Uint8Array(32).fill(9)",
        discovery,
        "for (let i = 0; i < 100 && client.affiliates().length === 0; i++) await new Promise((r) => setTimeout(r, 50))",
        "console.log(JSON.stringify(client.affiliates().map((a) => a.affiliate.hostname)))",
        "await client.close()",
        "process.exit(0)"
      ].join("\n")
    )
    const seen = (await runExample("discovery-client.mjs")).trim().split("\n").at(-1)!
    assert.deepStrictEqual(JSON.parse(seen), [])
  })

  it("type-checks the README's examples as TypeScript against the packed declarations", async () => {
    const examples = await embeddingExamples()
    const declared = [
      "declare const sealedData: Uint8Array",
      "declare const sealedEndpoint: Uint8Array",
      "declare const clusterKey: Uint8Array"
    ].join("\n")
    for (const [i, example] of examples.entries()) {
      await writeFile(join(project, `example-${i}.ts`), `${declared}\n${example}\nexport {}\n`)
    }
    await writeFile(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "es2022",
          module: "nodenext",
          moduleResolution: "nodenext",
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ["node"],
          typeRoots: [join(root, "node_modules/@types")]
        },
        include: examples.map((_, i) => `example-${i}.ts`)
      })
    )
    const checked = await run(node, [join(root, "node_modules/.bin/tsc"), "-p", "."], { cwd: project }).then(
      () => "",
      (error: { stdout?: string; stderr?: string }) => `${error.stdout ?? ""}${error.stderr ?? ""}`
    )
    assert.strictEqual(checked, "")
  })

  it("checks a server with the README's conformance example (node's test runner) and the bin's conformance command", async () => {
    const readme = await readFile(join(root, "README.md"), "utf8")
    const section = readme.slice(readme.indexOf("## Check a discovery server"), readme.indexOf("## Embedding"))
    const example = [...section.matchAll(/```ts\n([\s\S]*?)```/g)].map((match) => match[1]!)[0]!
    const port = await freePort()
    const env = { ...process.env, PATH: `${join(node, "..")}:${process.env.PATH}` }
    const bin = join(project, "node_modules/.bin/discovery-service")
    const server = spawn(
      bin,
      [`--addr=127.0.0.1:${port}`, "--landing-addr=", "--metrics-addr=", "--snapshots-enabled=false"],
      { cwd: project, stdio: ["ignore", "pipe", "pipe"], env }
    )
    children.push(server)
    await writeFile(
      join(project, "conformance.test.mjs"),
      replaced(
        example,
        `{ endpoint: "discovery.example.com:443", tls: true }`,
        `{ endpoint: "127.0.0.1:${port}", tls: false, only: "Hello" }`
      )
    )
    await listening(server)
    const { stdout: tests } = await run(node, ["--test", "--test-reporter=tap", "conformance.test.mjs"], {
      cwd: project,
      timeout: 60_000
    })
    assert.match(tests, /# pass [1-9]/)
    assert.match(tests, /# fail 0/)
    assert.include(tests, "T48 hello rejects an empty or over-long cluster ID with InvalidArgument")
    const checked = await run(bin, ["conformance", `127.0.0.1:${port}`, "--only", "Hello", "--json"], {
      cwd: project,
      env
    })
    const report = JSON.parse(checked.stdout) as { extensions: boolean; summary: { passed: number; failed: number } }
    assert.isTrue(report.extensions)
    assert.strictEqual(report.summary.failed, 0)
    assert.isAbove(report.summary.passed, 0)
    server.kill("SIGTERM")
  })

  it("serves from the package's bin", async () => {
    const port = await freePort()
    const child = spawn(
      join(project, "node_modules/.bin/discovery-service"),
      [`--addr=127.0.0.1:${port}`, "--landing-addr=", "--metrics-addr=", "--snapshots-enabled=false"],
      {
        cwd: project,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, PATH: `${join(node, "..")}:${process.env.PATH}` }
      }
    )
    children.push(child)
    const exited = once(child, "exit")
    const help = await run(join(project, "node_modules/.bin/discovery-service"), ["--version"], {
      cwd: project,
      env: { ...process.env, PATH: `${join(node, "..")}:${process.env.PATH}` }
    })
    const manifest = JSON.parse(await readFile(join(project, "node_modules/talos-discovery/package.json"), "utf8"))
    assert.include(help.stdout, `v${manifest.version}`, "--version is the package's")
    await writeFile(
      join(project, "hello.mjs"),
      [
        `import { ClusterApi } from "talos-discovery"`,
        `import { GrpcClient } from "talos-discovery/grpc"`,
        `import { Effect } from "effect"`,
        `const remote = GrpcClient.layer({ endpoint: "127.0.0.1:${port}", tls: false })`,
        `for (let i = 0; i < 100; i++) {`,
        `  const ok = await Effect.runPromise(ClusterApi.use((api) => api.list({ clusterId: "c" })).pipe(Effect.provide(remote), Effect.as(true), Effect.orElseSucceed(() => false)))`,
        `  if (ok) { console.log("served"); process.exit(0) }`,
        `  await new Promise((r) => setTimeout(r, 100))`,
        `}`,
        `process.exit(1)`
      ].join("\n")
    )
    assert.include(await runExample("hello.mjs"), "served")
    child.kill("SIGTERM")
    await exited
  })
})
