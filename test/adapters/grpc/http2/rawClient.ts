/**
 * A bare `node:http2` client for the transport's protocol tests: it sends
 * exactly the headers and DATA chunks it is given (each chunk in its own
 * turn of the event loop, so each is its own DATA frame) and keeps the
 * response as it came: headers, the messages in its DATA frames, trailers
 * and the RST_STREAM code.
 */
import * as http2 from "node:http2"
import { setImmediate as nextTurn } from "node:timers/promises"

/** A response as received. */
export interface RawResponse {
  readonly headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader
  /** The header blocks received before the stream ended: 1 for Trailers-Only, 2 with trailers. */
  readonly headerBlocks: number
  readonly messages: ReadonlyArray<Buffer>
  readonly trailers: http2.IncomingHttpHeaders | undefined
  readonly rstCode: number | undefined
}

/** What to send. */
export interface RawRequest {
  readonly path: string
  /** Headers over the defaults (POST, `application/grpc`, `te: trailers`); `undefined` removes one. */
  readonly headers?: Record<string, string | undefined>
  /** DATA chunks, each written in its own turn. */
  readonly body?: ReadonlyArray<Uint8Array>
  /** End the request after the body (default true). */
  readonly end?: boolean
}

/** The gRPC message framing: flag byte, big-endian length, payload. */
export const message = (payload: Uint8Array | string, flag = 0): Buffer => {
  const bytes = typeof payload === "string" ? Buffer.from(payload) : Buffer.from(payload)
  const framed = Buffer.alloc(5 + bytes.length)
  framed[0] = flag
  framed.writeUInt32BE(bytes.length, 1)
  bytes.copy(framed, 5)
  return framed
}

/** Splits received DATA into messages (assumes well-formed framing). */
const messagesOf = (data: Buffer): Array<Buffer> => {
  const messages: Array<Buffer> = []
  let at = 0
  while (at + 5 <= data.length) {
    const length = data.readUInt32BE(at + 1)
    messages.push(data.subarray(at + 5, at + 5 + length))
    at += 5 + length
  }
  return messages
}

/** A plaintext HTTP/2 connection to `127.0.0.1:port`. */
export const connect = (port: number): Promise<http2.ClientHttp2Session> =>
  new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`)
    session.once("connect", () => resolve(session))
    session.once("error", reject)
  })

/** An open request: its stream, and the response once the stream closes. */
export interface OpenRequest {
  readonly stream: http2.ClientHttp2Stream
  readonly response: Promise<RawResponse>
}

/** Sends `request` on `session`. */
export const send = (session: http2.ClientHttp2Session, request: RawRequest): OpenRequest => {
  const headers: http2.OutgoingHttpHeaders = {
    ":method": "POST",
    ":path": request.path,
    "content-type": "application/grpc",
    te: "trailers"
  }
  for (const [name, value] of Object.entries(request.headers ?? {})) {
    if (value === undefined) delete headers[name]
    else headers[name] = value
  }
  const stream = session.request(headers)
  const response = new Promise<RawResponse>((resolve) => {
    let responseHeaders: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader = {}
    let headerBlocks = 0
    let trailers: http2.IncomingHttpHeaders | undefined
    const chunks: Array<Buffer> = []
    stream.on("response", (received) => {
      responseHeaders = received
      headerBlocks++
    })
    stream.on("trailers", (received) => {
      trailers = received
      headerBlocks++
    })
    stream.on("data", (chunk: Buffer) => chunks.push(chunk))
    stream.on("error", () => {})
    stream.on("close", () =>
      resolve({
        headers: responseHeaders,
        headerBlocks,
        messages: messagesOf(Buffer.concat(chunks)),
        trailers,
        rstCode: stream.rstCode
      })
    )
  })
  void (async () => {
    for (const chunk of request.body ?? []) {
      await nextTurn()
      if (stream.destroyed) return
      stream.write(chunk)
    }
    if (request.end !== false && !stream.destroyed) stream.end()
  })()
  return { stream, response }
}

/** `send` on a connection of its own, closed once the response is in. */
export const call = async (port: number, request: RawRequest): Promise<RawResponse> => {
  const session = await connect(port)
  try {
    return await send(session, request).response
  } finally {
    session.close()
  }
}

/** The status of a response: from its trailers, or from its headers when it is Trailers-Only. */
export const statusOf = (response: RawResponse): { readonly code: number; readonly message: string | undefined } => {
  const block = response.trailers ?? response.headers
  const message = block["grpc-message"]
  return {
    code: Number(block["grpc-status"]),
    message: typeof message === "string" ? decodeURIComponent(message) : undefined
  }
}
