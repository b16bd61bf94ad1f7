/**
 * What a hostile or careless client does to a discovery server, each as a
 * function that runs against a service on loopback and gives its figures:
 * malformed messages on every RPC, unfinished large requests, silent and
 * half-open connections, ping floods, failing calls in a loop, and kill -9
 * during snapshot saves. `npm run abuse` runs them at full size; the
 * reliability tests run them small and assert on what they give.
 */
import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs"
import * as http2 from "node:http2"
import * as net from "node:net"
import { join } from "node:path"
import { create, toBinary } from "@bufbuild/protobuf"
import { durationFromMs } from "@bufbuild/protobuf/wkt"
import type { ClusterEntry } from "../src/core/server/SnapshotCodec.ts"
import { decode, encode } from "../src/core/server/SnapshotCodec.ts"
import { AffiliateUpdateRequestSchema, HelloRequestSchema } from "../src/gen/discovery/server/cluster_pb.ts"
import { type Service, startService } from "./serviceProcess.ts"
import { exited, sleep } from "./support.ts"

const service = "/sidero.discovery.server.Cluster"
const methods = ["Hello", "AffiliateUpdate", "AffiliateDelete", "List", "Watch"] as const

/** A small deterministic PRNG (mulberry32). */
export const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

/** The gRPC framing of `payload`: flag byte, big-endian length, bytes. */
const framed = (payload: Uint8Array, flag = 0, announced = payload.length): Buffer => {
  const bytes = Buffer.alloc(5 + payload.length)
  bytes[0] = flag
  bytes.writeUInt32BE(announced, 1)
  bytes.set(payload, 5)
  return bytes
}

/** An HTTP/2 session from `localAddress`, ready once the server's SETTINGS came. */
export const openSession = (port: number, localAddress = "127.0.0.1"): Promise<http2.ClientHttp2Session> =>
  new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`, {
      maxSessionMemory: 1024,
      createConnection: () => net.connect({ port, host: "127.0.0.1", localAddress })
    })
    session.on("error", () => {})
    session.once("remoteSettings", () => resolve(session))
    session.once("close", () => reject(new Error("the session closed before the server's settings came")))
  })

/** One request as sent: headers over gRPC's defaults, DATA, and whether to end the stream. */
interface Request {
  readonly kind: string
  readonly headers?: http2.OutgoingHttpHeaders
  readonly body: ReadonlyArray<Buffer>
  readonly end: boolean
}

/** How a request ended: its gRPC status name, HTTP status, or how the stream closed without one. */
type Outcome = string

const grpcCodes = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED"
]

/** Sends `request` and reads how it ended, within `timeoutMillis`. */
const exchange = (session: http2.ClientHttp2Session, request: Request, timeoutMillis: number): Promise<Outcome> =>
  new Promise((resolve) => {
    const path = (request.headers?.[":path"] as string | undefined) ?? `${service}/Hello`
    const stream = session.request({
      ":method": "POST",
      ":path": path,
      "content-type": "application/grpc",
      te: "trailers",
      "grpc-timeout": "2S",
      ...request.headers
    })
    let outcome: Outcome | undefined
    const settle = (value: Outcome) => {
      if (outcome !== undefined) return
      outcome = value
      clearTimeout(timer)
      resolve(value)
    }
    const timer = setTimeout(() => {
      settle("no answer")
      stream.close(http2.constants.NGHTTP2_CANCEL)
    }, timeoutMillis)
    const statusOf = (headers: http2.IncomingHttpHeaders) => {
      const status = headers["grpc-status"]
      if (status !== undefined) settle(grpcCodes[Number(status)] ?? `grpc ${status}`)
      else if (headers[":status"] !== undefined && Number(headers[":status"]) !== 200)
        settle(`HTTP ${headers[":status"]}`)
    }
    stream.on("response", statusOf)
    stream.on("trailers", statusOf)
    stream.on("error", () => {})
    stream.on("data", () => {})
    stream.on("close", () => settle(`reset ${stream.rstCode ?? "?"}`))
    for (const chunk of request.body) stream.write(chunk)
    if (request.end) stream.end()
  })

/** The hostile requests, one of each kind per call of the generator, drawn by `next`. */
const hostileRequest = (next: () => number, i: number): Request => {
  const method = methods[i % methods.length]!
  const path = `${service}/${method}`
  const randomBytes = (max: number) => Buffer.from(Array.from({ length: Math.floor(next() * max) }, () => next() * 256))
  const kinds: Array<() => Request> = [
    () => ({ kind: "random bytes", headers: { ":path": path }, body: [framed(randomBytes(300))], end: true }),
    () => ({
      kind: "invalid UTF-8 ID",
      headers: { ":path": path },
      body: [framed(Uint8Array.of(0x0a, 0x02, 0xff, 0xfe, 0x12, 0x01, 0x80))],
      end: true
    }),
    () => ({
      kind: "oversized IDs and data",
      headers: { ":path": `${service}/AffiliateUpdate` },
      body: [
        framed(
          toBinary(
            AffiliateUpdateRequestSchema,
            create(AffiliateUpdateRequestSchema, {
              clusterId: "c".repeat(300),
              affiliateId: "a".repeat(300),
              affiliateData: new Uint8Array(3000),
              affiliateEndpoints: Array.from({ length: 70 }, () => new Uint8Array(40)),
              ttl: durationFromMs(-1000)
            })
          )
        )
      ],
      end: true
    }),
    () => ({ kind: "compressed flag", headers: { ":path": path }, body: [framed(randomBytes(20), 1)], end: true }),
    () => ({ kind: "unknown flag", headers: { ":path": path }, body: [framed(randomBytes(20), 7)], end: true }),
    () => ({
      kind: "length over 4 MiB",
      headers: { ":path": path },
      body: [framed(new Uint8Array(10), 0, 5 * 1024 * 1024)],
      end: true
    }),
    () => ({
      kind: "truncated message",
      headers: { ":path": path },
      body: [framed(new Uint8Array(50), 0, 100)],
      end: true
    }),
    () => ({
      kind: "two messages",
      headers: { ":path": path },
      body: [framed(new Uint8Array(0)), framed(new Uint8Array(0))],
      end: true
    }),
    () => ({ kind: "no message", headers: { ":path": path }, body: [], end: true }),
    () => ({
      kind: "wrong content type",
      headers: { ":path": path, "content-type": "text/plain" },
      body: [framed(new Uint8Array(0))],
      end: true
    }),
    () => ({ kind: "GET", headers: { ":path": path, ":method": "GET" }, body: [], end: true }),
    () => ({
      kind: "malformed timeout",
      headers: { ":path": path, "grpc-timeout": "soon" },
      body: [framed(new Uint8Array(0))],
      end: true
    }),
    () => ({
      kind: "unknown method",
      headers: { ":path": `${service}/Nope${i % 7}` },
      body: [framed(new Uint8Array(0))],
      end: true
    }),
    () => ({
      kind: "unknown encoding",
      headers: { ":path": path, "grpc-encoding": "zstd" },
      body: [framed(randomBytes(20), 1)],
      end: true
    })
  ]
  return kinds[Math.floor(next() * kinds.length)]!()
}

/** A valid Hello, which must be answered OK. */
export const hello = async (session: http2.ClientHttp2Session): Promise<Outcome> =>
  exchange(
    session,
    {
      kind: "hello",
      headers: { ":path": `${service}/Hello` },
      body: [
        framed(toBinary(HelloRequestSchema, create(HelloRequestSchema, { clusterId: "ok", clientVersion: "v1" })))
      ],
      end: true
    },
    10_000
  )

/** What `hostileMessages` gives. */
export interface HostileFigures {
  readonly sent: number
  /** How the requests ended, by status (`HTTP 415`, `INTERNAL`, …, or `no answer`). */
  readonly outcomes: Record<string, number>
  /** Hostile requests that got no status (reset without one, or no answer in 10 s). */
  readonly unanswered: number
  /** Valid Hellos from another address after each batch, and how many were OK. */
  readonly validAfterBatches: number
  readonly validOk: number
  readonly kinds: Record<string, number>
  /** How each kind of request ended. */
  readonly byKind: Record<string, Record<string, number>>
}

/**
 * Sends `count` malformed requests spread over the five RPCs from
 * 127.0.0.1, `inFlight` at once over several connections, and after each
 * batch a valid Hello from 127.0.0.2.
 */
export const hostileMessages = async (
  port: number,
  count: number,
  options: { readonly inFlight?: number; readonly batch?: number; readonly seed?: number } = {}
): Promise<HostileFigures> => {
  const next = random(options.seed ?? 14)
  const inFlight = options.inFlight ?? 200
  const batch = options.batch ?? 10_000
  // 99 streams a connection, one below the server's limit: a Node client that keeps exactly the limit in
  // flight now and then opens one stream before the server's nghttp2 has counted one out, and nghttp2
  // ends the whole connection for it (GOAWAY PROTOCOL_ERROR), which is not what this measures.
  const sessions = await Promise.all(Array.from({ length: Math.ceil(inFlight / 99) }, () => openSession(port)))
  const normal = await openSession(port, "127.0.0.2")
  const outcomes: Record<string, number> = {}
  const kinds: Record<string, number> = {}
  const byKind: Record<string, Record<string, number>> = {}
  let sent = 0
  let validAfterBatches = 0
  let validOk = 0
  try {
    while (sent < count) {
      const size = Math.min(batch, count - sent)
      let index = 0
      const worker = async (session: http2.ClientHttp2Session) => {
        while (index < size) {
          const request = hostileRequest(next, sent + index++)
          kinds[request.kind] = (kinds[request.kind] ?? 0) + 1
          const outcome = await exchange(session, request, 10_000)
          outcomes[outcome] = (outcomes[outcome] ?? 0) + 1
          const ofKind = byKind[request.kind] ?? {}
          ofKind[outcome] = (ofKind[outcome] ?? 0) + 1
          byKind[request.kind] = ofKind
        }
      }
      await Promise.all(Array.from({ length: inFlight }, (_, i) => worker(sessions[i % sessions.length]!)))
      sent += size
      validAfterBatches++
      if ((await hello(normal)) === "OK") validOk++
    }
  } finally {
    for (const session of [...sessions, normal]) session.destroy()
  }
  const unanswered = Object.entries(outcomes)
    .filter(([outcome]) => outcome.startsWith("reset") || outcome === "no answer")
    .reduce((sum, [, n]) => sum + n, 0)
  return { sent, outcomes, unanswered, validAfterBatches, validOk, kinds, byKind }
}

/** What `unfinishedRequests` gives. */
export interface UnfinishedFigures {
  readonly connections: number
  readonly streams: number
  readonly messageBytes: number
  readonly rssBeforeMiB: number
  readonly rssPeakMiB: number
  readonly rssAfterMiB: number
  /** How the attacker's streams ended while it held them open (statuses, or still open). */
  readonly outcomes: Record<string, number>
  /** Hellos from another address during the attack, and how many were OK. */
  readonly normalCalls: number
  readonly normalOk: number
}

/** How an attacker's stream ended without a status, by its RST_STREAM code. */
const closedWithout = (code: number | undefined): string =>
  code === http2.constants.NGHTTP2_ENHANCE_YOUR_CALM
    ? "refused: connection memory (ENHANCE_YOUR_CALM)"
    : code === http2.constants.NGHTTP2_REFUSED_STREAM
      ? "refused: stream limit (REFUSED_STREAM)"
      : "never opened (held back by the stream limit until the attacker left)"

/**
 * Opens `streams` AffiliateUpdate streams on each of `connections`
 * connections, sends each a `messageBytes` message but for its last 10
 * bytes and never finishes, samples the server's memory for `holdMillis`
 * while a normal client calls Hello from 127.0.0.2, then closes everything.
 */
export const unfinishedRequests = async (
  target: Service,
  options: {
    readonly connections: number
    readonly streams: number
    readonly messageBytes?: number
    readonly holdMillis?: number
  }
): Promise<UnfinishedFigures> => {
  const messageBytes = options.messageBytes ?? 4 * 1024 * 1024 - 100
  const holdMillis = options.holdMillis ?? 10_000
  const rssBeforeMiB = target.rssMiB()
  const partial = framed(new Uint8Array(messageBytes).fill(1)).subarray(0, 5 + messageBytes - 10)
  const outcomes: Record<string, number> = {}
  const count = (key: string) => {
    outcomes[key] = (outcomes[key] ?? 0) + 1
  }
  const sessions = await Promise.all(Array.from({ length: options.connections }, () => openSession(target.port)))
  const streams: Array<http2.ClientHttp2Stream> = []
  for (const session of sessions) {
    for (let i = 0; i < options.streams; i++) {
      const stream = session.request({
        ":method": "POST",
        ":path": `${service}/AffiliateUpdate`,
        "content-type": "application/grpc",
        te: "trailers"
      })
      let status: string | undefined
      stream.on("response", (headers) => {
        status = grpcCodes[Number(headers["grpc-status"])] ?? `HTTP ${headers[":status"]}`
      })
      stream.on("error", () => {})
      stream.on("close", () => count(status ?? closedWithout(stream.rstCode)))
      stream.write(partial)
      streams.push(stream)
    }
  }
  const normal = await openSession(target.port, "127.0.0.2")
  let rssPeakMiB = rssBeforeMiB
  let normalCalls = 0
  let normalOk = 0
  const until = Date.now() + holdMillis
  while (Date.now() < until) {
    rssPeakMiB = Math.max(rssPeakMiB, target.rssMiB())
    normalCalls++
    if ((await hello(normal)) === "OK") normalOk++
    rssPeakMiB = Math.max(rssPeakMiB, target.rssMiB())
    await sleep(200)
  }
  const stillOpen = streams.filter((stream) => !stream.closed).length
  for (const session of [...sessions, normal]) session.destroy()
  await sleep(1000)
  if (stillOpen > 0) outcomes["held open"] = stillOpen
  return {
    connections: options.connections,
    streams: options.streams,
    messageBytes,
    rssBeforeMiB,
    rssPeakMiB,
    rssAfterMiB: target.rssMiB(),
    outcomes,
    normalCalls,
    normalOk
  }
}

/** What `idleConnections` gives. */
export interface IdleFigures {
  readonly silent: number
  readonly halfPreface: number
  readonly idleSessions: number
  /** Of each kind, how many the server closed within the wait. */
  readonly silentClosed: number
  readonly halfPrefaceClosed: number
  readonly idleSessionsClosed: number
  readonly waitedMillis: number
  readonly rssBeforeMiB: number
  readonly rssPeakMiB: number
  readonly rssAfterMiB: number
}

/** Loopback addresses to spread connections over, so the per-address cap is not what closes them. */
const loopback = (i: number, spread: number) => `127.0.1.${(i % spread) + 1}`

/**
 * Opens silent TCP connections, connections that send half the HTTP/2
 * preface, and HTTP/2 sessions that make one call and then idle, spread
 * over `spread` loopback addresses; waits up to `waitMillis` for the server
 * to close them and counts what it closed.
 */
export const idleConnections = async (
  target: Service,
  options: {
    readonly silent: number
    readonly halfPreface: number
    readonly idleSessions: number
    readonly waitMillis: number
    readonly spread?: number
  }
): Promise<IdleFigures> => {
  const spread = options.spread ?? 50
  const rssBeforeMiB = target.rssMiB()
  const closed = { silent: 0, half: 0, session: 0 }
  const sockets: Array<net.Socket> = []
  const open = (i: number, kind: "silent" | "half") =>
    new Promise<void>((resolve) => {
      const socket = net.connect({ port: target.port, host: "127.0.0.1", localAddress: loopback(i, spread) })
      socket.on("error", () => {})
      socket.resume()
      socket.once("connect", () => {
        if (kind === "half") socket.write("PRI * HTTP/2.0\r\n")
        resolve()
      })
      socket.once("close", () => {
        closed[kind]++
        resolve()
      })
      sockets.push(socket)
    })
  for (let i = 0; i < options.silent; i += 500) {
    await Promise.all(Array.from({ length: Math.min(500, options.silent - i) }, (_, j) => open(i + j, "silent")))
  }
  for (let i = 0; i < options.halfPreface; i += 500) {
    await Promise.all(Array.from({ length: Math.min(500, options.halfPreface - i) }, (_, j) => open(i + j, "half")))
  }
  const sessions: Array<http2.ClientHttp2Session> = []
  for (let i = 0; i < options.idleSessions; i += 200) {
    const opened = await Promise.all(
      Array.from({ length: Math.min(200, options.idleSessions - i) }, (_, j) =>
        openSession(target.port, loopback(i + j, spread))
      )
    )
    for (const session of opened) {
      session.once("close", () => closed.session++)
      sessions.push(session)
    }
    await Promise.all(opened.map((session) => hello(session)))
  }
  const started = Date.now()
  let rssPeakMiB = rssBeforeMiB
  const total = options.silent + options.halfPreface + options.idleSessions
  while (Date.now() - started < options.waitMillis && closed.silent + closed.half + closed.session < total) {
    rssPeakMiB = Math.max(rssPeakMiB, target.rssMiB())
    await sleep(250)
  }
  const waitedMillis = Date.now() - started
  for (const socket of sockets) socket.destroy()
  for (const session of sessions) session.destroy()
  await sleep(500)
  return {
    silent: options.silent,
    halfPreface: options.halfPreface,
    idleSessions: options.idleSessions,
    silentClosed: closed.silent,
    halfPrefaceClosed: closed.half,
    idleSessionsClosed: closed.session,
    waitedMillis,
    rssBeforeMiB,
    rssPeakMiB,
    rssAfterMiB: target.rssMiB()
  }
}

/** What `pingFlood` gives. */
export interface PingFigures {
  /** Pings the server acknowledged before it ended the session. */
  readonly acknowledged: number
  /** The GOAWAY's error code and debug data, when one came. */
  readonly goawayCode: number | undefined
  readonly goawayData: string | undefined
  readonly sessionClosed: boolean
}

/** Pings as fast as the server answers, at most `maxPings` times, until it ends the session. */
export const pingFlood = async (port: number, maxPings: number): Promise<PingFigures> => {
  const session = await openSession(port)
  let goawayCode: number | undefined
  let goawayData: string | undefined
  session.once("goaway", (code, _last, data) => {
    goawayCode = code
    goawayData = data?.toString()
  })
  const closed = new Promise<void>((resolve) => session.once("close", () => resolve()))
  let acknowledged = 0
  while (acknowledged < maxPings && !session.closed && !session.destroyed) {
    const ok = await new Promise<boolean>((resolve) => {
      try {
        session.ping((error) => resolve(error === null))
      } catch {
        resolve(false)
      }
    })
    if (!ok) break
    acknowledged++
  }
  const sessionClosed = await Promise.race([closed.then(() => true), sleep(2000).then(() => false)])
  session.destroy()
  return { acknowledged, goawayCode, goawayData, sessionClosed }
}

/** What `logFlood` gives. */
export interface LogFigures {
  readonly calls: number
  readonly failed: number
  /** From the first call to the end of the last. */
  readonly elapsedMillis: number
  readonly logBytes: number
  /** Log lines of failed calls written, and held back (from the service's counter). */
  readonly failureLines: number
  readonly suppressed: number
}

/** Makes failing calls (AffiliateUpdate with an empty affiliate ID) from one address for `millis`. */
export const logFlood = async (
  target: Service,
  millis: number,
  suppressedNow: () => Promise<number>
): Promise<LogFigures> => {
  const session = await openSession(target.port)
  const bytesBefore = target.logBytes()
  const linesBefore = readFileSync(target.logPath, "utf8").split("\n").length
  const suppressedBefore = await suppressedNow()
  const invalid = framed(
    toBinary(
      AffiliateUpdateRequestSchema,
      create(AffiliateUpdateRequestSchema, { clusterId: "flood", affiliateId: "", ttl: durationFromMs(60_000) })
    )
  )
  let calls = 0
  let failed = 0
  const startedAt = Date.now()
  const until = startedAt + millis
  const worker = async () => {
    while (Date.now() < until) {
      calls++
      const outcome = await exchange(
        session,
        { kind: "flood", headers: { ":path": `${service}/AffiliateUpdate` }, body: [invalid], end: true },
        10_000
      )
      if (outcome !== "OK") failed++
    }
  }
  await Promise.all(Array.from({ length: 32 }, worker))
  const elapsedMillis = Date.now() - startedAt
  session.destroy()
  await sleep(500)
  const lines = readFileSync(target.logPath, "utf8").split("\n")
  return {
    calls,
    failed,
    elapsedMillis,
    logBytes: target.logBytes() - bytesBefore,
    failureLines: lines.slice(linesBefore - 1).filter((line) => line.includes("AffiliateUpdate")).length,
    suppressed: (await suppressedNow()) - suppressedBefore
  }
}

/** What `killDuringSaves` gives. */
export interface KillFigures {
  readonly runs: number
  /** Snapshot files that did not decode whole (skipped ranges, or not the saved state). */
  readonly corrupt: number
  /** Runs that left the temporary file behind (harmless: the next save replaces it). */
  readonly leftTemporary: number
  /** Runs whose service replaced the file before it was killed (so the kill can have hit a save). */
  readonly saved: number
  readonly affiliates: number
}

/** A state of `clusters` × 5 affiliates that stays valid for an hour. */
const liveState = (clusters: number): Array<ClusterEntry> => {
  const expiresAt = Date.now() + 3_600_000
  return Array.from({ length: clusters }, (_, c) => ({
    id: `kill-${c}`,
    affiliates: new Map(
      Array.from({ length: 5 }, (_, a) => {
        const id = `node-${a}`
        return [
          id,
          {
            id,
            data: new Uint8Array(256).fill(c % 256),
            expiresAt,
            endpoints: Array.from({ length: 2 }, (_, e) => ({ data: new Uint8Array(16).fill(e), expiresAt }))
          }
        ] as const
      })
    )
  }))
}

/**
 * Starts the service `runs` times on a snapshot of `clusters` clusters with
 * a save every 50 ms, kills it with SIGKILL at a random point after it is
 * ready, and checks the file decodes whole, with every affiliate.
 */
export const killDuringSaves = async (
  dir: string,
  options: { readonly runs: number; readonly clusters: number; readonly seed?: number }
): Promise<KillFigures> => {
  const next = random(options.seed ?? 9)
  const path = join(dir, "kill.binpb")
  const state = liveState(options.clusters)
  const affiliates = options.clusters * 5
  writeFileSync(path, encode(state, Date.now()).bytes)
  let corrupt = 0
  let leftTemporary = 0
  let saved = 0
  for (let run = 0; run < options.runs; run++) {
    const before = statSync(path)
    const target = await startService(dir, [`--snapshot-path=${path}`, "--snapshot-interval=50ms"], { name: "kill" })
    await sleep(Math.floor(next() * 400))
    target.child.kill("SIGKILL")
    await exited(target.child, 5000)
    const bytes = new Uint8Array(readFileSync(path))
    const decoded = decode(bytes, Date.now())
    const count = decoded.clusters.reduce((sum, cluster) => sum + cluster.affiliates.size, 0)
    if (decoded.skipped.length > 0 || count !== affiliates) corrupt++
    if (existsSync(`${path}.tmp`)) leftTemporary++
    const after = statSync(path)
    if (after.ino !== before.ino || after.mtimeMs !== before.mtimeMs) saved++
  }
  return { runs: options.runs, corrupt, leftTemporary, saved, affiliates }
}
