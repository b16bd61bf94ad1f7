/**
 * One gRPC call on an HTTP/2 stream, as the handlers of the http2 transport
 * see it: the subset of grpc-js's server call objects that our services use
 * (`request`, `metadata`, `getPeer()`, `getDeadline()`, `cancelled` and the
 * "cancelled" event; for streams `write` with backpressure and "drain",
 * `end`, `destroyed`, `writableEnded`, "close" and `emit("error", status)`;
 * for bidirectional streams the "data" and "end" events), over the stream
 * protocol: the request's messages, the deadline, the response headers, the
 * messages, then the trailers, or a Trailers-Only block when the call fails
 * before sending anything.
 *
 * The stream's listeners are functions shared by every call (the call hangs
 * on the stream), so a call allocates no closures beyond the unary reply
 * callback. Most unary calls end in the turn of the event loop that opened
 * them; only a call still open at the end of that turn listens for the
 * stream's close (a cancel) and arms a timer for its deadline.
 *
 * @since 0.1.0
 */
import * as http2 from "node:http2"
import * as grpc from "@grpc/grpc-js"
import { CallEvents } from "./CallEvents.ts"
import type { Connection } from "./Connection.ts"
import { connectionOf, detachedConnection } from "./Connection.ts"
import type { MessageSink } from "./framing.ts"
import { frame, MessageReader } from "./framing.ts"
import type { RequestBudget } from "./RequestBudget.ts"
import { responseHeaders, trailers, trailersOnly, withMetadata } from "./responseHeaders.ts"
import type { CallStatus } from "./statuses.ts"
import {
  compressedWithoutEncoding,
  deadlineExceeded,
  deserializationFailed,
  fromHandlerError,
  handlerThrew,
  messageTooLarge,
  noRequestMessage,
  ok,
  overBudget,
  responseTooLarge,
  secondRequestMessage,
  serializationFailed,
  truncatedMessage,
  unexpectedPayloadFormat,
  unsupportedEncoding
} from "./statuses.ts"

/**
 * A registered method: its path, how its messages flow, the handler and the
 * message codecs of its grpc-js `MethodDefinition`.
 *
 * @category models
 * @since 0.1.0
 */
export interface Method {
  readonly path: string
  readonly kind: "unary" | "serverStream" | "bidi"
  // biome-ignore lint/suspicious/noExplicitAny: handlers are typed by the services that register them.
  readonly handler: (call: any, callback?: any) => void
  readonly serialize: (value: unknown) => Uint8Array
  readonly deserialize: (bytes: Buffer) => unknown
}

/**
 * Message size limits in bytes (-1 means none), and the server's budget for
 * request bytes held (none when `undefined`).
 *
 * @category models
 * @since 0.1.0
 */
export interface CallLimits {
  readonly maxReceiveMessageLength: number
  readonly maxSendMessageLength: number
  readonly budget?: RequestBudget | undefined
}

const kCall = Symbol("grpcCall")
const kPeer = Symbol("grpcPeer")

type CallStream = http2.ServerHttp2Stream & { [kCall]?: ServerCall }
type PeerSession = http2.Http2Session & { [kPeer]?: string }

/** Response options; like grpc-go, and unlike Node's default, no `date` header (Node reads `sendDate`, its types omit it). */
const waitForTrailers = { waitForTrailers: true, sendDate: false } as http2.ServerStreamResponseOptions
const endStream = { endStream: true, sendDate: false } as http2.ServerStreamResponseOptions

/** Headers grpc-js keeps out of a call's metadata. */
const reservedHeaders = [
  "grpc-timeout",
  "grpc-encoding",
  "grpc-accept-encoding",
  "accept-encoding",
  "te",
  "content-type"
]

/** The longest delay `setTimeout` takes (about 24.8 days); a later deadline arms no timer. */
const maxTimerMillis = 2 ** 31 - 1

/** The peer as grpc-js prints it, `address:port` with no brackets around IPv6 addresses; read once per connection. */
const peerOf = (session: PeerSession | undefined): string => {
  if (session === undefined) return "unknown"
  let peer = session[kPeer]
  if (peer === undefined) {
    try {
      const socket = session.socket
      const address = socket?.remoteAddress
      peer = address === undefined ? "unknown" : socket.remotePort ? `${address}:${socket.remotePort}` : address
    } catch {
      return "unknown"
    }
    session[kPeer] = peer
  }
  return peer
}

function onData(this: CallStream, chunk: Buffer): void {
  this[kCall]!.receive(chunk)
}

function onEnd(this: CallStream): void {
  this[kCall]!.requestEnded()
}

function onClose(this: CallStream): void {
  this[kCall]!.streamClosed()
}

function onWantTrailers(this: CallStream): void {
  this[kCall]!.sendTrailers()
}

function onDrain(this: CallStream): void {
  const call = this[kCall] as StreamingCall
  call.drained()
}

/** Node submits the trailers in an immediate queued by `sendTrailers`, which runs first: the reset follows them. */
function onStatusTrailers(this: CallStream): void {
  setImmediate(stopUpload, this)
}

/** Resets a stream whose status is out while the client still sends (RST_STREAM NO_ERROR, as grpc-go does). */
const stopUpload = (stream: http2.ServerHttp2Stream): void => {
  if (!stream.readableEnded) stream.close(http2.constants.NGHTTP2_NO_ERROR)
}

function ignore(): void {}

/** What `decode` gives when the request could not be deserialized. */
const undecodable: unique symbol = Symbol("undecodable")

function onDeadline(call: ServerCall): void {
  call.expire()
}

/** Calls opened in this turn of the event loop; the ones still open at its end are watched from then on. */
let opened: Array<ServerCall> = []
let sweepScheduled = false

const sweep = (): void => {
  const calls = opened
  opened = []
  sweepScheduled = false
  for (const call of calls) call.outlived()
}

const watchLater = (call: ServerCall): void => {
  opened.push(call)
  if (!sweepScheduled) {
    sweepScheduled = true
    setImmediate(sweep)
  }
}

/**
 * What every call kind shares: the stream plumbing, the request's messages,
 * the deadline, the response headers and the final status.
 *
 * @category models
 * @since 0.1.0
 */
export abstract class ServerCall extends CallEvents implements MessageSink {
  /** True once the client cancelled the call, or its deadline passed. */
  cancelled = false
  protected readonly stream: CallStream
  protected readonly method: Method
  protected readonly limits: CallLimits
  /** The connection the call came on: told while the call stays open. */
  protected readonly connection: Connection
  private readonly headers: http2.IncomingHttpHeaders
  private readonly peer: string
  private readonly deadline: number
  private timer: NodeJS.Timeout | undefined
  private reader: MessageReader | undefined
  private metadataOfRequest: grpc.Metadata | undefined
  /** The request's single message, for unary and server-streaming calls. */
  protected payload: Buffer | undefined
  /** The payload is a buffer of its own, paid for from the budget (not a view of a received chunk). */
  private payloadPaid = false
  protected headersSent = false
  /** The status is sent, or the call was cancelled: nothing more goes out. */
  protected ended = false
  /** The status is sent (by the handler, the transport or the deadline). */
  protected statusSent = false
  private trailersToSend: http2.OutgoingHttpHeaders | undefined
  /** Bytes of the request budget this call holds. */
  protected reserved = 0
  /** The call counts among its connection's open calls. */
  private countedOpen = false
  /** The complete request went to its handler. */
  private handed = false

  constructor(
    stream: http2.ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
    method: Method,
    limits: CallLimits,
    timeoutMillis: number | undefined
  ) {
    super()
    this.stream = stream as CallStream
    this.headers = headers
    this.method = method
    this.limits = limits
    this.peer = peerOf(stream.session)
    this.connection = connectionOf(stream.session) ?? detachedConnection()
    this.deadline = timeoutMillis === undefined ? Number.POSITIVE_INFINITY : Date.now() + timeoutMillis
    this.stream[kCall] = this
    stream.on("error", ignore)
    stream.on("data", onData)
    stream.on("end", onEnd)
    watchLater(this)
  }

  /** The request's metadata, without the headers gRPC itself uses. */
  get metadata(): grpc.Metadata {
    if (this.metadataOfRequest === undefined) {
      const metadata = grpc.Metadata.fromHttp2Headers(this.headers)
      for (const name of reservedHeaders) metadata.remove(name)
      this.metadataOfRequest = metadata
    }
    return this.metadataOfRequest
  }

  /** The client's address as grpc-js gives it: `address:port`. */
  getPeer(): string {
    return this.peer
  }

  /** The deadline in milliseconds since the epoch, `Infinity` without one. */
  getDeadline(): grpc.Deadline {
    return this.deadline
  }

  /** The method's path. */
  getPath(): string {
    return this.method.path
  }

  /** The request's `:authority`. */
  getHost(): string {
    return this.headers[":authority"] ?? ""
  }

  /** Sends the response headers now, with `metadata`; later calls do nothing. */
  sendMetadata(metadata?: grpc.Metadata): void {
    if (this.ended || this.headersSent || this.isGone()) return
    this.respond(metadata)
  }

  /**
   * Called by the reader for each whole message, `gathered` when the reader
   * gathered it into a buffer `reserve` paid for; false once the call is over.
   */
  onMessage(flag: number, payload: Buffer, gathered = false): boolean {
    if (this.ended) return false
    if (flag !== 0) {
      this.sendStatus(this.compressedStatus(flag))
      return false
    }
    this.message(payload, gathered)
    return !this.ended
  }

  /** A chunk of the request's DATA frames. */
  receive(chunk: Buffer): void {
    if (this.ended) return
    if (this.reader === undefined && chunk.length >= 5 && chunk.readUInt32BE(1) === chunk.length - 5) {
      const max = this.limits.maxReceiveMessageLength
      if (max === -1 || chunk.length - 5 <= max) {
        this.onMessage(chunk[0]!, chunk.subarray(5), false)
        return
      }
    }
    this.reader ??= new MessageReader(this.limits.maxReceiveMessageLength)
    const failure = this.reader.read(chunk, this)
    if (failure === undefined) return
    this.sendStatus(
      failure._tag === "TooLong"
        ? messageTooLarge(failure.length, this.limits.maxReceiveMessageLength)
        : overBudget(failure.length)
    )
  }

  /** Called by the reader before it gathers a message: holds its bytes in the server's budget. */
  reserve(bytes: number): boolean {
    if (this.ended) return false
    const budget = this.limits.budget
    if (budget === undefined) return true
    if (!budget.tryReserve(bytes)) return false
    this.reserved += bytes
    return true
  }

  /** Gives `bytes` of the budget this call holds back (all of them by default). */
  protected giveBack(bytes: number = this.reserved): void {
    if (bytes === 0) return
    this.reserved -= bytes
    this.limits.budget?.release(bytes)
  }

  /** The client half-closed. */
  requestEnded(): void {
    if (this.ended) return
    if (this.reader !== undefined && !this.reader.idle) {
      this.sendStatus(truncatedMessage)
      return
    }
    this.halfClosed()
  }

  /** The call is still open after the turn of the event loop that opened it: watch for a cancel and the deadline. */
  outlived(): void {
    if (this.ended) return
    if (this.isGone()) {
      this.streamClosed()
      return
    }
    this.stream.on("close", onClose)
    this.connection.openCalls++
    this.countedOpen = true
    this.holdPayload()
    if (this.ended || this.deadline === Number.POSITIVE_INFINITY) return
    const left = this.deadline - Date.now()
    if (left <= 0) this.expire()
    else if (left <= maxTimerMillis) this.timer = setTimeout(onDeadline, left, this)
  }

  /** The HTTP/2 stream is closed: a call not ended by then was cancelled. */
  streamClosed(): void {
    this.clearTimer()
    if (this.countedOpen) {
      this.countedOpen = false
      this.connection.openCalls--
      this.connection.lastActiveAt = performance.now()
    }
    if (!this.ended) this.cancel()
  }

  /** The deadline passed: DEADLINE_EXCEEDED, and the handler is told the call is cancelled. */
  expire(): void {
    this.timer = undefined
    if (this.ended) return
    if (!this.isGone()) this.deliver(deadlineExceeded)
    this.cancel()
  }

  /** Node asks for the trailers after the last DATA frame. */
  sendTrailers(): void {
    this.stream.sendTrailers(this.trailersToSend ?? trailers(ok))
  }

  /** One request message arrived: kept as the single request unless the kind reads a stream. */
  protected message(payload: Buffer, gathered: boolean): void {
    if (this.payload !== undefined) {
      this.sendStatus(secondRequestMessage(this.method.path))
      return
    }
    this.payload = payload
    this.payloadPaid = gathered
    if (this.countedOpen) this.holdPayload()
  }

  /**
   * The request's message waits past the turn that brought it (the client
   * has not ended its request): it is copied out of the received chunk,
   * which it would otherwise keep in memory, and paid for from the budget;
   * UNAVAILABLE when the budget cannot cover it. A request the client has
   * ended is already its handler's, which may answer in a later turn (the
   * state on another thread or in Redis): it holds nothing from the budget.
   */
  private holdPayload(): void {
    const payload = this.payload
    if (payload === undefined || this.payloadPaid || this.handed) return
    if (!this.reserve(payload.length)) {
      this.sendStatus(overBudget(payload.length))
      return
    }
    this.payload = Buffer.from(payload)
    this.payloadPaid = true
  }

  /** The request is complete: unary and server-streaming calls run their handler on their single message. */
  protected halfClosed(): void {
    const payload = this.payload
    if (payload === undefined) {
      this.sendStatus(noRequestMessage(this.method.path))
      return
    }
    this.handed = true
    // a handler may answer in a later turn, holding the request: it must not hold the whole chunk it came in
    const request = this.decode(
      this.payloadPaid || payload.length * 4 >= payload.buffer.byteLength ? payload : Buffer.from(payload)
    )
    if (request !== undecodable) this.run(request)
  }

  /** Runs the handler on the request. */
  protected abstract run(request: unknown): void

  /** Called once the call is over (status sent or cancelled). */
  protected abstract finished(): void

  /** The deserialized request, or `undecodable` when deserializing failed (the call is then ended). */
  protected decode(payload: Buffer): unknown {
    try {
      return this.method.deserialize(payload)
    } catch {
      this.sendStatus(deserializationFailed)
      return undecodable
    }
  }

  /** Calls the handler, ending the call with UNKNOWN if it throws. */
  protected invoke(callback?: (error: unknown, value?: unknown, trailer?: grpc.Metadata) => void): void {
    try {
      this.method.handler(this, callback)
    } catch {
      this.sendStatus(handlerThrew)
    }
  }

  /** Serializes and frames a response message; ends the call and gives `undefined` when that fails. */
  protected encode(value: unknown): Buffer | undefined {
    let bytes: Uint8Array
    try {
      bytes = this.method.serialize(value)
    } catch {
      this.sendStatus(serializationFailed)
      return undefined
    }
    const max = this.limits.maxSendMessageLength
    if (max !== -1 && bytes.length > max) {
      this.sendStatus(responseTooLarge(bytes.length, max))
      return undefined
    }
    return frame(bytes)
  }

  /** Writes one framed message after the response headers; false when the stream pushes back. */
  protected writeFrame(framed: Buffer): boolean {
    if (!this.headersSent) this.respond(undefined)
    return this.stream.write(framed)
  }

  /** Sends the last message and then the OK trailers with `trailer`. */
  protected endWith(framed: Buffer, trailer: grpc.Metadata | undefined): void {
    this.ended = true
    this.statusSent = true
    this.clearTimer()
    this.giveBack()
    if (trailer !== undefined) this.trailersToSend = trailers({ ...ok, metadata: trailer })
    if (!this.headersSent) this.respond(undefined)
    this.stream.end(framed)
    this.finished()
  }

  /** Ends the call with `status`, or as cancelled when the stream is already gone. */
  protected sendStatus(status: CallStatus): void {
    if (this.ended) return
    if (this.isGone()) {
      this.cancel()
      return
    }
    this.deliver(status)
    this.finished()
  }

  /**
   * Writes the status: as trailers after the headers, or as a Trailers-Only
   * response; then, when the client is still sending, resets the stream.
   */
  private deliver(status: CallStatus): void {
    this.ended = true
    this.statusSent = true
    this.clearTimer()
    this.giveBack()
    const uploading = !this.stream.readableEnded
    if (this.headersSent) {
      this.trailersToSend = trailers(status)
      if (uploading) this.stream.on("wantTrailers", onStatusTrailers)
      this.stream.end()
    } else {
      this.stream.respond(trailersOnly(status), endStream)
      if (uploading) stopUpload(this.stream)
    }
  }

  /** True when the stream is already closed, though its "close" event may still be on its way. */
  protected isGone(): boolean {
    return this.stream.destroyed || this.stream.closed
  }

  private respond(metadata: grpc.Metadata | undefined): void {
    this.headersSent = true
    this.stream.respond(
      metadata === undefined ? responseHeaders : withMetadata(responseHeaders, metadata),
      waitForTrailers
    )
    this.stream.on("wantTrailers", onWantTrailers)
  }

  /** The call is over without (or after) a status: the handler is told it is cancelled. */
  private cancel(): void {
    this.ended = true
    this.cancelled = true
    this.clearTimer()
    this.giveBack()
    this.emit("cancelled", "cancelled")
    this.finished()
  }

  private clearTimer(): void {
    if (this.timer !== undefined) {
      clearTimeout(this.timer)
      this.timer = undefined
    }
  }

  private compressedStatus(flag: number): CallStatus {
    if (flag !== 1) return unexpectedPayloadFormat(flag)
    const encoding = this.headers["grpc-encoding"]
    if (encoding === undefined || encoding === "identity") return compressedWithoutEncoding
    const metadata = new grpc.Metadata()
    metadata.set("grpc-accept-encoding", "identity")
    return { ...unsupportedEncoding(String(encoding)), metadata }
  }
}

/**
 * A unary call: the handler gets the call and a callback taking
 * `(error, value, trailer)`, where an error carries `code`, `details` and
 * `metadata` as grpc-js's do.
 *
 * @category models
 * @since 0.1.0
 */
export class UnaryCall extends ServerCall {
  /** The deserialized request. */
  request: unknown

  protected run(request: unknown): void {
    this.request = request
    this.invoke((error, value, trailer) => this.reply(error, value, trailer))
  }

  protected finished(): void {}

  private reply(error: unknown, value: unknown, trailer: grpc.Metadata | undefined): void {
    if (this.ended) return
    if (error) {
      this.sendStatus(fromHandlerError(error, trailer))
      return
    }
    if (this.isGone()) {
      this.streamClosed()
      return
    }
    const framed = this.encode(value)
    if (framed !== undefined) this.endWith(framed, trailer)
  }
}

/**
 * What server-streaming and bidirectional calls share: writing messages
 * with backpressure, and ending, with OK (`end`) or with a status
 * (`emit("error", status)`).
 *
 * @category models
 * @since 0.1.0
 */
export abstract class StreamingCall extends ServerCall {
  private closeEmitted = false
  /** The handler was told to wait: a write returned false, and "drain" has not followed yet. */
  private awaitingDrain = false
  private watchingDrain = false

  /** True once the call is over: its status sent, or cancelled. */
  get destroyed(): boolean {
    return this.ended
  }

  /** True once the call's status is sent. */
  get writableEnded(): boolean {
    return this.statusSent
  }

  /** Sends one message; false when the stream pushes back ("drain" follows) or the call is over. */
  write(value: unknown): boolean {
    if (this.ended || this.isGone()) return false
    const framed = this.encode(value)
    if (framed === undefined) return false
    if (this.writeFrame(framed)) return true
    this.awaitingDrain = true
    this.watchDrain()
    return false
  }

  /** The stream can take writes again: a handler that was pushed back hears "drain". */
  drained(): void {
    if (!this.awaitingDrain) return
    this.awaitingDrain = false
    this.tell("drain")
  }

  /** Ends the call with OK and `metadata` as trailers. */
  end(metadata?: grpc.Metadata): this {
    this.sendStatus(metadata === undefined ? ok : { ...ok, metadata })
    return this
  }

  /** "error" ends the call with the status the error stands for, as grpc-js's streams do; other events are passed on. */
  override emit(event: string | symbol, ...args: Array<unknown>): boolean {
    const listened = super.emit(event, ...args)
    if (event === "error") this.sendStatus(fromHandlerError(args[0]))
    return listened
  }

  protected finished(): void {
    if (this.closeEmitted) return
    this.closeEmitted = true
    this.emit("close")
  }

  /** Calls `drained` on each "drain" of the stream from now on. */
  protected watchDrain(): void {
    if (this.watchingDrain) return
    this.watchingDrain = true
    this.stream.on("drain", onDrain)
  }

  /**
   * Emits `event` from the stream's own events to the handler's listeners;
   * one that throws ends the call with UNKNOWN, as a throwing handler does,
   * instead of escaping into Node's stream.
   */
  protected tell(event: string, value?: unknown): void {
    try {
      if (value === undefined) this.emit(event)
      else this.emit(event, value)
    } catch {
      this.sendStatus(handlerThrew)
    }
  }
}

/**
 * A server-streaming call: the handler runs once the single request
 * message has arrived, and writes the responses.
 *
 * @category models
 * @since 0.1.0
 */
export class ServerStreamCall extends StreamingCall {
  /** The deserialized request. */
  request: unknown

  /** The stream may last: its request's bytes are not kept (the decoded request holds what it needs). */
  protected run(request: unknown): void {
    this.request = request
    this.payload = undefined
    this.giveBack()
    this.invoke()
  }
}

/**
 * A bidirectional call: the handler runs when the call opens; each request
 * message is a "data" event and the client's half-close is "end". While the
 * responses cannot go out (the client does not read them), request messages
 * are held and the stream paused, so HTTP/2 flow control stops the client
 * instead of the server buffering every response; "drain" lets them in
 * again.
 *
 * @category models
 * @since 0.1.0
 */
export class BidiCall extends StreamingCall {
  /** Request messages not yet delivered, from `heldFrom` on; the stream is paused while there are any. */
  private held: Array<Buffer> | undefined
  private heldFrom = 0
  /** The client half-closed while messages were held: "end" follows them. */
  private endHeld = false
  /** Messages gathered into buffers paid for from the budget, given back once delivered. */
  private paid: WeakSet<Buffer> | undefined

  /** Starts the handler. */
  open(): void {
    this.invoke()
  }

  /** The stream can take writes again: the handler hears "drain", then gets the held messages while it still can. */
  override drained(): void {
    super.drained()
    const held = this.held
    if (held === undefined) return
    while (this.heldFrom < held.length && !this.ended && !this.stream.writableNeedDrain) {
      this.deliverRequest(held[this.heldFrom++]!)
    }
    if (this.ended || this.heldFrom < held.length) return
    this.release()
    if (this.endHeld) this.tell("end")
  }

  protected override message(payload: Buffer, gathered: boolean): void {
    if (gathered) {
      this.paid ??= new WeakSet()
      this.paid.add(payload)
    }
    if (this.held !== undefined) this.held.push(payload)
    else if (this.stream.writableNeedDrain) this.hold(payload)
    else this.deliverRequest(payload)
  }

  protected override halfClosed(): void {
    if (this.held !== undefined) this.endHeld = true
    else this.tell("end")
  }

  /** Drops the held messages: the stream then reads the rest of the request (ignored) to its end and is freed. */
  protected override finished(): void {
    this.release()
    super.finished()
  }

  protected run(): void {}

  private hold(payload: Buffer): void {
    this.held = [payload]
    this.stream.pause()
    this.watchDrain()
  }

  private release(): void {
    if (this.held === undefined) return
    this.held = undefined
    this.heldFrom = 0
    this.stream.resume()
  }

  private deliverRequest(payload: Buffer): void {
    if (this.paid?.delete(payload) === true) this.giveBack(Math.min(payload.length, this.reserved))
    const request = this.decode(payload)
    if (request !== undecodable) this.tell("data", request)
  }
}
