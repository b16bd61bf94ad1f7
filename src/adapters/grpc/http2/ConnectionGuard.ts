/**
 * The connection hygiene of the http2 server: caps on connections in total
 * and per client address (a connection over a cap is closed as soon as it is
 * accepted), a handshake deadline (a connection that has not sent the HTTP/2
 * preface and its SETTINGS by then, TLS handshake included, is closed), an
 * idle deadline (a session with no open call for that long gets a graceful
 * GOAWAY, which clients answer by reconnecting when they next need to), and
 * keepalive enforcement (see `keepalive.ts`).
 *
 * @since 0.1.0
 */
import * as http2 from "node:http2"
import type * as net from "node:net"
import { acceptedConnectionOf, acceptedSocketOf, addressOf, Connection, connectionOf, tag } from "./Connection.ts"
import type { KeepalivePolicy } from "./keepalive.ts"
import { defaultKeepalivePolicy, recordPing, tooManyPings, watchFrom } from "./keepalive.ts"
import type { ConnectionAdmission } from "./ConnectionCounts.ts"

/**
 * The limits on connections; zero turns a deadline off.
 *
 * @category models
 * @since 0.1.0
 */
export interface ConnectionLimits {
  /** Connections open at once, all clients together. */
  readonly maxConnections: number
  /** Connections open at once from one client address. */
  readonly maxConnectionsPerAddress: number
  /** Milliseconds from accept to the client's first SETTINGS (TLS handshake included); 0 waits forever. */
  readonly handshakeTimeoutMillis: number
  /** Milliseconds a session may stay without an open call before its GOAWAY; 0 keeps it open. */
  readonly idleTimeoutMillis: number
  /** The ping policy, or `false` to answer every ping. */
  readonly keepalive: KeepalivePolicy | false
  /**
   * The counts of all servers on the port (I/O threads), asked after this
   * server's own caps admit a connection; one they refuse is closed as soon
   * as the answer comes.
   */
  readonly admission?: ConnectionAdmission | undefined
}

/**
 * Defaults no real fleet reaches: a Talos node holds one connection, so a
 * thousand from one address is a thousand nodes behind one NAT; the total
 * matches the default cap on watches. The handshake deadline is the
 * original's header read timeout (10 s); a session idle for 2 minutes has
 * no watch open, which a Talos node always has.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultConnectionLimits: ConnectionLimits = {
  maxConnections: 100_000,
  maxConnectionsPerAddress: 1000,
  handshakeTimeoutMillis: 10_000,
  idleTimeoutMillis: 120_000,
  keepalive: defaultKeepalivePolicy
}

/**
 * What the guard did, since the server started.
 *
 * @category models
 * @since 0.1.0
 */
export interface GuardCounts {
  /** Connections closed at accept because a cap was reached. */
  readonly refused: number
  /** Connections closed because their handshake did not finish in time. */
  readonly handshakeTimeouts: number
  /** Sessions sent away because they stayed idle. */
  readonly idleClosed: number
  /** Sessions ended for pinging too often. */
  readonly pingViolations: number
}

type GuardedSession = http2.ServerHttp2Session & { [kGuard]?: ConnectionGuard }

const kGuard = Symbol("guard")

const expireHandshake = (socket: net.Socket, guard: ConnectionGuard): void => {
  guard.handshakeExpired(socket)
}

function onRemoteSettings(this: http2.ServerHttp2Session): void {
  connectionOf(this)?.handshaken()
}

function onSettings(this: http2.ServerHttp2Session): void {
  const connection = connectionOf(this)
  if (connection !== undefined) connection.settings++
}

function onPing(this: GuardedSession): void {
  ;(this as GuardedSession)[kGuard]?.pinged(this)
}

const bytesWrittenOf = (session: http2.ServerHttp2Session): number =>
  (session.socket as { readonly bytesWritten?: number } | undefined)?.bytesWritten ?? 0

const watchPingsAgain = (session: http2.ServerHttp2Session): void => {
  const connection = connectionOf(session)
  if (connection === undefined || session.destroyed) return
  watchFrom(connection, bytesWrittenOf(session))
  session.on("ping", onPing)
}

const goawayData = Buffer.from(tooManyPings)

const ignoreError = (): void => {}

/**
 * Applies `ConnectionLimits` to the connections and sessions of one server.
 * A connection the shared counts have not answered for yet is held: the
 * server serves it (`Connection.whenAdmitted`) only once they admit it.
 *
 * @category models
 * @since 0.1.0
 */
export class ConnectionGuard {
  readonly limits: ConnectionLimits
  /** The server's open sessions. */
  readonly sessions = new Set<http2.ServerHttp2Session>()
  readonly #perAddress = new Map<string, number>()
  /** Accepted connections that have not become a session or an HTTP/1.1 connection yet, with their sockets. */
  readonly #handshaking = new Map<Connection, net.Socket>()
  #open = 0
  #sweeper: NodeJS.Timeout | undefined
  #refused = 0
  #handshakeTimeouts = 0
  #idleClosed = 0
  #pingViolations = 0

  constructor(limits: ConnectionLimits) {
    this.limits = limits
  }

  /** Connections open now. */
  get open(): number {
    return this.#open
  }

  /** What the guard did so far. */
  get counts(): GuardCounts {
    return {
      refused: this.#refused,
      handshakeTimeouts: this.#handshakeTimeouts,
      idleClosed: this.#idleClosed,
      pingViolations: this.#pingViolations
    }
  }

  /**
   * Takes an accepted socket: closes it at once when a cap is reached,
   * otherwise counts it until it closes and arms its handshake deadline.
   * Returns its connection, or `undefined` when it was refused.
   */
  admit(socket: net.Socket): Connection | undefined {
    const address = addressOf(socket)
    const fromAddress = this.#perAddress.get(address) ?? 0
    if (this.#open >= this.limits.maxConnections || fromAddress >= this.limits.maxConnectionsPerAddress) {
      this.#refused++
      socket.destroy()
      return undefined
    }
    this.#open++
    this.#perAddress.set(address, fromAddress + 1)
    const connection = new Connection(address, performance.now())
    tag(socket, connection)
    this.#handshaking.set(connection, socket)
    // errors of a socket nobody serves yet (waiting for its admission) would be uncaught; its close is handled below
    socket.on("error", ignoreError)
    const admitted = this.limits.admission === undefined ? undefined : this.#askAdmission(address, socket, connection)
    socket.once("close", () => {
      connection.handshaken()
      this.#handshaking.delete(connection)
      this.#open--
      admitted?.closed()
      const left = (this.#perAddress.get(address) ?? 1) - 1
      if (left === 0) this.#perAddress.delete(address)
      else this.#perAddress.set(address, left)
    })
    if (this.limits.handshakeTimeoutMillis > 0) {
      connection.handshakeTimer = setTimeout(expireHandshake, this.limits.handshakeTimeoutMillis, socket, this)
      connection.handshakeTimer.unref()
    }
    // refused by shared counts that answered at once: closed already, its close handler counts it out
    if (socket.destroyed) return undefined
    return connection
  }

  /**
   * Asks the shared counts about a connection this guard admitted: one they
   * refuse is closed; one they admit is given back when it closes (also when
   * it closed before the answer came).
   */
  #askAdmission(address: string, socket: net.Socket, connection: Connection): { closed(): void } {
    const admission = this.limits.admission!
    let state: "asking" | "held" | "refused" | "closedWhileAsking" = "asking"
    // nothing of it is served before the answer: caps stay exact however late it comes
    connection.awaitAdmission()
    admission.acquire(address, (admitted) => {
      if (state === "closedWhileAsking") {
        if (admitted) admission.release(address)
        return
      }
      state = admitted ? "held" : "refused"
      if (!admitted) {
        this.#refused++
        socket.destroy()
      } else if (!socket.destroyed) connection.admitted()
    })
    return {
      closed: () => {
        if (state === "held") admission.release(address)
        else if (state === "asking") state = "closedWhileAsking"
      }
    }
  }

  /**
   * `socket` (accepted, or the TLS socket over it) goes to the HTTP/1.1
   * server: its handshake deadline ends, the HTTP/1.1 deadlines take over.
   */
  handedOver(socket: net.Socket): void {
    const connection = connectionOf(acceptedSocketOf(socket))
    if (connection === undefined) return
    this.#handshaking.delete(connection)
    connection.handshaken()
  }

  /** Closes the accepted sockets still in their handshake (a stop: they would serve nothing). */
  closeHandshaking(): void {
    for (const socket of this.#handshaking.values()) socket.destroy()
    this.#handshaking.clear()
  }

  /** The handshake deadline of `socket` passed. */
  handshakeExpired(socket: net.Socket): void {
    const connection = connectionOf(socket)
    if (connection === undefined || connection.handshakeTimer === undefined) return
    connection.handshakeTimer = undefined
    this.#handshakeTimeouts++
    socket.destroy()
  }

  /**
   * Takes a new session: finds the connection `admit` made for its socket
   * (or makes one for a socket it never saw), ends the handshake deadline at
   * the client's first SETTINGS, and watches its pings and idleness.
   */
  attach(session: http2.ServerHttp2Session): Connection {
    let connection = acceptedConnectionOf(session)
    if (connection === undefined) {
      const socket = session.socket as net.Socket | undefined
      connection = new Connection(socket === undefined ? "" : addressOf(socket), performance.now())
    }
    this.#handshaking.delete(connection)
    tag(session, connection)
    ;(session as GuardedSession)[kGuard] = this
    if (connection.handshakeTimer !== undefined) session.once("remoteSettings", onRemoteSettings)
    if (this.limits.keepalive !== false) {
      session.on("ping", onPing)
      session.on("remoteSettings", onSettings)
    }
    this.sessions.add(session)
    session.once("close", () => this.sessions.delete(session))
    this.#startSweeper()
    return connection
  }

  /**
   * Sends a graceful GOAWAY to `share` (0 to 1) of the sessions that hold
   * no open call (no watch), so their clients reconnect, and the kernel may
   * give the new connections to another server on the port; returns how
   * many were sent away.
   */
  shed(share: number): number {
    const idle = [...this.sessions].filter(
      (session) => !session.closed && !session.destroyed && (connectionOf(session)?.openCalls ?? 0) === 0
    )
    const count = Math.floor(idle.length * Math.min(1, Math.max(0, share)))
    for (const session of idle.slice(0, count)) session.close()
    return count
  }

  /** A ping arrived on `session`: ends the session when it is one strike too many. */
  pinged(session: http2.ServerHttp2Session): void {
    const connection = connectionOf(session)
    const policy = this.limits.keepalive
    if (connection === undefined || policy === false || session.destroyed) return
    const verdict = recordPing(connection, policy, performance.now(), bytesWrittenOf(session))
    if (verdict === "afterData") {
      session.off("ping", onPing)
      setTimeout(watchPingsAgain, policy.watchPauseMillis, session).unref()
    }
    if (verdict !== "tooMany") return
    this.#pingViolations++
    session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, session.state.lastProcStreamID ?? 0, goawayData)
    session.destroy()
  }

  /** Stops watching idleness; the sessions themselves are the server's to close. */
  stop(): void {
    if (this.#sweeper !== undefined) {
      clearInterval(this.#sweeper)
      this.#sweeper = undefined
    }
  }

  /** Sends away the sessions idle for longer than the limit. */
  sweep(now: number = performance.now()): void {
    const idle = this.limits.idleTimeoutMillis
    for (const session of this.sessions) {
      const connection = connectionOf(session)
      if (connection === undefined || connection.openCalls > 0 || session.closed || session.destroyed) continue
      if (now - connection.lastActiveAt < idle) continue
      this.#idleClosed++
      session.close()
    }
  }

  #startSweeper(): void {
    const idle = this.limits.idleTimeoutMillis
    if (idle <= 0 || this.#sweeper !== undefined) return
    this.#sweeper = setInterval(() => this.sweep(), Math.max(50, Math.min(5000, idle / 4)))
    this.#sweeper.unref()
  }
}
