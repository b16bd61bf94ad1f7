/**
 * A minimal Redis client for the harness's own commands (INFO, BGSAVE,
 * CLUSTER …, MIGRATE): one short connection per command, so nothing
 * reconnects in the background and a killed server just makes the call
 * fail. Bulk strings come back as bytes, so keys survive a round trip
 * (GETKEYSINSLOT, then MIGRATE) whatever they contain.
 */
import * as net from "node:net"

/** A reply: simple string, integer, bulk string (bytes), nil, or array. */
export type RespValue = string | number | Buffer | null | ReadonlyArray<RespValue>

/** An error reply (`-ERR …`, `-MOVED …`). */
export class RespError extends Error {
  override readonly name = "RespError"
}

type Parsed = { readonly value: RespValue | RespError; readonly next: number } | undefined

const lineEnd = (buffer: Buffer, from: number): number => buffer.indexOf("\r\n", from)

const parse = (buffer: Buffer, at: number): Parsed => {
  if (at >= buffer.length) return undefined
  const end = lineEnd(buffer, at)
  if (end < 0) return undefined
  const line = buffer.toString("utf8", at + 1, end)
  const next = end + 2
  switch (String.fromCharCode(buffer[at]!)) {
    case "+":
      return { value: line, next }
    case "-":
      return { value: new RespError(line), next }
    case ":":
      return { value: Number(line), next }
    case "$": {
      const length = Number(line)
      if (length < 0) return { value: null, next }
      if (buffer.length < next + length + 2) return undefined
      return { value: buffer.subarray(next, next + length), next: next + length + 2 }
    }
    case "*": {
      const count = Number(line)
      if (count < 0) return { value: null, next }
      const items: Array<RespValue> = []
      let position = next
      for (let i = 0; i < count; i++) {
        const item = parse(buffer, position)
        if (item === undefined) return undefined
        if (item.value instanceof RespError) return item
        items.push(item.value)
        position = item.next
      }
      return { value: items, next: position }
    }
    default:
      throw new Error(`unexpected reply from Redis: ${JSON.stringify(buffer.toString("utf8", at, end))}`)
  }
}

const encode = (args: ReadonlyArray<string | Buffer | number>): Buffer => {
  const parts: Array<Buffer> = [Buffer.from(`*${args.length}\r\n`)]
  for (const arg of args) {
    const bytes = Buffer.isBuffer(arg) ? arg : Buffer.from(String(arg))
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from("\r\n"))
  }
  return Buffer.concat(parts)
}

/**
 * Sends one command to the Redis on `127.0.0.1:port` and returns its reply;
 * rejects with a `RespError` for an error reply, or when the server does not
 * answer within `timeoutMillis` (default 5 s).
 */
export const redisCommand = (
  port: number,
  args: ReadonlyArray<string | Buffer | number>,
  timeoutMillis = 5000
): Promise<RespValue> =>
  new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1")
    let received = Buffer.alloc(0)
    const fail = (error: Error) => {
      socket.destroy()
      reject(error)
    }
    socket.setTimeout(timeoutMillis, () =>
      fail(new Error(`${String(args[0])} on 127.0.0.1:${port}: no answer in ${timeoutMillis} ms`))
    )
    socket.once("error", fail)
    socket.once("close", () => fail(new Error(`${String(args[0])} on 127.0.0.1:${port}: connection closed`)))
    socket.on("data", (data) => {
      received = Buffer.concat([received, data])
      let reply: Parsed
      try {
        reply = parse(received, 0)
      } catch (error) {
        fail(error as Error)
        return
      }
      if (reply === undefined) return
      socket.removeAllListeners("close")
      socket.destroy()
      if (reply.value instanceof RespError) reject(reply.value)
      else resolve(reply.value)
    })
    socket.write(encode(args))
  })

/** A reply as text (bulk strings decoded as UTF-8, nil as ""); arrays are joined by newlines. */
export const replyText = (value: RespValue): string => {
  if (value === null) return ""
  if (Buffer.isBuffer(value)) return value.toString("utf8")
  if (Array.isArray(value)) return value.map(replyText).join("\n")
  return String(value)
}

/** Sends a command and returns its reply as text (INFO, CLUSTER NODES, GET). */
export const redisText = async (
  port: number,
  args: ReadonlyArray<string | Buffer | number>,
  timeoutMillis?: number
): Promise<string> => replyText(await redisCommand(port, args, timeoutMillis))

/** The `field:value` lines of an INFO or CLUSTER INFO reply, as a map. */
export const infoFields = (text: string): ReadonlyMap<string, string> =>
  new Map(
    text
      .split(/\r?\n/)
      .filter((line) => line.includes(":") && !line.startsWith("#"))
      .map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 1)] as const)
  )

/** Whether the Redis on `port` answers PING with PONG (not LOADING, not refused). */
export const answersPing = async (port: number): Promise<boolean> => {
  try {
    return (await redisCommand(port, ["PING"], 1000)) === "PONG"
  } catch {
    return false
  }
}
