/**
 * Drives real discovery-client nodes (the published Go client, through the
 * `nodes` program in test/interop/go): one JSON command per line in, one JSON
 * reply or event per line out.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { createInterface } from "node:readline"

/** An endpoint as the Go client reports it. */
export interface NodeEndpoint {
  readonly ip: string
  readonly port: number
}

/** A discovered affiliate as a Go node decrypted it. */
export interface Discovered {
  readonly id: string
  readonly hostname: string
  readonly addresses: ReadonlyArray<string> | null
  readonly endpoints: ReadonlyArray<NodeEndpoint> | null
}

interface Output {
  readonly event: string
  readonly node?: string
  readonly error?: string
  readonly affiliates?: ReadonlyArray<Discovered>
  readonly publicIp?: string
}

/** What a node publishes about itself. */
export interface LocalData {
  readonly hostname: string
  readonly addresses?: ReadonlyArray<string>
  readonly endpoints?: ReadonlyArray<NodeEndpoint>
  readonly others?: ReadonlyArray<{ readonly affiliate: string; readonly endpoints: ReadonlyArray<NodeEndpoint> }>
}

/** A process hosting several Go client nodes. */
export class GoNodes {
  private readonly child: ChildProcess
  private readonly waiting: Array<{ match: (o: Output) => boolean; resolve: (o: Output) => void }> = []
  private readonly affiliateOf = new Map<string, string>()
  readonly stderr: Array<string> = []

  /** `env`: the environment of the nodes' process (say `SSL_CERT_FILE`, the roots a TLS node trusts). */
  constructor(binary: string, env?: NodeJS.ProcessEnv) {
    this.child = spawn(binary, [], { stdio: ["pipe", "pipe", "pipe"], env: env ?? process.env })
    createInterface({ input: this.child.stdout! }).on("line", (line) => this.receive(JSON.parse(line) as Output))
    createInterface({ input: this.child.stderr! }).on("line", (line) => this.stderr.push(line))
  }

  private receive(output: Output) {
    const index = this.waiting.findIndex((w) => w.match(output))
    if (index !== -1) this.waiting.splice(index, 1)[0]!.resolve(output)
  }

  private send(command: object, reply: string, node: string): Promise<Output> {
    const result = new Promise<Output>((resolve) =>
      this.waiting.push({ match: (o) => o.node === node && (o.event === reply || o.event === "error"), resolve })
    )
    this.child.stdin!.write(`${JSON.stringify(command)}\n`)
    return result.then((o) => {
      if (o.event === "error") throw new Error(`node ${node}: ${o.error}`)
      return o
    })
  }

  /**
   * Starts a node (plaintext gRPC, or with `tls` TLS as a Talos node dials)
   * in a cluster under a 32-byte key. With `realIp`, every call carries that
   * X-Real-IP header (a label only: nothing is sent to it), so a server that
   * trusts the header limits each node apart.
   */
  async start(
    node: string,
    options: { endpoint: string; cluster: string; key: Uint8Array; ttl: string; realIp?: string; tls?: boolean }
  ) {
    this.affiliateOf.set(node, node)
    await this.send(
      {
        cmd: "start",
        node,
        endpoint: options.endpoint,
        cluster: options.cluster,
        affiliate: node,
        key: Buffer.from(options.key).toString("base64"),
        ttl: options.ttl,
        realIp: options.realIp,
        tls: options.tls
      },
      "started",
      node
    )
  }

  /** SetLocalData on a node. */
  async set(node: string, data: LocalData) {
    await this.send({ cmd: "set", node, affiliate: node, ...data }, "set", node)
  }

  /** DeleteLocalAffiliate on a node. */
  async remove(node: string) {
    await this.send({ cmd: "delete", node }, "deleted", node)
  }

  /** Stops a node's Run loop without deleting its affiliate. */
  async stop(node: string) {
    await this.send({ cmd: "stop", node }, "stopped", node)
  }

  /** What a node currently sees. */
  async state(node: string): Promise<{ affiliates: ReadonlyArray<Discovered>; publicIp: string }> {
    const output = await this.send({ cmd: "get", node }, "state", node)
    return { affiliates: output.affiliates ?? [], publicIp: output.publicIp ?? "" }
  }

  /** Polls a node until `predicate` holds for what it sees, or fails after `timeoutMs`. */
  async until(
    node: string,
    predicate: (affiliates: ReadonlyArray<Discovered>) => boolean,
    timeoutMs = 5000
  ): Promise<ReadonlyArray<Discovered>> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const { affiliates } = await this.state(node)
      if (predicate(affiliates)) return affiliates
      if (Date.now() > deadline) {
        throw new Error(`node ${node} still sees ${JSON.stringify(affiliates)}; stderr:\n${this.stderr.join("\n")}`)
      }
      await new Promise((r) => setTimeout(r, 50))
    }
  }

  /** Ends every node and the process. */
  async close() {
    this.child.stdin!.end()
    const timer = setTimeout(() => this.child.kill("SIGKILL"), 5000)
    if (this.child.exitCode === null) await once(this.child, "exit")
    clearTimeout(timer)
  }
}
