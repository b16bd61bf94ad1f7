/**
 * Reads the log lines `npm run bench` needs from either server, in the three
 * formats they write: JSON lines (our default logger, and zap's production
 * logger in the original), zap's development console format (the original
 * with `-debug`), and Effect's pretty logger (ours with `--debug`, one header
 * line followed by indented `key: value` lines).
 */

/** One log event: when (ms since the epoch), its level, message and fields. */
export interface LogEvent {
  readonly at: number
  readonly level: string
  readonly message: string
  readonly fields: Record<string, unknown>
}

const prettyHeader = /^\[(\d\d):(\d\d):(\d\d)\.(\d{3})\] ([A-Z]+) \(#\d+\): (.*)$/
const prettyField = /^ {2}([\w.]+): ?(.*)$/

/**
 * The instant of an `HH:MM:SS.mmm` local time of day, taken on the day that
 * puts it nearest to `reference` (the pretty logger prints no date).
 */
const timeOfDay = (reference: number, h: number, m: number, s: number, ms: number): number => {
  const day = new Date(reference)
  day.setHours(h, m, s, ms)
  let at = day.getTime()
  if (at - reference > 12 * 3600_000) at -= 24 * 3600_000
  if (reference - at > 12 * 3600_000) at += 24 * 3600_000
  return at
}

const scalar = (text: string): unknown => {
  if (/^-?\d+(\.\d+)?(e[-+]?\d+)?$/i.test(text)) return Number(text)
  if (text === "true" || text === "false") return text === "true"
  return text
}

/**
 * Parses every event in `text`; `reference` (ms since the epoch, near the time
 * the lines were written) dates the pretty logger's times of day.
 */
export const parseLog = (text: string, reference: number = Date.now()): Array<LogEvent> => {
  const events: Array<LogEvent> = []
  const lines = text.split("\n")
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!
    if (line.startsWith("{")) {
      try {
        const json = JSON.parse(line) as Record<string, unknown>
        const message = String(json.msg ?? json.message ?? "")
        const at = typeof json.ts === "number" ? json.ts * 1000 : Date.parse(String(json.timestamp ?? ""))
        const fields = (json.annotations as Record<string, unknown> | undefined) ?? json
        events.push({ at, level: String(json.level ?? "").toUpperCase(), message, fields })
      } catch {
        // a partial line at the end of a file still being written
      }
      continue
    }
    const pretty = prettyHeader.exec(line)
    if (pretty !== null) {
      const [, h, m, s, ms, level, message] = pretty
      const fields: Record<string, unknown> = {}
      for (let j = i + 1; j < lines.length; j++) {
        const field = prettyField.exec(lines[j]!)
        if (field === null) break
        fields[field[1]!] = scalar(field[2]!)
        i = j
      }
      events.push({
        at: timeOfDay(reference, Number(h), Number(m), Number(s), Number(ms)),
        level: level!,
        message: message!,
        fields
      })
      continue
    }
    const columns = line.split("\t")
    if (columns.length >= 4 && /^\d{4}-\d\d-\d\dT/.test(columns[0]!)) {
      let fields: Record<string, unknown> = {}
      const json = columns[4]
      if (json?.startsWith("{")) {
        try {
          fields = JSON.parse(json) as Record<string, unknown>
        } catch {
          fields = {}
        }
      }
      events.push({ at: Date.parse(columns[0]!), level: columns[1]!, message: columns[3]!, fields })
    }
  }
  return events
}

const goUnits: Record<string, number> = { ns: 1e-9, us: 1e-6, µs: 1e-6, μs: 1e-6, ms: 1e-3, s: 1, m: 60, h: 3600 }

/**
 * A duration field in seconds: a number is seconds already (zap's production
 * encoder and ours); a string is a Go duration such as `1.5s` or `950.2µs`.
 */
export const seconds = (value: unknown): number | undefined => {
  if (typeof value === "number") return value
  if (typeof value !== "string") return undefined
  const parts = [...value.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|μs|ms|s|m|h)/g)]
  if (parts.length === 0) return undefined
  return parts.reduce((total, [, amount, unit]) => total + Number(amount) * goUnits[unit!]!, 0)
}

/** The last event with this message, if any. */
export const lastEvent = (events: ReadonlyArray<LogEvent>, message: string): LogEvent | undefined => {
  for (let i = events.length - 1; i >= 0; i--) if (events[i]!.message === message) return events[i]
  return undefined
}
