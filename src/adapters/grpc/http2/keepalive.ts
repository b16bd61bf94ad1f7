/**
 * Keepalive enforcement as grpc-go's server does it: a client ping that comes
 * sooner than the minimum interval after the previous one is a strike,
 * unless the server sent headers or data since (a client's flow-control
 * pings follow the server's data). Like grpc-go, which resets the count when
 * its writer puts a frame on the wire, what counts is what left: the bytes
 * the connection sent since the previous ping, beyond what answering a ping
 * and a SETTINGS frame sends; data a call wrote before a ping but that
 * left after it still counts. More than `maxStrikes` strikes end the
 * connection with GOAWAY `ENHANCE_YOUR_CALM` and the debug data
 * `too_many_pings`, which grpc-go clients read as "double your keepalive
 * time". Unlike grpc-go, pings on a connection with no open stream follow the
 * same interval instead of a two-hour one, so an idle client's keepalive is
 * welcome at the same rate.
 *
 * @since 0.1.0
 */
import type { Connection } from "./Connection.ts"

/**
 * How often clients may ping.
 *
 * @category models
 * @since 0.1.0
 */
export interface KeepalivePolicy {
  /** The shortest welcome interval between two pings, in milliseconds (grpc-go's `MinTime`). */
  readonly minTimeMillis: number
  /** Strikes tolerated before the connection ends (grpc-go's `maxPingStrikes`, 2). */
  readonly maxStrikes: number
}

/**
 * The policy the original service configures (PROTOCOL.md §3.4): at most one
 * ping every 10 seconds, two strikes tolerated. The Go discovery client pings
 * every max(10 s, TTL/10) while a stream is open.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultKeepalivePolicy: KeepalivePolicy = { minTimeMillis: 10_000, maxStrikes: 2 }

/**
 * The debug data of the GOAWAY that ends a connection for pinging too often.
 *
 * @category models
 * @since 0.1.0
 */
export const tooManyPings = "too_many_pings"

/**
 * Bytes a connection may send between two pings without that counting as
 * data: the acknowledgement of the ping (17) and of a SETTINGS frame (9).
 * Anything a call sends is more (a reply is at least a HEADERS and a DATA
 * frame of 9-byte headers each); WINDOW_UPDATE frames go out only once half
 * a window (32 KiB) of the client's data was read.
 *
 * @category models
 * @since 0.1.0
 */
export const controlBytesAllowance = 26

/**
 * Counts a ping of `connection` received at `now` (milliseconds, monotonic),
 * when the connection had sent `bytesWritten` bytes in all; true when it is
 * one strike too many and the connection must end.
 *
 * @category constructors
 * @since 0.1.0
 */
export const recordPing = (
  connection: Connection,
  policy: KeepalivePolicy,
  now: number,
  bytesWritten: number
): boolean => {
  const last = connection.lastPingAt
  const sent = bytesWritten - connection.bytesAtLastPing
  connection.lastPingAt = now
  connection.bytesAtLastPing = bytesWritten
  if (sent > controlBytesAllowance) {
    connection.pingStrikes = 0
    return false
  }
  if (now - last < policy.minTimeMillis) connection.pingStrikes++
  return connection.pingStrikes > policy.maxStrikes
}
