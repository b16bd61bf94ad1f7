/**
 * The short version of `npm run soak` (bench/soak.ts): the `discovery-service`
 * command as a child process on loopback, 500 watchers over 10 clusters on 5
 * connections (100 streams each, every stream its own client address), and a
 * writer that updates every cluster 30 times, one update at a time per
 * cluster, for about 3 s. Asserts correctness only: every watcher sees
 * exactly its cluster's updates, in order; no watcher ends before the
 * server is told to stop; the server still answers; on SIGTERM every watch
 * ends with UNAVAILABLE and the process exits 0. Nothing here is timed.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import type * as http2 from "node:http2"
import { resolve } from "node:path"
import { createInterface } from "node:readline"
import { afterAll, assert, describe, it } from "@effect/vitest"
import {
  AffiliateUpdateRequestSchema,
  AffiliateUpdateResponseSchema,
  HelloRequestSchema,
  HelloResponseSchema
} from "../../src/gen/discovery/server/cluster_pb.ts"
import { type CallEnd, connect, unary, type Watch, watch } from "./h2Client.ts"

const root = resolve(import.meta.dirname, "../..")
const clusters = 10
const streamsPerConnection = 100
const connections = 5
const watchers = connections * streamsPerConnection
const affiliates = 5
const updatesPerCluster = 30
/** Bound on every wait; a cold start of the command on a loaded 2-core machine can take seconds. */
const waitMs = 20_000

const clusterId = (c: number) => `soak-short-${c}`
const watcherAddress = (i: number) => `2001:db8::1:${i.toString(16)}`
const writerAddress = (n: number) => `2001:db8::2:${n.toString(16)}`

/** Affiliate data: the sequence number in the first 8 bytes, then filler. */
const data = (seq: number): Uint8Array => {
  const bytes = new Uint8Array(64).fill(0x5a)
  new DataView(bytes.buffer).setBigUint64(0, BigInt(seq))
  return bytes
}
const seqOf = (bytes: Uint8Array): number => Number(new DataView(bytes.buffer, bytes.byteOffset).getBigUint64(0))
/** A 32-byte endpoint blob (two AES blocks). */
const endpoint = (label: string) => new TextEncoder().encode(label.padEnd(32, "."))

/** `promise`, or a failure saying `what()` when it has not settled after `ms`. */
const within = async <A>(promise: Promise<A>, ms: number, what: () => string): Promise<A> => {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(what())), ms)
  })
  try {
    return await Promise.race([promise, timeout])
  } finally {
    clearTimeout(timer)
  }
}

/** A count down from `start`; `done` settles when it reaches zero. */
const countdown = (start: number) => {
  let left = start
  let release: () => void = () => {}
  const done = new Promise<void>((r) => {
    release = r
  })
  return {
    done,
    tick: () => {
      if (--left === 0) release()
    },
    left: () => left
  }
}

interface Server {
  readonly child: ChildProcess
  readonly address: string
  readonly output: Array<string>
}

const children: Array<ChildProcess> = []

/** Starts the command as the e2e tests do, trusting X-Real-IP so each watcher is its own client address. */
const startServer = async (): Promise<Server> => {
  const child = spawn(
    process.execPath,
    [
      "src/cli/main.ts",
      "--addr=127.0.0.1:0",
      "--landing-addr=",
      "--metrics-addr=",
      "--snapshots-enabled=false",
      "--trust-x-real-ip"
    ],
    { cwd: root, stdio: ["ignore", "pipe", "pipe"] }
  )
  children.push(child)
  const output: Array<string> = []
  createInterface({ input: child.stderr! }).on("line", (line) => output.push(line))
  const port = await new Promise<number>((resolvePort, reject) => {
    const timer = setTimeout(() => reject(new Error(`not listening in ${waitMs} ms:\n${output.join("\n")}`)), waitMs)
    createInterface({ input: child.stdout! }).on("line", (line) => {
      output.push(line)
      if (!line.includes('"discovery service listening"')) return
      clearTimeout(timer)
      resolvePort((JSON.parse(line) as { annotations: { port: number } }).annotations.port)
    })
    child.once("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`exited with ${code}:\n${output.join("\n")}`))
    })
  })
  return { child, address: `127.0.0.1:${port}`, output }
}

/** What one watcher saw after its snapshot. */
interface Watcher {
  readonly cluster: number
  readonly seqs: Array<number>
  snapshot: ReadonlyArray<number> | undefined
  unexpected: number
  end: CallEnd | undefined
  call: Watch | undefined
}

afterAll(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
})

describe("soak, short", { timeout: 90_000 }, () => {
  it("delivers every update to every watcher of its cluster in order, then exits 0 on SIGTERM", async () => {
    const server = await startServer()
    const sessions: Array<http2.ClientHttp2Session> = []
    try {
      for (let i = 0; i <= connections; i++) sessions.push(await connect(server.address))
      const writer = sessions[connections]!
      let writes = 0
      const update = (c: number, a: number, seq: number) =>
        unary(
          writer,
          "AffiliateUpdate",
          writerAddress(writes++),
          AffiliateUpdateRequestSchema,
          {
            clusterId: clusterId(c),
            affiliateId: `node-${a}`,
            affiliateData: data(seq),
            affiliateEndpoints: [endpoint(`soak-${c}-${a}-a`), endpoint(`soak-${c}-${a}-b`)],
            ttl: { seconds: 1800n }
          },
          AffiliateUpdateResponseSchema
        )

      // Every cluster holds its affiliates (sequence 0) before any watcher opens.
      await Promise.all(
        Array.from({ length: clusters }, async (_, c) => {
          for (let a = 0; a < affiliates; a++) await update(c, a, 0)
        })
      )

      const snapshots = countdown(watchers)
      const deliveries = countdown(watchers * updatesPerCluster)
      let stopping = false
      const endedEarly: Array<CallEnd> = []
      const all: Array<Watcher> = Array.from({ length: watchers }, (_, i) => ({
        cluster: i % clusters,
        seqs: [],
        snapshot: undefined,
        unexpected: 0,
        end: undefined,
        call: undefined
      }))
      all.forEach((w, i) => {
        w.call = watch(
          sessions[Math.floor(i / streamsPerConnection)]!,
          clusterId(w.cluster),
          watcherAddress(i),
          (m) => {
            if (w.snapshot === undefined) {
              w.snapshot = m.affiliates.map((a) => seqOf(a.data)).sort((x, y) => x - y)
              snapshots.tick()
            } else if (m.deleted || m.affiliates.length !== 1) {
              w.unexpected++
            } else {
              w.seqs.push(seqOf(m.affiliates[0]!.data))
              deliveries.tick()
            }
          }
        )
        w.call.ended.then((end) => {
          w.end = end
          if (!stopping) endedEarly.push(end)
        })
      })
      await within(
        snapshots.done,
        waitMs,
        () => `${snapshots.left()} watchers got no snapshot; ${endedEarly.length} ended`
      )
      for (const w of all) assert.deepStrictEqual(w.snapshot, [0, 0, 0, 0, 0])

      // The writer: each cluster's updates one at a time, so the server orders them as sent.
      await Promise.all(
        Array.from({ length: clusters }, async (_, c) => {
          for (let seq = 1; seq <= updatesPerCluster; seq++) {
            await update(c, seq % affiliates, seq)
            await new Promise((r) => setTimeout(r, 100))
          }
        })
      )
      await within(
        deliveries.done,
        waitMs,
        () =>
          `${deliveries.left()} of ${watchers * updatesPerCluster} deliveries missing; ` +
          `${endedEarly.length} watchers ended: ${JSON.stringify(endedEarly.slice(0, 3))}`
      )

      const expected = Array.from({ length: updatesPerCluster }, (_, k) => k + 1)
      for (const w of all) {
        assert.deepStrictEqual(w.seqs, expected)
        assert.strictEqual(w.unexpected, 0)
      }
      assert.deepStrictEqual(endedEarly, [])

      // A new connection: the watchers' ones are at the server's limit of concurrent streams.
      sessions.push(await connect(server.address))
      const hello = await unary(
        sessions.at(-1)!,
        "Hello",
        watcherAddress(0),
        HelloRequestSchema,
        { clusterId: clusterId(0), clientVersion: "v1.7.0" },
        HelloResponseSchema
      )
      assert.strictEqual(hello.clientIp.length, 16)

      stopping = true
      const exit = once(server.child, "exit") as Promise<[number | null, NodeJS.Signals | null]>
      server.child.kill("SIGTERM")
      const ends = await within(
        Promise.all(all.map((w) => w.call!.ended)),
        waitMs,
        () => `${all.filter((w) => w.end === undefined).length} watches still open after SIGTERM`
      )
      assert.deepStrictEqual(
        ends.filter((end) => end.status !== 14),
        [],
        "every watch ends with UNAVAILABLE"
      )
      const [code, signal] = await within(exit, waitMs, () => "no exit after SIGTERM")
      assert.deepStrictEqual({ code, signal }, { code: 0, signal: null }, server.output.slice(-20).join("\n"))
    } finally {
      for (const session of sessions) session.destroy()
      if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill("SIGKILL")
    }
  })
})
