/**
 * The command's JSON lines logger: the lines `Logger.consoleJson` prints, for
 * less work per line. The request log writes one line per call, and through
 * `consoleJson` each line cost a generic JSON replacer pass and a `write`
 * system call, most of the service's own time per call (bench/handler.ts).
 * Here a line with a plain string message, primitive annotations and no cause
 * (every request log line) is built with one `JSON.stringify`; anything else
 * goes through `Logger.formatJson` as before. Lines are written in batches,
 * one `console.log` at most every {@link flushMillis} ms or every
 * {@link batchLines} lines, whichever comes first (a server that is not
 * saturated handles one or two calls per event-loop turn, so batching per turn
 * would still mean about one write per call); what is still pending when the
 * process exits is written synchronously by the `exit` handler.
 *
 * @since 0.1.0
 */
import type { LogLevel } from "effect"
import { Logger, References } from "effect"

const isPrimitive = (value: unknown): boolean => {
  const type = typeof value
  return type === "string" || type === "number" || type === "boolean" || value === undefined || value === null
}

/**
 * The line `Logger.formatJson` would give, built directly, or `undefined`
 * when the entry needs the generic formatter.
 */
const fastLine = (options: Logger.Options<unknown>): string | undefined => {
  if (options.cause.reasons.length > 0) return undefined
  const raw = options.message
  const message = Array.isArray(raw) ? (raw.length === 1 ? raw[0] : undefined) : raw
  if (typeof message !== "string") return undefined
  const annotations = options.fiber.getRef(References.CurrentLogAnnotations)
  for (const key in annotations) {
    if (key === "__proto__" || !isPrimitive(annotations[key])) return undefined
  }
  const spans: Record<string, number> = {}
  const spanList = options.fiber.getRef(References.CurrentLogSpans)
  if (spanList.length > 0) {
    const now = options.date.getTime()
    for (const [label, timestamp] of spanList) {
      if (label === "__proto__") return undefined
      spans[label] = now - timestamp
    }
  }
  return JSON.stringify({
    message,
    level: (options.logLevel as LogLevel.LogLevel).toUpperCase(),
    timestamp: options.date.toISOString(),
    annotations,
    spans,
    fiberId: `#${options.fiber.id}`
  })
}

/**
 * The longest a line waits before it is written, in milliseconds.
 *
 * @category constants
 * @since 0.1.0
 */
export const flushMillis = 10

/**
 * The most lines held back; the batch is written as soon as it has this many.
 *
 * @category constants
 * @since 0.1.0
 */
export const batchLines = 256

/**
 * A logger that prints the lines of `Logger.consoleJson` to `console.log` in
 * batches (see the module's description).
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (): Logger.Logger<unknown, void> => {
  let pending: Array<string> = []
  let timer: ReturnType<typeof setTimeout> | undefined
  let hooked = false
  const flush = () => {
    if (timer !== undefined) {
      clearTimeout(timer)
      timer = undefined
    }
    if (pending.length === 0) return
    const text = pending.join("\n")
    pending = []
    console.log(text)
  }
  return Logger.make((options) => {
    pending.push(fastLine(options) ?? Logger.formatJson.log(options))
    if (pending.length >= batchLines) return flush()
    if (timer !== undefined) return
    timer = setTimeout(flush, flushMillis)
    timer.unref()
    if (!hooked) {
      hooked = true
      process.on("exit", flush)
    }
  })
}
