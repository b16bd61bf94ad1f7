/**
 * Tells HTTP/2 with prior knowledge (h2c) from HTTP/1.1 on a plaintext port
 * by the first bytes a client sends: the HTTP/2 connection preface begins
 * with `PRI `, which no HTTP/1.1 method is. The bytes read are handed back to
 * the socket, so whichever server takes it reads the stream from its start.
 *
 * @since 0.1.0
 */
import type * as net from "node:net"

/**
 * The bytes that tell the protocols apart: the start of the HTTP/2 preface
 * (`PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n`).
 *
 * @category models
 * @since 0.1.0
 */
export const prefaceStart = Buffer.from("PRI ", "latin1")

/**
 * Which protocol `bytes`, the first a client sent, begin: `undefined` while
 * they are a strict beginning of `PRI ` and more must be read.
 *
 * @category constructors
 * @since 0.1.0
 */
export const protocolOf = (bytes: Uint8Array): "http2" | "http1" | undefined => {
  const checked = Math.min(bytes.length, prefaceStart.length)
  for (let i = 0; i < checked; i++) if (bytes[i] !== prefaceStart[i]) return "http1"
  return checked === prefaceStart.length ? "http2" : undefined
}

/**
 * Reads from `socket` until its protocol is known, puts the bytes back and
 * hands the socket to `http2` or `http1`. A socket that ends or fails first
 * is destroyed; one that never sends is left to the handshake deadline.
 *
 * @category constructors
 * @since 0.1.0
 */
export const sniff = (
  socket: net.Socket,
  http2: (socket: net.Socket) => void,
  http1: (socket: net.Socket) => void
): void => {
  let seen: Buffer | undefined
  const done = () => {
    socket.off("data", onData)
    socket.off("end", onEnd)
    socket.off("error", onEnd)
  }
  const onEnd = () => {
    done()
    socket.destroy()
  }
  const onData = (chunk: Buffer) => {
    seen = seen === undefined ? chunk : Buffer.concat([seen, chunk])
    const protocol = protocolOf(seen)
    if (protocol === undefined) return
    done()
    socket.pause()
    socket.unshift(seen)
    if (protocol === "http2") http2(socket)
    else {
      http1(socket)
      socket.resume()
    }
  }
  socket.on("data", onData)
  socket.on("end", onEnd)
  socket.on("error", onEnd)
}
