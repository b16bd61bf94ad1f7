/**
 * What the http2 server keeps about one client connection: its address,
 * whether it finished the HTTP/2 handshake, the calls that keep it busy, and
 * the state of the keepalive policy (ping strikes, as grpc-go counts them).
 * The connection hangs on its socket and on its session, so every stream's
 * call finds it with one property read.
 *
 * @since 0.1.0
 */
import type * as http2 from "node:http2"
import type * as net from "node:net"

const kConnection = Symbol("connection")

type Tagged = { [kConnection]?: Connection }

/**
 * One accepted connection.
 *
 * @category models
 * @since 0.1.0
 */
export class Connection {
  /** The client's address as the socket reports it (IPv4-mapped IPv6 as IPv4). */
  readonly address: string
  /** Calls still open after the turn of the event loop that opened them (watches, slow calls). */
  openCalls = 0
  /** When a stream last opened or a long call last ended, on `performance.now()`. */
  lastActiveAt: number
  /** Bytes the server had sent on the connection at the client's last ping. */
  bytesAtLastPing = 0
  /** SETTINGS frames the client sent since its last ping, and in the interval before (each is acknowledged). */
  settings = 0
  previousSettings = 0
  /** Pings that came sooner than the policy allows, since the server last sent data. */
  pingStrikes = 0
  /** When the client last pinged, on `performance.now()`. */
  lastPingAt = Number.NEGATIVE_INFINITY
  /** Ends the connection if the handshake does not finish in time; cleared once it does. */
  handshakeTimer: NodeJS.Timeout | undefined
  /** What waits to be served until the shared counts admit the connection; `undefined` once they have (or when there are none). */
  #waitingForAdmission: Array<() => void> | undefined

  constructor(address: string, now: number) {
    this.address = address
    this.lastActiveAt = now
  }

  /** Whether the shared counts have yet to answer for this connection. */
  get awaitingAdmission(): boolean {
    return this.#waitingForAdmission !== undefined
  }

  /** Holds what `whenAdmitted` is given until `admitted` (the shared counts are asked). */
  awaitAdmission(): void {
    this.#waitingForAdmission ??= []
  }

  /** Runs `serve` once the connection is admitted: at once when it is. */
  whenAdmitted(serve: () => void): void {
    if (this.#waitingForAdmission === undefined) serve()
    else this.#waitingForAdmission.push(serve)
  }

  /** The shared counts admitted the connection: what waited is served. */
  admitted(): void {
    const waiting = this.#waitingForAdmission
    this.#waitingForAdmission = undefined
    for (const serve of waiting ?? []) serve()
  }

  /** The handshake finished (or the connection ended): its timer is no longer needed. */
  handshaken(): void {
    if (this.handshakeTimer !== undefined) {
      clearTimeout(this.handshakeTimer)
      this.handshakeTimer = undefined
    }
  }
}

/**
 * A connection that belongs to no server, for calls on sessions the guard
 * never saw; it counts what calls tell it and nothing reads it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const detachedConnection = (): Connection => new Connection("", 0)

/**
 * Hangs `connection` on a socket or session.
 *
 * @category constructors
 * @since 0.1.0
 */
export const tag = (holder: net.Socket | http2.Http2Session, connection: Connection): void => {
  ;(holder as Tagged)[kConnection] = connection
}

/**
 * The connection of a socket or session, if it has one.
 *
 * @category constructors
 * @since 0.1.0
 */
export const connectionOf = (holder: net.Socket | http2.Http2Session | undefined): Connection | undefined =>
  holder === undefined ? undefined : (holder as Tagged)[kConnection]

/**
 * The socket the server accepted under `socket`: itself in plaintext, the
 * TCP socket a TLS socket wraps.
 *
 * @category constructors
 * @since 0.1.0
 */
export const acceptedSocketOf = (socket: net.Socket): net.Socket => {
  if (connectionOf(socket) !== undefined) return socket
  return (socket as net.Socket & { readonly _parent?: net.Socket | null })._parent ?? socket
}

/**
 * The connection accepted for a new session: a plaintext session's socket
 * is the accepted socket, a TLS session's socket wraps it.
 *
 * @category constructors
 * @since 0.1.0
 */
export const acceptedConnectionOf = (session: http2.Http2Session): Connection | undefined => {
  const socket = session.socket as net.Socket | undefined
  return socket === undefined ? undefined : connectionOf(acceptedSocketOf(socket))
}

/**
 * The address a socket's connection is counted under: its remote address,
 * with an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`) counted as the IPv4
 * address it carries.
 *
 * @category constructors
 * @since 0.1.0
 */
export const addressOf = (socket: net.Socket): string => {
  const address = socket.remoteAddress ?? ""
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address
}
