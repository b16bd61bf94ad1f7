/**
 * The Grafana dashboard and the Prometheus alerting rules in `deploy/` are
 * built on metric names that exist: every expression parses as PromQL
 * (Prometheus's own Lezer grammar), and every metric and label it selects
 * is in the `/metrics` of a running service (with I/O threads, after a few
 * calls and a watch), with the label values it matches on where those are a
 * closed set (causes, watch starts).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { mkdtemp, readFile, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import * as grpc from "@grpc/grpc-js"
import * as protoLoader from "@grpc/proto-loader"
import { parser } from "@prometheus-io/lezer-promql"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { parse as parseYaml } from "yaml"
import { freePort } from "../adapters/redis/redisServer.ts"

const root = resolve(import.meta.dirname, "../..")

/** Labels whose values are a closed set the service registers at zero: a matcher on them must name one. */
const enumerated = new Set(["cause", "start"])

/** Series Prometheus makes itself, not the service. */
const fromPrometheus = new Set(["up"])

interface Selector {
  readonly metric: string
  readonly matchers: ReadonlyArray<{ readonly label: string; readonly op: string; readonly value: string }>
}

/** The vector selectors of a PromQL expression, or the parse errors it has. */
const selectorsOf = (expr: string): { readonly selectors: ReadonlyArray<Selector>; readonly errors: number } => {
  // Grafana's interval variables are not PromQL: give them a duration
  const text = expr.replaceAll("$__rate_interval", "5m").replaceAll("$job", "discovery")
  const tree = parser.parse(text)
  const selectors: Array<Selector> = []
  let errors = 0
  const cursor = tree.cursor()
  do {
    if (cursor.type.isError) errors++
    if (cursor.name === "VectorSelector") {
      const node = cursor.node
      const name = node.getChild("Identifier")
      const matchers: Array<Selector["matchers"][number]> = []
      const list = node.getChild("LabelMatchers")
      for (const matcher of list?.getChildren("UnquotedLabelMatcher") ?? []) {
        const label = matcher.getChild("LabelName")
        const op = matcher.getChild("MatchOp")
        const value = matcher.getChild("StringLiteral")
        if (label === null || op === null || value === null) continue
        matchers.push({
          label: text.slice(label.from, label.to),
          op: text.slice(op.from, op.to),
          value: JSON.parse(text.slice(value.from, value.to).replace(/^'|'$/g, '"')) as string
        })
      }
      if (name !== null) selectors.push({ metric: text.slice(name.from, name.to), matchers })
    }
  } while (cursor.next())
  return { selectors, errors }
}

/** Every series of an exposition: metric name → label name → values seen. */
const seriesOf = (exposition: string): Map<string, Map<string, Set<string>>> => {
  const series = new Map<string, Map<string, Set<string>>>()
  for (const line of exposition.split("\n")) {
    if (line === "" || line.startsWith("#")) continue
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s/.exec(line)
    if (match === null) continue
    const labels = series.get(match[1]!) ?? new Map<string, Set<string>>()
    series.set(match[1]!, labels)
    for (const pair of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      const values = labels.get(pair[1]!) ?? new Set<string>()
      labels.set(pair[1]!, values)
      values.add(pair[2]!)
    }
  }
  return series
}

/** The expressions of the dashboard's panels and of the alerting rules, with where each comes from. */
const expressions = async (): Promise<ReadonlyArray<{ readonly where: string; readonly expr: string }>> => {
  const dashboard = JSON.parse(await readFile(join(root, "deploy/grafana/discovery-dashboard.json"), "utf8")) as {
    panels: ReadonlyArray<{ title: string; targets: ReadonlyArray<{ expr: string }> }>
  }
  const rules = parseYaml(await readFile(join(root, "deploy/prometheus/discovery-alerts.yaml"), "utf8")) as {
    groups: ReadonlyArray<{ rules: ReadonlyArray<{ alert: string; expr: string; for?: string }> }>
  }
  return [
    ...dashboard.panels.flatMap((panel) =>
      panel.targets.map((target) => ({ where: `panel "${panel.title}"`, expr: target.expr }))
    ),
    ...rules.groups.flatMap((group) => group.rules.map((rule) => ({ where: `alert ${rule.alert}`, expr: rule.expr })))
  ]
}

let child: ChildProcess
let scratch: string
let exposition: string

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "discovery-monitoring-"))
  const [grpcPort, metricsPort] = [await freePort(), await freePort()]
  child = spawn(
    process.execPath,
    [
      "src/cli/main.ts",
      `--addr=127.0.0.1:${grpcPort}`,
      `--metrics-addr=127.0.0.1:${metricsPort}`,
      "--landing-addr=",
      "--io-threads=2",
      `--snapshot-path=${join(scratch, "state.binpb")}`
    ],
    { cwd: root, stdio: ["ignore", "ignore", "inherit"] }
  )
  for (let i = 0; i < 200; i++) {
    const ready = await fetch(`http://127.0.0.1:${metricsPort}/readyz`).then(
      (response) => response.status === 200,
      () => false
    )
    if (ready) break
    await new Promise((r) => setTimeout(r, 50))
  }
  const definition = protoLoader.loadSync("discovery/server/cluster.proto", {
    includeDirs: [join(root, "proto")],
    keepCase: true
  })
  const Cluster = grpc.makeGenericClientConstructor(
    definition["sidero.discovery.server.Cluster"] as grpc.ServiceDefinition,
    "Cluster"
  )
  const client = new Cluster(`127.0.0.1:${grpcPort}`, grpc.credentials.createInsecure()) as unknown as Record<
    string,
    (...args: ReadonlyArray<unknown>) => grpc.ClientReadableStream<unknown>
  > & { close: () => void }
  const call = (method: string, request: object) =>
    new Promise((done, fail) =>
      client[method]!(request, (error: Error | null, reply: unknown) => (error ? fail(error) : done(reply)))
    )
  const watch = client.Watch!({ cluster_id: "c" })
  watch.on("error", () => undefined)
  await once(watch, "data")
  await call("AffiliateUpdate", { cluster_id: "c", affiliate_id: "a", ttl: { seconds: 60 } })
  await call("Hello", { cluster_id: "c", client_version: "v1.8.0" })
  exposition = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
  watch.cancel()
  client.close()
}, 60_000)

afterAll(async () => {
  child?.kill("SIGKILL")
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true })
})

describe("dashboards and alerts", () => {
  it("parse as PromQL and select only metrics, labels and values the service exports", async () => {
    const series = seriesOf(exposition)
    const problems: Array<string> = []
    const all = await expressions()
    assert.isAbove(all.length, 20)
    for (const { where, expr } of all) {
      const { selectors, errors } = selectorsOf(expr)
      if (errors > 0) problems.push(`${where}: ${expr} does not parse as PromQL`)
      for (const selector of selectors) {
        if (fromPrometheus.has(selector.metric)) continue
        const labels = series.get(selector.metric)
        if (labels === undefined) {
          problems.push(`${where}: no metric ${selector.metric}`)
          continue
        }
        for (const { label, op, value } of selector.matchers) {
          if (label === "job" || label === "instance") continue
          const values = labels.get(label)
          if (values === undefined) problems.push(`${where}: ${selector.metric} has no label ${label}`)
          else if (enumerated.has(label) && (op === "=" || op === "!=") && !values.has(value)) {
            problems.push(`${where}: ${selector.metric}{${label}} is never "${value}" (${[...values].join(", ")})`)
          }
        }
      }
    }
    assert.deepStrictEqual(problems, [])
  })

  it("catch a metric that does not exist", () => {
    const { selectors, errors } = selectorsOf('sum(rate(discovery_no_such_total{cause="x"}[5m]))')
    assert.strictEqual(errors, 0)
    assert.isUndefined(seriesOf(exposition).get(selectors[0]!.metric))
    assert.isAbove(selectorsOf("sum(rate(discovery_changes_total[5m])").errors, 0, "an unclosed call is a parse error")
  })

  it("cover instances, threads, the state backend and resumed against snapshot watch starts", async () => {
    const metrics = new Set(
      (await expressions()).flatMap(({ expr }) => selectorsOf(expr).selectors.map((s) => s.metric))
    )
    for (const needed of [
      "discovery_build_info",
      "discovery_io_threads",
      "discovery_state_backend_available",
      "discovery_watches_started_total",
      "discovery_changes_total",
      "discovery_watch_endings_total"
    ]) {
      assert.isTrue(metrics.has(needed), needed)
    }
    assert.match(exposition, /^discovery_io_threads [12]$/m)
    assert.include(exposition, 'discovery_watches_started_total{start="resumed"} 0')
  })
})
