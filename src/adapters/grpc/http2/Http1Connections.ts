/**
 * The HTTP/1.1 connections of the gRPC port, which the fallback listener
 * answers. Node's HTTP server only watches its connections (header and
 * request timeouts, closing idle ones) when it listens itself, and here it
 * is handed sockets another server accepted, so this module does that
 * watching: each connection must bring a request's headers within the
 * deadline of being handed over or of its previous response, or it is
 * closed; a stop closes the idle connections at once and the busy ones once
 * their response is out.
 *
 * @since 0.1.0
 */
import * as http from "node:http"
import type * as net from "node:net"

/**
 * A Node request listener of HTTP/1.1 requests.
 *
 * @category models
 * @since 0.1.0
 */
export type Http1Listener = (request: http.IncomingMessage, response: http.ServerResponse) => void

interface Watched {
  timer: NodeJS.Timeout | undefined
  busy: boolean
}

const kWatched = Symbol("http1Watched")

type WatchedSocket = net.Socket & { [kWatched]?: Watched }

const expire = (socket: net.Socket): void => {
  socket.destroy()
}

/**
 * The HTTP/1.1 connections handed over by a server, and the server that
 * answers them.
 *
 * @category models
 * @since 0.1.0
 */
export class Http1Connections {
  /** Milliseconds a connection may take to send a request's headers, from hand-over or its last response. */
  readonly requestDeadlineMillis: number
  readonly #server: http.Server
  readonly #sockets = new Set<WatchedSocket>()
  #stopping = false

  constructor(listener: Http1Listener, requestDeadlineMillis: number) {
    this.requestDeadlineMillis = requestDeadlineMillis
    this.#server = http.createServer((request, response) => {
      this.#started(request.socket as WatchedSocket, response)
      listener(request, response)
    })
  }

  /** Connections open now. */
  get size(): number {
    return this.#sockets.size
  }

  /** Takes a connection whose first bytes are an HTTP/1.1 request (or a TLS one that chose HTTP/1.1). */
  adopt(socket: net.Socket): void {
    const watched = socket as WatchedSocket
    if (this.#stopping) {
      watched.destroy()
      return
    }
    watched[kWatched] = { timer: undefined, busy: false }
    this.#sockets.add(watched)
    watched.once("close", () => {
      this.#disarm(watched)
      this.#sockets.delete(watched)
    })
    this.#arm(watched)
    this.#server.emit("connection", watched)
  }

  /** Stops taking requests: idle connections close now, busy ones after their response. */
  close(): void {
    this.#stopping = true
    for (const socket of this.#sockets) if (!socket[kWatched]?.busy) socket.destroy()
  }

  /** Closes every connection now. */
  destroy(): void {
    this.#stopping = true
    for (const socket of this.#sockets) socket.destroy()
  }

  #started(socket: WatchedSocket, response: http.ServerResponse): void {
    const watched = socket[kWatched]
    if (watched === undefined) return
    this.#disarm(socket)
    watched.busy = true
    if (this.#stopping) response.setHeader("connection", "close")
    response.once("finish", () => {
      watched.busy = false
      if (this.#stopping) socket.destroySoon()
      else this.#arm(socket)
    })
  }

  #arm(socket: WatchedSocket): void {
    const watched = socket[kWatched]
    if (watched === undefined || this.requestDeadlineMillis <= 0) return
    watched.timer = setTimeout(expire, this.requestDeadlineMillis, socket)
    watched.timer.unref()
  }

  #disarm(socket: WatchedSocket): void {
    const watched = socket[kWatched]
    if (watched?.timer !== undefined) {
      clearTimeout(watched.timer)
      watched.timer = undefined
    }
  }
}
