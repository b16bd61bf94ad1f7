/**
 * A gRPC server built directly on `node:http2`: the part of `grpc.Server`
 * that our services use (`addService` and `removeService` with grpc-js
 * service definitions and handlers; unary, server-streaming and
 * bidirectional methods), listening on one address in plaintext (h2c with
 * prior knowledge) or TLS (ALPN h2) with a key pair that can be swapped for
 * new connections, with a graceful stop (GOAWAY, open calls finish) and a
 * forced one.
 *
 * The HTTP/2 settings are grpc-js's: Node's defaults (64 KiB windows, no
 * limit on concurrent streams unless set), no session memory limit, no
 * server timeout, no server pings; Node answers the client's keepalive pings
 * itself, at any rate. Accepted connections get TCP keepalive after 15 s
 * idle, as Go's listeners give the original server, so dead peers are
 * found. Requests that are not gRPC get HTTP 415 (wrong content type) or 405
 * (not a POST) with a gRPC status, as grpc-go answers.
 *
 * @since 0.1.0
 */
import * as http2 from "node:http2"
import type * as net from "node:net"
import type * as tls from "node:tls"
import type * as grpc from "@grpc/grpc-js"
import type { KeyPair, KeyPairSource } from "../tls.ts"
import { parseTimeout } from "./grpcTimeout.ts"
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
  /** The SETTINGS_MAX_CONCURRENT_STREAMS advertised to clients (default: no limit). */
  readonly maxConcurrentStreams?: number | undefined
  /** Serve TLS with this key pair, following its changes (default plaintext h2c). */
  readonly keyPair?: KeyPairSource | undefined
}

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

/** `host:port` or `[ipv6]:port` as the host and port to listen on; `undefined` when it is neither. */
const parseAddress = (address: string): { readonly host: string; readonly port: number } | undefined => {
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
  private readonly sessions = new Set<http2.ServerHttp2Session>()
  private server: http2.Http2Server | http2.Http2SecureServer | undefined
  private unsubscribe: (() => void) | undefined
  /** A stop began: connections whose session starts now (a TLS handshake that ends late) are closed at once. */
  private stopping = false

  constructor(options: Http2ServerOptions = {}) {
    this.options = options
    this.limits = {
      maxReceiveMessageLength: options.maxReceiveMessageLength ?? defaultMaxReceiveMessageLength,
      maxSendMessageLength: options.maxSendMessageLength ?? -1
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
    if (parsed === undefined || this.server !== undefined) {
      const reason = parsed === undefined ? `invalid address ${JSON.stringify(address)}` : "the server is already bound"
      process.nextTick(callback, new Error(reason), -1)
      return
    }
    const server = this.create()
    this.server = server
    const onError = (error: Error) => {
      this.server = undefined
      this.unsubscribe?.()
      server.close()
      callback(error, -1)
    }
    server.once("error", onError)
    server.listen({ host: parsed.host === "" ? undefined : parsed.host, port: parsed.port }, () => {
      server.off("error", onError)
      const bound = server.address()
      callback(null, typeof bound === "object" && bound !== null ? bound.port : parsed.port)
    })
  }

  /**
   * Stops gracefully: no new connections, a GOAWAY on each open one, and the
   * callback once the calls already running have finished and every
   * connection is closed.
   */
  tryShutdown(callback: (error?: Error) => void): void {
    const server = this.stop()
    if (server === undefined || !server.listening) {
      process.nextTick(callback)
      return
    }
    server.close(() => callback())
    for (const session of this.sessions) session.close()
  }

  /** Stops at once: every connection is closed, its calls cancelled. */
  forceShutdown(): void {
    const server = this.stop()
    if (server?.listening) server.close()
    for (const session of this.sessions) session.destroy(undefined, http2.constants.NGHTTP2_CANCEL)
  }

  private stop(): http2.Http2Server | http2.Http2SecureServer | undefined {
    this.stopping = true
    this.unsubscribe?.()
    this.unsubscribe = undefined
    return this.server
  }

  private create(): http2.Http2Server | http2.Http2SecureServer {
    const options: http2.ServerOptions & net.ServerOpts = {
      maxSessionMemory: Number.MAX_SAFE_INTEGER,
      maxSendHeaderBlockLength: Number.MAX_SAFE_INTEGER,
      keepAlive: true,
      keepAliveInitialDelay: keepAliveDelayMillis
    }
    if (this.options.maxConcurrentStreams !== undefined) {
      options.settings = { maxConcurrentStreams: this.options.maxConcurrentStreams }
    }
    const keyPair = this.options.keyPair
    let server: http2.Http2Server | http2.Http2SecureServer
    if (keyPair === undefined) {
      server = http2.createServer(options)
    } else {
      const secure = http2.createSecureServer({ ...options, ...secureContextOf(keyPair.current) })
      secure.on("secureConnection", (socket: tls.TLSSocket) => socket.on("error", ignore))
      this.unsubscribe = keyPair.subscribe((pair) => secure.setSecureContext(secureContextOf(pair)))
      server = secure
    }
    server.setTimeout(0)
    server.on("session", this.onSession)
    server.on("stream", this.onStream)
    return server
  }

  private readonly onSession = (session: http2.ServerHttp2Session): void => {
    if (this.stopping) {
      session.close()
      return
    }
    this.sessions.add(session)
    session.once("close", () => this.sessions.delete(session))
  }

  private readonly onStream = (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): void => {
    const contentType = headers["content-type"]
    const verb = headers[":method"]
    if (!isGrpcContentType(contentType)) reject(stream, invalidContentType(contentType), 415)
    else if (verb !== "POST") reject(stream, invalidMethod(verb), 405)
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
