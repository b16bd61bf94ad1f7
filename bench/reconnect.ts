/**
 * The reconnect storm of `npm run bench -- --only reconnect`: many watchers
 * of one cluster, each a Watch stream over raw HTTP/2 (a few streams per
 * connection, as Talos nodes behind a proxy would share none), lose their
 * connections at once and come back. This module opens the watchers, keeps
 * each one's position (epoch and revision, when the server names them),
 * counts the bytes their connections read, and tells when every watcher is
 * current again: a snapshot is current at once (it is taken after the
 * changes), a resumed watch once it reached the cluster's revision.
 */
import * as http2 from "node:http2"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import {
  AffiliateUpdateRequestSchema,
  WatchRequestSchema,
  WatchResponseSchema
} from "../src/gen/discovery/server/cluster_pb.ts"
import { frame, MessageReader } from "../src/adapters/grpc/http2/framing.ts"

/** Where a watcher stands. */
interface Position {
  readonly epoch: string
  readonly revision: number
}

interface Watcher {
  position: Position | undefined
  /** How this connection's watch started. */
  start: "snapshot" | "resumed" | undefined
  stream: http2.ClientHttp2Stream | undefined
}

/** A group of watchers over `sessions` HTTP/2 connections. */
export interface WatcherGroup {
  readonly watchers: ReadonlyArray<Watcher>
  /** Bytes read by the connections opened by the last `connect`. */
  readonly bytesRead: () => number
  /** Opens fresh connections and a watch per watcher, resuming where each one stood when `resume` is set. */
  readonly connect: (address: string, resume: boolean) => void
  /** Resolves once every watcher has started and, if resumed, reached `revision` (when given). */
  readonly current: (revision: number | undefined, timeoutMs: number) => Promise<void>
  /** Drops every connection at once. */
  readonly drop: () => void
}

/**
 * Watchers of `clusterId`, `perSession` streams per connection; each sends
 * its own `x-real-ip` label, so a server that rate-limits by address (the
 * original, which trusts the header) never delays one.
 */
export const watcherGroup = (clusterId: string, count: number, perSession: number): WatcherGroup => {
  const watchers: Array<Watcher> = Array.from({ length: count }, () => ({
    position: undefined,
    start: undefined,
    stream: undefined
  }))
  let sessions: Array<http2.ClientHttp2Session> = []
  const open = (index: number, session: http2.ClientHttp2Session, resume: boolean) => {
    const watcher = watchers[index]!
    watcher.start = undefined
    const position = resume ? watcher.position : undefined
    const request = create(WatchRequestSchema, {
      clusterId,
      resumeEpoch: position?.epoch ?? "",
      resumeRevision: BigInt(position?.revision ?? 0),
      withRevisions: true
    })
    const stream = session.request({
      ":method": "POST",
      ":path": "/sidero.discovery.server.Cluster/Watch",
      "content-type": "application/grpc",
      te: "trailers",
      "x-real-ip": `2001:db8::${(index + 1).toString(16)}`
    })
    watcher.stream = stream
    const reader = new MessageReader(-1)
    const sink = {
      onMessage: (_flag: number, payload: Buffer) => {
        const message = fromBinary(WatchResponseSchema, payload)
        if (watcher.start === undefined) watcher.start = message.resumed ? "resumed" : "snapshot"
        if (message.epoch !== "") watcher.position = { epoch: message.epoch, revision: Number(message.revision) }
        return true
      },
      reserve: () => true
    }
    stream.on("data", (chunk: Buffer) => reader.read(chunk, sink))
    stream.on("error", () => undefined)
    stream.end(frame(toBinary(WatchRequestSchema, request)))
  }
  return {
    watchers,
    bytesRead: () => sessions.reduce((sum, session) => sum + (session.socket?.bytesRead ?? 0), 0),
    connect: (address, resume) => {
      sessions = []
      for (let i = 0; i < count; i++) {
        if (i % perSession === 0) {
          const session = http2.connect(`http://${address}`)
          session.on("error", () => undefined)
          sessions.push(session)
        }
        open(i, sessions.at(-1)!, resume)
      }
    },
    current: async (revision, timeoutMs) => {
      const deadline = performance.now() + timeoutMs
      const done = (w: Watcher) =>
        w.start === "snapshot" ||
        (w.start === "resumed" && (revision === undefined || (w.position?.revision ?? -1) >= revision))
      while (!watchers.every(done)) {
        if (performance.now() > deadline) {
          const behind = watchers.filter((w) => !done(w)).length
          throw new Error(`${behind} of ${count} watchers not current after ${timeoutMs} ms`)
        }
        await new Promise((resolve) => setImmediate(resolve))
      }
    },
    drop: () => {
      for (const session of sessions) session.destroy()
      sessions = []
    }
  }
}

/**
 * Writes affiliates over one HTTP/2 connection, each call from its own
 * `x-real-ip` label (the original rate-limits by that address).
 */
export const affiliateWriter = (address: string) => {
  const session = http2.connect(`http://${address}`)
  session.on("error", () => undefined)
  let calls = 0
  const update = (clusterId: string, affiliateId: string, data: Uint8Array, endpoints: ReadonlyArray<Uint8Array>) =>
    new Promise<void>((resolve, reject) => {
      const request = create(AffiliateUpdateRequestSchema, {
        clusterId,
        affiliateId,
        affiliateData: data,
        affiliateEndpoints: [...endpoints],
        ttl: { seconds: 1800n }
      })
      const stream = session.request({
        ":method": "POST",
        ":path": "/sidero.discovery.server.Cluster/AffiliateUpdate",
        "content-type": "application/grpc",
        te: "trailers",
        "x-real-ip": `2001:db8:1::${(++calls).toString(16)}`
      })
      let status: string | undefined
      stream.on("trailers", (trailers) => {
        status = String(trailers["grpc-status"])
      })
      stream.on("response", (headers) => {
        if (headers["grpc-status"] !== undefined) status = String(headers["grpc-status"])
      })
      stream.on("data", () => undefined)
      stream.on("error", reject)
      stream.on("close", () =>
        status === "0" ? resolve() : reject(new Error(`AffiliateUpdate ${affiliateId}: grpc-status ${status}`))
      )
      stream.end(frame(toBinary(AffiliateUpdateRequestSchema, request)))
    })
  return { update, close: () => session.close() }
}
