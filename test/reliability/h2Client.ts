/**
 * A bare gRPC client over `node:http2` for the reliability tests: Watch
 * streams by the hundred on one connection, and unary calls, with messages
 * encoded by the generated protobuf-es schemas. It has no retries, no
 * keepalive and no flow-control pings, so what a test sees is what the server
 * did.
 */
import * as http2 from "node:http2"
import { create, type DescMessage, fromBinary, type MessageInitShape, toBinary } from "@bufbuild/protobuf"
import {
  type WatchResponse,
  WatchRequestSchema,
  WatchResponseSchema
} from "../../src/gen/discovery/server/cluster_pb.ts"

/** How a call ended: its grpc-status (undefined when none came) and the HTTP/2 reset code of the stream. */
export interface CallEnd {
  readonly status: number | undefined
  readonly message: string | undefined
  readonly rstCode: number | undefined
}

/** The gRPC length-prefixed form of one message. */
export const frame = (bytes: Uint8Array): Buffer => {
  const framed = Buffer.alloc(5 + bytes.length)
  framed.writeUInt32BE(bytes.length, 1)
  framed.set(bytes, 5)
  return framed
}

/** Splits the messages of a response body out of its chunks, however they are cut. */
export class MessageReader {
  private pending: Buffer = Buffer.alloc(0)

  /** The messages that `chunk` completes. */
  push(chunk: Buffer): Array<Uint8Array> {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk])
    const messages: Array<Uint8Array> = []
    while (this.pending.length >= 5) {
      const length = this.pending.readUInt32BE(1)
      if (this.pending.length < 5 + length) break
      messages.push(this.pending.subarray(5, 5 + length))
      this.pending = this.pending.subarray(5 + length)
    }
    return messages
  }
}

/** An h2c connection to `address` (host:port), once the socket is connected (at most 10 s). */
export const connect = (address: string): Promise<http2.ClientHttp2Session> =>
  new Promise((resolve, reject) => {
    const session = http2.connect(`http://${address}`)
    const timer = setTimeout(() => {
      session.destroy()
      reject(new Error(`no connection to ${address} in 10 s`))
    }, 10_000)
    session.once("connect", () => {
      clearTimeout(timer)
      session.removeListener("error", reject)
      session.on("error", () => {})
      resolve(session)
    })
    session.once("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
  })

const requestHeaders = (method: string, clientAddress: string): http2.OutgoingHttpHeaders => ({
  ":method": "POST",
  ":path": `/sidero.discovery.server.Cluster/${method}`,
  "content-type": "application/grpc",
  te: "trailers",
  "x-real-ip": clientAddress
})

/** Opens a call, sends `request` as its one message and collects its response messages and end. */
const call = (
  session: http2.ClientHttp2Session,
  method: string,
  clientAddress: string,
  request: Uint8Array,
  onMessage: (bytes: Uint8Array) => void
) => {
  const stream = session.request(requestHeaders(method, clientAddress))
  const reader = new MessageReader()
  let status: number | undefined
  let message: string | undefined
  const statusFrom = (headers: http2.IncomingHttpHeaders) => {
    const value = headers["grpc-status"]
    if (value === undefined) return
    status = Number(value)
    const text = headers["grpc-message"]
    message = typeof text === "string" ? decodeURIComponent(text) : undefined
  }
  stream.on("response", statusFrom)
  stream.on("trailers", statusFrom)
  stream.on("data", (chunk: Buffer) => {
    for (const bytes of reader.push(chunk)) onMessage(bytes)
  })
  stream.on("error", () => {})
  const ended = new Promise<CallEnd>((resolve) =>
    stream.once("close", () => resolve({ status, message, rstCode: stream.rstCode }))
  )
  stream.end(frame(request))
  return { stream, ended }
}

/** An open Watch call. */
export interface Watch {
  /** Settles when the call is over, whoever ended it. */
  readonly ended: Promise<CallEnd>
  /** Cancels the call (RST_STREAM CANCEL). */
  readonly cancel: () => void
}

/** Watches `clusterId`; `onMessage` gets every response, the snapshot first. */
export const watch = (
  session: http2.ClientHttp2Session,
  clusterId: string,
  clientAddress: string,
  onMessage: (response: WatchResponse) => void
): Watch => {
  const request = toBinary(WatchRequestSchema, create(WatchRequestSchema, { clusterId }))
  const { stream, ended } = call(session, "Watch", clientAddress, request, (bytes) =>
    onMessage(fromBinary(WatchResponseSchema, bytes))
  )
  return { ended, cancel: () => stream.close(http2.constants.NGHTTP2_CANCEL) }
}

/** One unary call; fails unless it ends with status 0 within `timeoutMs` (a call still queued for a free stream included). */
export const unary = async <I extends DescMessage, O extends DescMessage>(
  session: http2.ClientHttp2Session,
  method: string,
  clientAddress: string,
  input: I,
  value: MessageInitShape<I>,
  output: O,
  timeoutMs = 10_000
) => {
  const responses: Array<Uint8Array> = []
  const { stream, ended } = call(session, method, clientAddress, toBinary(input, create(input, value)), (bytes) =>
    responses.push(bytes)
  )
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      stream.destroy()
      reject(new Error(`${method}: no answer in ${timeoutMs} ms`))
    }, timeoutMs)
  })
  const end = await Promise.race([ended, timeout]).finally(() => clearTimeout(timer))
  if (end.status !== 0 || responses.length !== 1) {
    throw new Error(`${method}: status ${end.status} ${end.message ?? ""} (reset ${end.rstCode})`)
  }
  return fromBinary(output, responses[0]!)
}
