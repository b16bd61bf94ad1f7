/**
 * Where a run's history goes: one JSON-lines file per client in the run
 * folder, written as records come (buffered, flushed every 200 ms and at
 * the end), and the run's clock, which every record's time is read from.
 * It also counts records by type, for the run's progress lines and report.
 */
import { closeSync, openSync, writeSync } from "node:fs"
import { join } from "node:path"
import type { HistoryRecord, Time } from "../history.ts"

/** Writes one client's records. */
export type RecordWriter = (record: HistoryRecord) => void

/** The files of one run's history. */
export class HistoryFiles {
  readonly dir: string
  readonly #started = performance.now()
  readonly #files = new Map<string, { readonly fd: number; lines: Array<string> }>()
  readonly #counts = new Map<string, number>()
  readonly #timer: ReturnType<typeof setInterval>

  constructor(dir: string) {
    this.dir = dir
    this.#timer = setInterval(() => this.flush(), 200)
    this.#timer.unref()
  }

  /** Milliseconds since the run started. */
  readonly now = (): Time => Math.round((performance.now() - this.#started) * 1000) / 1000

  /** The writer of `client`'s file (`<client>.jsonl`). */
  writer(client: string): RecordWriter {
    let file = this.#files.get(client)
    if (file === undefined) {
      file = { fd: openSync(join(this.dir, `${client}.jsonl`), "a"), lines: [] }
      this.#files.set(client, file)
    }
    const target = file
    return (record) => {
      target.lines.push(JSON.stringify(record))
      const key = record.type === "fault" ? `fault ${record.name} ${record.phase}` : record.type
      this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1)
    }
  }

  /** Records written so far, by type (faults by name and phase). */
  counts(): ReadonlyMap<string, number> {
    return this.#counts
  }

  /** Writes what is buffered. */
  flush(): void {
    for (const file of this.#files.values()) {
      if (file.lines.length === 0) continue
      writeSync(file.fd, `${file.lines.join("\n")}\n`)
      file.lines = []
    }
  }

  /** Flushes and closes every file. */
  close(): void {
    clearInterval(this.#timer)
    this.flush()
    for (const file of this.#files.values()) closeSync(file.fd)
    this.#files.clear()
  }
}
