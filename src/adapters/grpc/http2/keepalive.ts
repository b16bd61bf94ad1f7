/**
 * Keepalive enforcement as grpc-go's server does it: a client ping that comes
 * sooner than the minimum interval after the previous one is a strike,
 * unless the server sent headers or data since (a client's flow-control
 * pings follow the server's data). Like grpc-go, which resets the count when
 * its writer puts a frame on the wire, what counts is what left: the bytes
 * the connection sent since the previous ping, beyond the acknowledgements of
 * the client's pings and SETTINGS frames (so a client cannot buy strikes off
 * with SETTINGS); WINDOW_UPDATE frames go out only once half a window
 * (32 KiB) of the client's data was read. Data a call wrote before a ping but
 * that
 * left after it still counts. More than `maxStrikes` strikes end the
 * connection with GOAWAY `ENHANCE_YOUR_CALM` and the debug data
 * `too_many_pings`, which grpc-go clients read as "double your keepalive
 * time". Unlike grpc-go, pings on a connection with no open stream follow the
 * same interval instead of a two-hour one, so an idle client's keepalive is
 * welcome at the same rate.
 *
 * Every ping the server looks at costs a call into JavaScript, and a busy Go
 * client sends a flow-control ping about as often as it reads a reply (4 µs
 * of server CPU per call at 16 callers). So after a ping that follows data,
 * the server stops looking at pings for `watchPauseMillis` (1 s by default) (nghttp2 still
 * answers them); then it looks again, counting from the data sent since. A
 * client that floods pings right after data is sent away that much later.
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
  /** How long the server stops looking at pings after one that followed data, in milliseconds. */
  readonly watchPauseMillis: number
}

/**
 * The policy the original service configures (PROTOCOL.md §3.4): at most one
 * ping every 10 seconds, two strikes tolerated. The Go discovery client pings
 * every max(10 s, TTL/10) while a stream is open.
 *
 * @category models
 * @since 0.1.0
 */
export const defaultKeepalivePolicy: KeepalivePolicy = { minTimeMillis: 10_000, maxStrikes: 2, watchPauseMillis: 1000 }

/**
 * The debug data of the GOAWAY that ends a connection for pinging too often.
 *
 * @category models
 * @since 0.1.0
 */
export const tooManyPings = "too_many_pings"

/**
 * Bytes the acknowledgement of a PING takes (a 9-byte frame header and 8
 * bytes of data).
 *
 * @category models
 * @since 0.1.0
 */
export const pingAckBytes = 17

/**
 * Bytes the acknowledgement of a SETTINGS frame takes.
 *
 * @category models
 * @since 0.1.0
 */
export const settingsAckBytes = 9

/**
 * What a ping means: `afterData` when the server sent data since the
 * previous one (strikes start afresh), `counted` when it did not (a strike if
 * the ping came early, still tolerated), `tooMany` when it is one strike too
 * many and the connection must end.
 *
 * @category models
 * @since 0.1.0
 */
export type PingVerdict = "afterData" | "counted" | "tooMany"

/**
 * Counts a ping of `connection` received at `now` (milliseconds, monotonic),
 * when the connection had sent `bytesWritten` bytes in all. Between two pings
 * the server sends, beside data, at most the acknowledgement of the earlier
 * ping and of the SETTINGS frames of this interval and the one before (an
 * acknowledgement leaves just after the frame it answers was read, so it may
 * fall in the next interval); only more than that counts as data.
 *
 * @category constructors
 * @since 0.1.0
 */
export const recordPing = (
  connection: Connection,
  policy: KeepalivePolicy,
  now: number,
  bytesWritten: number
): PingVerdict => {
  const sent = bytesWritten - connection.bytesAtLastPing
  const acknowledgements = pingAckBytes + settingsAckBytes * (connection.settings + connection.previousSettings)
  const last = connection.lastPingAt
  watchFrom(connection, bytesWritten)
  connection.lastPingAt = now
  if (sent > acknowledgements) {
    connection.pingStrikes = 0
    return "afterData"
  }
  if (now - last < policy.minTimeMillis) connection.pingStrikes++
  return connection.pingStrikes > policy.maxStrikes ? "tooMany" : "counted"
}

/**
 * Counts what `connection` sends from now on, when it had sent `bytesWritten`
 * bytes in all: at each ping, and when the server looks at its pings again
 * after a pause (the SETTINGS frames of before are acknowledged by then).
 *
 * @category constructors
 * @since 0.1.0
 */
export const watchFrom = (connection: Connection, bytesWritten: number): void => {
  connection.bytesAtLastPing = bytesWritten
  connection.previousSettings = connection.settings
  connection.settings = 0
}
