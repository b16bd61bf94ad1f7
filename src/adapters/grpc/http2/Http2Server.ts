/**
 * A gRPC server built directly on `node:http2`: the part of `grpc.Server`
 * that our services use (`addService` and `removeService` with grpc-js
 * service definitions and handlers; unary, server-streaming and
 * bidirectional methods), listening on one address in plaintext (h2c with
 * prior knowledge) or TLS (ALPN h2) with a key pair that can be swapped for
 * new connections, with a graceful stop (GOAWAY, open calls finish) and a
 * forced one.
 *
 * What one client can make it hold is bounded: streams per connection
 * (`maxConcurrentStreams`), session memory, the bytes of large request
 * messages all clients together (`RequestBudget`), connections per address
 * and in total, and the time a connection may take to handshake or stay
 * idle; clients that ping too often are sent away (`ConnectionGuard`).
 * Accepted connections get TCP keepalive after 15 s idle, as Go's listeners
 * give the original server, so dead peers are found.
 *
 * Requests that are not gRPC go to the `fallback` listener when one is given
 * (HTTP/1.1, told from h2c by its first bytes or chosen by ALPN, and HTTP/2
 * requests without a gRPC content type), as the original's port serves its
 * landing page; without one they get HTTP 415 (wrong content type) with a
 * gRPC status, as grpc-go answers, and HTTP/1.1 is not spoken. A gRPC
 * request that is not a POST gets 405.
 *
 * @since 0.1.0
 */
import type * as http from "node:http"
import * as http2 from "node:http2"
import * as net from "node:net"
import type * as tls from "node:tls"
import type * as grpc from "@grpc/grpc-js"
import type { KeyPair, KeyPairSource } from "../tls.ts"
import { acceptedSocketOf, connectionOf } from "./Connection.ts"
import type { ConnectionLimits, GuardCounts } from "./ConnectionGuard.ts"
import { ConnectionGuard, defaultConnectionLimits } from "./ConnectionGuard.ts"
import { parseTimeout } from "./grpcTimeout.ts"
import { Http1Connections } from "./Http1Connections.ts"
import { sniff } from "./protocolSniffer.ts"
import { defaultRequestBudgetBytes, RequestBudget, type SharedRequestBudget } from "./RequestBudget.ts"
import { trailersOnly } from "./responseHeaders.ts"
import type { CallLimits, Method } from "./ServerCall.ts"
import { BidiCall, ServerStreamCall, UnaryCall } from "./ServerCall.ts"
import type { CallStatus } from "./statuses.ts"
import {
  deadlineExceeded,
  invalidContentType,
  invalidMethod,
  malformedTimeout,
  unimplementedMethod
} from "./statuses.ts"

/**
 * How the server reads and answers.
 *
 * @category models
 * @since 0.1.0
 */
export interface Http2ServerOptions {
  /** Longest request message in bytes (default 4 MiB, grpc-go's and grpc-js's); -1 for no limit. */
  readonly maxReceiveMessageLength?: number | undefined
  /** Longest response message in bytes (default -1, no limit). */
  readonly maxSendMessageLength?: number | undefined
  /**
   * Streams a connection may have open at once, advertised in SETTINGS
   * (default 100); a client that opens more has them refused
   * (RST_STREAM REFUSED_STREAM) and retries them.
   */
  readonly maxConcurrentStreams?: number | undefined
  /**
   * Memory one session may hold in MiB, as Node counts it (streams, header
   * tables, data queued to send; default 32); past it new streams are
   * refused (RST_STREAM ENHANCE_YOUR_CALM) until it drops.
   */
  readonly maxSessionMemoryMiB?: number | undefined
  /**
   * Bytes of unfinished request messages the server holds at once, all clients
   * together (default `defaultRequestBudgetBytes()`); a message that does
   * not fit ends its call with UNAVAILABLE. See `RequestBudget`.
   */
  readonly requestBudgetBytes?: number | undefined
  /**
   * Take the request budget from one shared with the servers of other
   * threads on the same port, as server `holder`, instead of a budget of its
   * own (`requestBudgetBytes` is then ignored).
   */
  readonly sharedRequestBudget?: { readonly budget: SharedRequestBudget; readonly holder: number } | undefined
  /** Caps and deadlines of connections (each defaults to `defaultConnectionLimits`'). */
  readonly connections?: Partial<ConnectionLimits> | undefined
  /** Serve TLS with this key pair, following its changes (default plaintext h2c). */
  readonly keyPair?: KeyPairSource | undefined
  /** Answers requests that are not gRPC (HTTP/1.1, and HTTP/2 without a gRPC content type); see the module. */
  readonly fallback?: FallbackListener | undefined
  /**
   * Share the port with other processes that ask the same (SO_REUSEPORT,
   * Linux): the kernel spreads new connections over them (default false).
   */
  readonly reusePort?: boolean | undefined
}

/**
 * A Node request listener for the requests that are not gRPC, over HTTP/1.1
 * or HTTP/2 (through Node's compatibility objects).
 *
 * @category models
 * @since 0.1.0
 */
export type FallbackListener = (
  request: http.IncomingMessage | http2.Http2ServerRequest,
  response: http.ServerResponse | http2.Http2ServerResponse
) => void

/**
 * The default streams per connection: 100, the least RFC 9113 §6.5.2
 * recommends advertising. A Talos node uses two at most (a Watch and one
 * call); Go's HTTP/2 server allows 250, which would let one connection hold
 * 250 unfinished 4 MiB messages.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultMaxConcurrentStreams = 100

/**
 * The default session memory: 32 MiB, room for the largest Watch snapshot
 * (about 4.6 MB) several times over.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultMaxSessionMemoryMiB = 32

/**
 * The default longest request message: 4 MiB.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultMaxReceiveMessageLength = 4 * 1024 * 1024

/** Idle time before TCP keepalive probes start on an accepted connection: Go's listener default. */
const keepAliveDelayMillis = 15_000

const endStream = { endStream: true, sendDate: false } as http2.ServerStreamResponseOptions

function ignore(): void {}

/** A content type gRPC accepts: `application/grpc`, alone or followed by `+subtype` or `;parameters`. */
const isGrpcContentType = (value: string | undefined): boolean => {
  if (value === "application/grpc" || value === "application/grpc+proto") return true
  if (value === undefined) return false
  const lower = value.toLowerCase()
  return lower.startsWith("application/grpc") && (lower.length === 16 || lower[16] === "+" || lower[16] === ";")
}

/**
 * Answers a stream with a status alone, without reading its request: Node
 * then closes a stream nobody reads (RST_STREAM NO_ERROR when the client is
 * still sending) and drops what it still receives.
 */
const reject = (stream: http2.ServerHttp2Stream, status: CallStatus, httpStatus = 200): void => {
  stream.on("error", ignore)
  stream.respond(trailersOnly(status, httpStatus), endStream)
}

/**
 * `host:port` or `[ipv6]:port` as the host and port to listen on; `undefined`
 * when it is neither.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseAddress = (address: string): { readonly host: string; readonly port: number } | undefined => {
  const colon = address.lastIndexOf(":")
  if (colon === -1) return undefined
  let host = address.slice(0, colon)
  const portText = address.slice(colon + 1)
  const port = Number(portText)
  if (portText === "" || !Number.isInteger(port) || port < 0 || port > 65535) return undefined
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1)
  return { host, port }
}

const secureContextOf = (pair: KeyPair): tls.SecureContextOptions => ({ cert: pair.certificate, key: pair.privateKey })

/** The most bytes of a request body read (and dropped) before a non-gRPC request goes to the fallback. */
const maxFallbackBody = 64 * 1024

/**
 * Streams whose content type is not gRPC's, for the fallback listener
 * through Node's compatibility objects. The pages served there take no
 * request body: one is read to its end and dropped first (one over 64 KiB
 * gets 413), because a response sent while the client still sends lets Node
 * drop its stream before nghttp2 does, and a client that keeps the
 * connection's streams at their limit then has its connection ended for
 * opening one too many.
 */
const toFallback = (
  fallback: FallbackListener,
  stream: http2.ServerHttp2Stream,
  headers: http2.IncomingHttpHeaders,
  rawHeaders: Array<string>
): void => {
  stream.on("error", ignore)
  const serve = () =>
    fallback(new http2.Http2ServerRequest(stream, headers, {}, rawHeaders), new http2.Http2ServerResponse(stream))
  if (stream.readableEnded || stream.endAfterHeaders) {
    serve()
    return
  }
  let received = 0
  const onData = (chunk: Buffer) => {
    received += chunk.length
    if (received <= maxFallbackBody) return
    stream.off("data", onData)
    stream.off("end", onEnd)
    if (!stream.headersSent) stream.respond({ ":status": 413 }, endStream)
    stream.close(http2.constants.NGHTTP2_NO_ERROR)
  }
  const onEnd = () => {
    stream.off("data", onData)
    serve()
  }
  stream.on("data", onData)
  stream.once("end", onEnd)
}

/**
 * A gRPC server on `node:http2`; see the module description.
 *
 * @category constructors
 * @since 0.1.0
 */
export class Http2Server {
  private readonly methods = new Map<string, Method>()
  private readonly limits: CallLimits
  private readonly options: Http2ServerOptions
  private readonly guard: ConnectionGuard
  private readonly budget: RequestBudget
  private listening: net.Server | undefined
  private http1: Http1Connections | undefined
  private unsubscribe: (() => void) | undefined
  /** A stop began: connections whose session starts now (a TLS handshake that ends late) are closed at once. */
  private stopping = false

  constructor(options: Http2ServerOptions = {}) {
    this.options = options
    this.budget = new RequestBudget(
      options.requestBudgetBytes ?? defaultRequestBudgetBytes(),
      options.sharedRequestBudget
    )
    this.guard = new ConnectionGuard({ ...defaultConnectionLimits, ...definedOnly(options.connections ?? {}) })
    this.limits = {
      maxReceiveMessageLength: options.maxReceiveMessageLength ?? defaultMaxReceiveMessageLength,
      maxSendMessageLength: options.maxSendMessageLength ?? -1,
      budget: this.budget
    }
  }

  /**
   * Sends `share` (0 to 1) of the sessions with no open call away with a
   * graceful GOAWAY, so that their clients reconnect, possibly to another
   * server on the same port; returns how many.
   */
  shed(share: number): number {
    return this.guard.shed(share)
  }

  /** What the server refused or ended to stay within its limits, and what it holds now. */
  get stats(): Http2ServerStats {
    return {
      ...this.guard.counts,
      connections: this.guard.open,
      sessions: this.guard.sessions.size,
      budgetBytes: this.budget.capacity,
      reservedBytes: this.budget.reserved,
      overBudget: this.budget.refused
    }
  }

  /**
   * Serves the methods of `service` with the handlers of `implementation`
   * (looked up by key, then by `originalName`); methods without a handler
   * answer UNIMPLEMENTED. Throws for a path already served and for
   * client-streaming methods, which this server does not offer.
   */
  addService(service: grpc.ServiceDefinition, implementation: grpc.UntypedServiceImplementation): void {
    for (const [name, definition] of Object.entries(service)) {
      const handler =
        implementation[name] ??
        (definition.originalName === undefined ? undefined : implementation[definition.originalName])
      if (handler === undefined) continue
      if (definition.requestStream && !definition.responseStream) {
        throw new Error(`Client-streaming method ${definition.path} is not supported by the http2 transport.`)
      }
      if (this.methods.has(definition.path)) throw new Error(`Method handler for ${definition.path} already provided.`)
      this.methods.set(definition.path, {
        path: definition.path,
        kind: definition.requestStream ? "bidi" : definition.responseStream ? "serverStream" : "unary",
        handler: handler.bind(implementation),
        serialize: definition.responseSerialize,
        deserialize: definition.requestDeserialize
      })
    }
  }

  /** Stops serving the methods of `service`; calls already running go on. */
  removeService(service: grpc.ServiceDefinition): void {
    for (const definition of Object.values(service)) this.methods.delete(definition.path)
  }

  /**
   * Listens on `address` (`host:port`, `[ipv6]:port`; an empty host is every
   * interface, port 0 a free port) and calls back with the port, or with the
   * error. A server listens on one address.
   */
  bindAsync(address: string, callback: (error: Error | null, port: number) => void): void {
    const parsed = parseAddress(address)
    if (parsed === undefined || this.listening !== undefined) {
      const reason = parsed === undefined ? `invalid address ${JSON.stringify(address)}` : "the server is already bound"
      process.nextTick(callback, new Error(reason), -1)
      return
    }
    const listener = this.create()
    this.listening = listener
    const onError = (error: Error) => {
      this.listening = undefined
      this.unsubscribe?.()
      this.guard.stop()
      listener.close()
      callback(error, -1)
    }
    listener.once("error", onError)
    const host = parsed.host === "" ? undefined : parsed.host
    listener.listen({ host, port: parsed.port, reusePort: this.options.reusePort === true }, () => {
      listener.off("error", onError)
      const bound = listener.address()
      callback(null, typeof bound === "object" && bound !== null ? bound.port : parsed.port)
    })
  }

  /**
   * Stops gracefully: no new connections, a GOAWAY on each open one, and the
   * callback once the calls already running have finished and every
   * connection is closed.
   */
  tryShutdown(callback: (error?: Error) => void): void {
    const listener = this.stop()
    if (listener === undefined || !listener.listening) {
      process.nextTick(callback)
      return
    }
    listener.close(() => callback())
    this.guard.closeHandshaking()
    for (const session of this.guard.sessions) session.close()
    this.http1?.close()
  }

  /** Stops at once: every connection is closed, its calls cancelled. */
  forceShutdown(): void {
    const listener = this.stop()
    if (listener?.listening) listener.close()
    this.guard.closeHandshaking()
    for (const session of this.guard.sessions) session.destroy(undefined, http2.constants.NGHTTP2_CANCEL)
    this.http1?.destroy()
  }

  private stop(): net.Server | undefined {
    this.stopping = true
    this.unsubscribe?.()
    this.unsubscribe = undefined
    this.guard.stop()
    return this.listening
  }

  /**
   * Hands a connection that speaks HTTP/1.1 to the fallback: the HTTP/2
   * handshake deadline ends, and the HTTP/1.1 connections' own deadline (the
   * same length, per request) takes over.
   */
  private readonly toHttp1 = (socket: net.Socket): void => {
    const fallback = this.options.fallback
    if (fallback === undefined || this.stopping) {
      socket.destroy()
      return
    }
    this.guard.handedOver(socket)
    this.http1 ??= new Http1Connections(fallback, this.guard.limits.handshakeTimeoutMillis)
    this.http1.adopt(socket)
  }

  /** The server that listens (a front that sniffs h2c from HTTP/1.1, or the TLS server) with HTTP/2 behind it. */
  private create(): net.Server {
    const options: http2.ServerOptions & net.ServerOpts = {
      maxSessionMemory: this.options.maxSessionMemoryMiB ?? defaultMaxSessionMemoryMiB,
      maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
      keepAlive: true,
      keepAliveInitialDelay: keepAliveDelayMillis,
      settings: { maxConcurrentStreams: this.options.maxConcurrentStreams ?? defaultMaxConcurrentStreams }
    }
    const keyPair = this.options.keyPair
    const fallback = this.options.fallback
    let server: http2.Http2Server | http2.Http2SecureServer
    let listener: net.Server
    if (keyPair === undefined) {
      const plain = http2.createServer(options)
      listener = net.createServer({ keepAlive: true, keepAliveInitialDelay: keepAliveDelayMillis })
      const toHttp2 = (socket: net.Socket) => plain.emit("connection", socket)
      listener.on("connection", (socket: net.Socket) => {
        this.guard.admit(socket)?.whenAdmitted(() => {
          if (socket.destroyed) return
          if (fallback === undefined) toHttp2(socket)
          else sniff(socket, toHttp2, this.toHttp1)
        })
      })
      server = plain
    } else {
      const handshakeTimeout = this.guard.limits.handshakeTimeoutMillis
      const secure = http2.createSecureServer({
        ...options,
        ...secureContextOf(keyPair.current),
        ...(handshakeTimeout > 0 ? { handshakeTimeout } : {}),
        ...(fallback === undefined ? {} : { ALPNCallback: chooseProtocol })
      })
      secure.on("connection", (socket: net.Socket) => this.guard.admit(socket))
      secure.on("secureConnection", (socket: tls.TLSSocket) => socket.on("error", ignore))
      secure.on("unknownProtocol", (socket: tls.TLSSocket) => {
        const connection = connectionOf(acceptedSocketOf(socket))
        if (connection === undefined) this.toHttp1(socket)
        else connection.whenAdmitted(() => socket.destroyed || this.toHttp1(socket))
      })
      this.unsubscribe = keyPair.subscribe((pair) => secure.setSecureContext(secureContextOf(pair)))
      server = secure
      listener = secure
    }
    server.setTimeout(0)
    server.on("session", this.onSession)
    server.on("stream", this.onStream)
    return listener
  }

  private readonly onSession = (session: http2.ServerHttp2Session): void => {
    if (this.stopping) {
      session.close()
      return
    }
    this.guard.attach(session)
  }

  private readonly onStream = (
    stream: http2.ServerHttp2Stream,
    headers: http2.IncomingHttpHeaders,
    _flags: number,
    rawHeaders: Array<string>
  ): void => {
    const connection = connectionOf(stream.session)
    if (connection?.awaitingAdmission) {
      // a TLS connection's handshake ran before the answer; its calls wait for it
      connection.whenAdmitted(() => this.onStream(stream, headers, _flags, rawHeaders))
      return
    }
    if (connection !== undefined) connection.lastActiveAt = performance.now()
    const contentType = headers["content-type"]
    const verb = headers[":method"]
    const fallback = this.options.fallback
    if (!isGrpcContentType(contentType)) {
      if (fallback === undefined) reject(stream, invalidContentType(contentType), 415)
      else toFallback(fallback, stream, headers, rawHeaders)
    } else if (verb !== "POST") reject(stream, invalidMethod(verb), 405)
    else this.dispatch(stream, headers)
  }

  /** Starts the call of a gRPC request, or answers it with the status that stops it. */
  private dispatch(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void {
    const timeoutHeader = headers["grpc-timeout"]
    const timeout = timeoutHeader === undefined ? undefined : parseTimeout(String(timeoutHeader))
    const path = headers[":path"] ?? ""
    const method = this.methods.get(path)
    if (timeoutHeader !== undefined && timeout === undefined) reject(stream, malformedTimeout(String(timeoutHeader)))
    else if (timeout !== undefined && timeout <= 0) reject(stream, deadlineExceeded)
    else if (method === undefined) reject(stream, unimplementedMethod(path))
    else if (method.kind === "unary") new UnaryCall(stream, headers, method, this.limits, timeout)
    else if (method.kind === "serverStream") new ServerStreamCall(stream, headers, method, this.limits, timeout)
    else new BidiCall(stream, headers, method, this.limits, timeout).open()
  }
}

/**
 * What an `Http2Server` refused or ended to stay within its limits since it
 * started, and what it holds now.
 *
 * @category models
 * @since 0.1.0
 */
export interface Http2ServerStats extends GuardCounts {
  /** Connections open now (HTTP/1.1 ones included). */
  readonly connections: number
  /** HTTP/2 sessions open now. */
  readonly sessions: number
  /** The request budget, and the bytes of it reserved now. */
  readonly budgetBytes: number
  readonly reservedBytes: number
  /** Request messages refused for want of budget. */
  readonly overBudget: number
}

/** ALPN with a fallback: `h2` when the client offers it, else HTTP/1.1 (which the fallback serves). */
const chooseProtocol = ({ protocols }: { readonly protocols: ReadonlyArray<string> }): string | undefined =>
  protocols.includes("h2") ? "h2" : protocols.includes("http/1.1") ? "http/1.1" : undefined

/** The fields of `partial` that are set, so spreading it over defaults keeps the defaults of the rest. */
const definedOnly = <A extends object>(partial: A): Partial<A> =>
  Object.fromEntries(Object.entries(partial).filter(([, value]) => value !== undefined)) as Partial<A>
