/**
 * Helpers for the HTTP adapter tests: real listeners on 127.0.0.1 port 0 over
 * the in-process core, and a fetch that returns status, headers and body.
 */
import { Effect, Layer } from "effect"
import * as LandingServer from "../../../src/adapters/http/LandingServer.ts"
import * as MetricsServer from "../../../src/adapters/http/MetricsServer.ts"
import { Readiness } from "../../../src/adapters/http/Readiness.ts"
import * as TestDiscovery from "../../../src/adapters/testing/TestDiscovery.ts"

/** A response read whole. */
export interface Reply {
  readonly status: number
  readonly headers: Headers
  readonly body: string
}

/** Requests `path` from 127.0.0.1:`port` without following redirects. */
export const request = (port: number, path: string, init: RequestInit = {}): Effect.Effect<Reply> =>
  Effect.promise(async () => {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, { redirect: "manual", ...init })
    return { status: response.status, headers: response.headers, body: await response.text() }
  })

/** The core (GC on demand, on the test clock) with a fresh readiness signal. */
export const core = Layer.mergeAll(TestDiscovery.layer(), Readiness.layer)

/** The landing listener on 127.0.0.1, port 0, over `core`. */
export const landing = (options: LandingServer.LandingOptions = {}) =>
  LandingServer.layer({ address: "127.0.0.1:0", ...options }).pipe(Layer.provideMerge(core))

/** The metrics listener on 127.0.0.1, port 0, over `core`. */
export const metrics = (options: MetricsServer.MetricsOptions = {}) =>
  MetricsServer.layer({ address: "127.0.0.1:0", ...options }).pipe(Layer.provideMerge(core))

/** One sample line of the Prometheus text format. */
export interface Sample {
  readonly name: string
  readonly labels: Readonly<Record<string, string>>
  readonly value: number
}

/** A scrape parsed: the `# TYPE` of each family, the `# HELP` lines, and the samples. */
export interface Scrape {
  readonly types: ReadonlyMap<string, string>
  readonly help: ReadonlyMap<string, string>
  readonly samples: ReadonlyArray<Sample>
}

const parseValue = (text: string): number =>
  text === "+Inf" ? Number.POSITIVE_INFINITY : text === "-Inf" ? Number.NEGATIVE_INFINITY : Number(text)

/**
 * Parses the Prometheus text format (0.0.4) strictly enough for the tests: a
 * family's TYPE comes once, before its samples, and every line is either a
 * comment or `name{labels} value`.
 */
export const parseScrape = (text: string): Scrape => {
  const types = new Map<string, string>()
  const help = new Map<string, string>()
  const samples: Array<Sample> = []
  for (const line of text.split("\n")) {
    if (line === "") continue
    const comment = /^# (TYPE|HELP) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line)
    if (comment !== null) {
      const [, kind, name, rest] = comment as unknown as [string, string, string, string]
      const target = kind === "TYPE" ? types : help
      if (target.has(name)) throw new Error(`duplicate # ${kind} for ${name}`)
      target.set(name, rest)
      continue
    }
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (sample === null) throw new Error(`not a sample line: ${line}`)
    const [, name, labelText, value] = sample as unknown as [string, string, string | undefined, string]
    const labels: Record<string, string> = {}
    for (const match of (labelText ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[match[1]!] = match[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c))
    }
    const family = [...types.keys()].findLast((f) => name === f || name.startsWith(`${f}_`))
    if (family === undefined) throw new Error(`sample before its # TYPE: ${line}`)
    samples.push({ name, labels, value: parseValue(value) })
  }
  return { types, help, samples }
}

/** The samples of one metric name. */
export const samplesOf = (scrape: Scrape, name: string): ReadonlyArray<Sample> =>
  scrape.samples.filter((sample) => sample.name === name)

/** The value of an unlabelled metric. */
export const sampleValue = (scrape: Scrape, name: string): number | undefined =>
  scrape.samples.find((sample) => sample.name === name && Object.keys(sample.labels).length === 0)?.value
