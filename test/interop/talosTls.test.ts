/**
 * The README's "Use it with Talos", as a node takes it: the real Go
 * discovery-client dials the service over TLS (`Insecure: false`, the system
 * roots) with the service's certificate issued by a private CA that the node
 * trusts (here through `SSL_CERT_FILE`, as `TrustedRootsConfig` adds a root to
 * a Talos node's store), and two such nodes find each other. A node that does
 * not trust that CA is refused.
 */
import { execFileSync } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { buildGoBinaries, type GoBinaries } from "./support/goBuild.ts"
import { GoNodes } from "./support/goNodes.ts"
import { freePort, type ServerProcess, startOurServer } from "./support/processes.ts"

let binaries: GoBinaries
let scratch: string
const running: Array<ServerProcess> = []
const nodes: Array<GoNodes> = []

/** A private CA and a certificate it issued for localhost and 127.0.0.1, with openssl. */
const privateCa = (dir: string) => {
  const openssl = (...args: Array<string>) => execFileSync("openssl", args, { cwd: dir, stdio: "ignore" })
  openssl(
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-days",
    "2",
    "-subj",
    "/CN=Private discovery CA",
    "-keyout",
    "ca.key",
    "-out",
    "ca.pem"
  )
  openssl(
    "req",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:P-256",
    "-nodes",
    "-subj",
    "/CN=localhost",
    "-keyout",
    "server.key",
    "-out",
    "server.csr"
  )
  writeFileSync(join(dir, "san.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
  openssl(
    "x509",
    "-req",
    "-in",
    "server.csr",
    "-CA",
    "ca.pem",
    "-CAkey",
    "ca.key",
    "-CAcreateserial",
    "-days",
    "2",
    "-extfile",
    "san.ext",
    "-out",
    "server.pem"
  )
  return { ca: join(dir, "ca.pem"), certificate: join(dir, "server.pem"), key: join(dir, "server.key") }
}

beforeAll(() => {
  binaries = buildGoBinaries()
  scratch = mkdtempSync(join(tmpdir(), "discovery-talos-tls-"))
}, 600_000)

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.close()))
  await Promise.all(running.map((s) => s.stop()))
  if (scratch !== undefined) rmSync(scratch, { recursive: true, force: true })
})

describe("a Talos node's discovery client over TLS with a private CA", () => {
  it("finds the other node through our server, and one that does not trust the CA is refused", {
    timeout: 60_000
  }, async () => {
    const { ca, certificate, key } = privateCa(scratch)
    const port = await freePort()
    running.push(await startOurServer({ port, extraFlags: [`--certificate-path=${certificate}`, `--key-path=${key}`] }))
    const endpoint = `localhost:${port}`
    const trusting = new GoNodes(binaries.nodes, { ...process.env, SSL_CERT_FILE: ca, SSL_CERT_DIR: scratch })
    nodes.push(trusting)
    const clusterId = randomBytes(12).toString("base64url")
    const clusterKey = randomBytes(32)
    for (const node of ["n1", "n2"]) {
      await trusting.start(node, { endpoint, cluster: clusterId, key: clusterKey, ttl: "1m", tls: true })
    }
    await trusting.set("n1", { hostname: "node-1", addresses: ["10.0.0.1"] })
    await trusting.set("n2", { hostname: "node-2", addresses: ["10.0.0.2"] })
    const seen = await trusting.until("n2", (affiliates) => affiliates.some((a) => a.hostname === "node-1"))
    assert.deepStrictEqual(
      seen.map((a) => a.hostname),
      ["node-1"]
    )
    await trusting.until("n1", (affiliates) => affiliates.some((a) => a.hostname === "node-2"))

    // without the CA among its roots, a node cannot reach the service: it never sees the others
    const untrusting = new GoNodes(binaries.nodes, { ...process.env, SSL_CERT_FILE: join(scratch, "none.pem") })
    nodes.push(untrusting)
    await untrusting.start("n3", { endpoint, cluster: clusterId, key: clusterKey, ttl: "1m", tls: true })
    await untrusting.set("n3", { hostname: "node-3", addresses: ["10.0.0.3"] })
    await new Promise((resolve) => setTimeout(resolve, 3000))
    assert.deepStrictEqual((await untrusting.state("n3")).affiliates, [])
    assert.isFalse(
      (await trusting.state("n1")).affiliates.some((a) => a.hostname === "node-3"),
      "the untrusting node never registered"
    )
  })
})
