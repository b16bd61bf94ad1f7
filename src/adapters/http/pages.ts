/**
 * The HTML of the site: the static landing page and the `/inspect` page,
 * with every dynamic value HTML-escaped and blobs shown as lowercase hex.
 *
 * @since 0.1.0
 */
import { changeMessages } from "../../core/server/changeReport.ts"
import type { ChangeRecord } from "../../ports/ChangeCause.ts"
import type { AffiliateView } from "../../ports/ClusterApi.ts"

/**
 * What a cluster's last changes say of one affiliate.
 *
 * @category models
 * @since 0.1.0
 */
export interface KnownAffiliate {
  readonly revision: number | undefined
  readonly expiresAt: number | undefined
}

const escapes: Record<string, string> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&#34;",
  "'": "&#39;"
}

/**
 * Escapes text for HTML element content and quoted attribute values (the
 * same five characters Go's `html/template` escapes).
 *
 * @category rendering
 * @since 0.1.0
 */
export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => escapes[c]!)

/**
 * Bytes as lowercase hex.
 *
 * @category rendering
 * @since 0.1.0
 */
export const toHex = (bytes: Uint8Array): string =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString("hex")

const style = `
  body { font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem; line-height: 1.5; color: #1d2330; }
  h1 { font-size: 1.7rem; margin-bottom: 0.2rem; }
  code, .hex { font-family: ui-monospace, monospace; font-size: 0.9rem; }
  .hex { word-break: break-all; }
  .affiliate { border: 1px solid #d4d9e2; border-radius: 6px; padding: 0.6rem 1rem; margin: 0.8rem 0; }
  .affiliate h3 { margin: 0.2rem 0; font-size: 1rem; }
  .error { color: #a1131f; }
  .note { color: #5a6270; }
  form { margin: 1rem 0; }
  table.history { border-collapse: collapse; font-size: 0.9rem; }
  table.history th, table.history td { text-align: left; padding: 0.2rem 0.6rem; border-bottom: 1px solid #e4e8ee; vertical-align: top; }
  input[type=text] { width: 28rem; max-width: 100%; padding: 0.3rem; }
  .figures { display: grid; grid-template-columns: repeat(auto-fill, minmax(9.5rem, 1fr)); gap: 0.5rem; margin: 0.8rem 0; }
  .figure { border: 1px solid #d4d9e2; border-radius: 6px; padding: 0.4rem 0.7rem; }
  .figure .value { font-size: 1.3rem; font-weight: 600; display: block; }
  .figure .label { color: #5a6270; font-size: 0.85rem; }
  .chart { margin: 0.6rem 0; }
  table.rows { border-collapse: collapse; font-size: 0.9rem; margin: 0.4rem 0; }
  table.rows th, table.rows td { text-align: left; padding: 0.2rem 0.6rem; border-bottom: 1px solid #e4e8ee; }
  tr.self td { font-weight: 600; }
`

const page = (title: string, body: string, head = ""): string => `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${escapeHtml(title)}</title>
<style>${style}</style>${head}
</head>
<body>
${body}
</body>
</html>
`

/**
 * The landing page: what the service is, how the data it holds is protected,
 * and a link to `/inspect`.
 *
 * @category rendering
 * @since 0.1.0
 */
export const landingPage: string = page(
  "Discovery service",
  `<h1>Discovery service</h1>
<p>This is a <strong>Talos-compatible cluster discovery service</strong>. Talos Linux nodes (KubeSpan and cluster
membership discovery) use it to find the other members of their cluster: each node publishes a small record about
itself, called an affiliate, and watches the records of the other nodes of the same cluster.</p>

<h2>Now</h2>
<p class="note"><span id="live-self">This instance</span>. <span id="live-status">Live figures need JavaScript.</span></p>
<div class="figures">
  <div class="figure"><span class="value" id="live-clusters">–</span><span class="label">clusters</span></div>
  <div class="figure"><span class="value" id="live-affiliates">–</span><span class="label">affiliates</span></div>
  <div class="figure"><span class="value" id="live-endpoints">–</span><span class="label">endpoints</span></div>
  <div class="figure"><span class="value" id="live-watches">–</span><span class="label">open watches</span></div>
  <div class="figure"><span class="value" id="live-updates">–</span><span class="label">updates/s</span></div>
  <div class="figure"><span class="value" id="live-deliveries">–</span><span class="label">deliveries/s</span></div>
  <div class="figure"><span class="value" id="live-cut-off">–</span><span class="label">watchers cut off</span></div>
  <div class="figure"><span class="value" id="live-request-memory">–</span><span class="label">request memory in use</span></div>
  <div class="figure"><span class="value" id="live-backend">–</span><span class="label">state backend</span></div>
</div>
<h3>The last 15 minutes</h3>
<div class="chart" id="chart-rates"></div>
<div class="chart" id="chart-members"></div>
<div class="chart" id="chart-pressure"></div>
<h3>Threads serving the gRPC port</h3>
<table class="rows">
  <thead><tr><th>Thread</th><th>Connections</th><th>Watches</th><th>Request memory</th><th>Unread</th></tr></thead>
  <tbody id="threads"></tbody>
</table>
<section id="instances-section" hidden>
<h3>Instances on the shared state</h3>
<p class="note error" id="instances-error"></p>
<table class="rows">
  <thead><tr><th>Instance</th><th>Address</th><th>Version</th><th>Up</th><th>Threads</th><th>Watches</th><th>Updates/s</th><th>Deliveries/s</th><th>Seen</th></tr></thead>
  <tbody id="instances"></tbody>
</table>
</section>

<h2>How the data is protected</h2>
<ul>
  <li>Everything a node publishes is <strong>encrypted on the node</strong> with a key derived from the cluster's
    secrets, before it is sent. The service never holds the key and cannot read the data.</li>
  <li>Affiliate data is encrypted with <strong>AES-GCM</strong>.</li>
  <li>Endpoints are encrypted with <strong>AES-ECB</strong>, one 16-byte block at a time, so that the same endpoint
    always encrypts to the same bytes. This lets the service deduplicate endpoints without being able to read them.</li>
  <li>Data lives <strong>in memory</strong> and expires with the time-to-live each node gives when it publishes.
    When the operator enables them, snapshots of the state are also written to disk so that a restart does not lose
    it.</li>
</ul>

<h2>Inspect a cluster</h2>
<p>With a cluster ID you can see what the service holds for that cluster, as the encrypted bytes it stores:
<a href="/inspect">inspect a cluster</a>.</p>
`,
  `
<link rel="stylesheet" href="/assets/chart.css">
<script src="/assets/chart.js" defer></script>
<script src="/assets/live.js" defer></script>`
)

const form = (clusterId: string) => `<form method="get" action="/inspect">
  <label for="clusterID">Cluster ID</label>
  <input type="text" id="clusterID" name="clusterID" value="${escapeHtml(clusterId)}" autocomplete="off">
  <button type="submit">Inspect</button>
</form>`

const header = `<h1>Inspect a cluster</h1>
<p><a href="/">Discovery service</a>. Affiliate data and endpoints are shown as the encrypted bytes the service
stores, in hex; only the cluster's members can decrypt them.</p>`

const plural = (count: number, word: string) => `${count} ${word}${count === 1 ? "" : "s"}`

const timeLeft = (expiresAt: number, now: number) => {
  const left = Math.round((expiresAt - now) / 1000)
  return left > 0 ? `expires in ${left} s` : `expired ${-left} s ago`
}

const knownFacts = (affiliate: AffiliateView, known: KnownAffiliate | undefined, now: number) =>
  `${plural(affiliate.data.length, "byte")} of data, ${plural(affiliate.endpoints.length, "endpoint")}` +
  (known?.revision === undefined ? "" : `, revision ${known.revision}`) +
  (known?.expiresAt === undefined
    ? ""
    : `, <span class="time-left" data-expires-at="${known.expiresAt}">${timeLeft(known.expiresAt, now)}</span>`)

const affiliateBlock = (affiliate: AffiliateView, known: KnownAffiliate | undefined, now: number) => {
  const endpoints =
    affiliate.endpoints.length === 0
      ? `<p class="note">No endpoints.</p>`
      : `<ul class="endpoints">\n${affiliate.endpoints
          .map((endpoint) => `      <li class="hex endpoint">${toHex(endpoint)}</li>`)
          .join("\n")}\n    </ul>`
  return `<section class="affiliate">
  <h3>Affiliate <code class="affiliate-id">${escapeHtml(affiliate.id)}</code></h3>
  <dl>
    <dt>Data</dt>
    <dd class="hex data">${affiliate.data.length === 0 ? `<span class="note">empty</span>` : toHex(affiliate.data)}</dd>
    <dt>Endpoints</dt>
    <dd>${endpoints}</dd>
    <dt>Known</dt>
    <dd class="known">${knownFacts(affiliate, known, now)}</dd>
  </dl>
</section>`
}

const seconds = (millis: number): string => `${Math.round(millis / 100) / 10} s`

/**
 * The facts of a change as the inspect page shows them, as plain text: no
 * client address and no instance (the logs have those).
 *
 * @category rendering
 * @since 0.1.0
 */
export const changeFacts = (record: ChangeRecord): string => {
  const facts: Array<string> = []
  if (record.ttlMillis !== undefined) facts.push(`TTL ${seconds(record.ttlMillis)}`)
  if (record.expiresAt !== undefined) {
    facts.push(
      `${record.cause.endsWith("expired") ? "expired at" : "expires at"} ${new Date(record.expiresAt).toISOString()}`
    )
  }
  if (record.leftMillis !== undefined) {
    facts.push(
      record.leftMillis >= 0
        ? `${seconds(record.leftMillis)} were left before`
        : `came ${seconds(-record.leftMillis)} after the previous expiry`
    )
  }
  if (record.endpoints !== undefined) facts.push(`${record.endpoints} endpoint${record.endpoints === 1 ? "" : "s"}`)
  return facts.join("; ")
}

const historyRow = (record: ChangeRecord) => `    <tr class="change">
      <td class="revision">${record.revision ?? ""}</td>
      <td class="at">${new Date(record.at).toISOString()}</td>
      <td><code class="affiliate-id">${escapeHtml(record.affiliateId ?? "")}</code></td>
      <td class="cause" title="${escapeHtml(changeMessages[record.cause])}">${escapeHtml(record.cause)}</td>
      <td class="facts">${escapeHtml(changeFacts(record))}</td>
    </tr>`

/**
 * The section of a cluster's last changes, newest first; `undefined` when
 * they could not be read.
 */
const historySection = (history: ReadonlyArray<ChangeRecord> | undefined) => {
  const heading = `<h2>Last changes</h2>`
  if (history === undefined)
    return `${heading}
<p class="note history-unavailable">The changes could not be read.</p>`
  if (history.length === 0) {
    return `${heading}
<p class="note no-history">No changes held. In memory they are kept while the cluster is watched; on a shared state, since its last restart or failover.</p>`
  }
  return `${heading}
<table class="history">
  <thead><tr><th>Revision</th><th>When</th><th>Affiliate</th><th>Cause</th><th>Facts</th></tr></thead>
  <tbody>
${history.map(historyRow).join("\n")}
  </tbody>
</table>`
}

/**
 * What the inspect page shows below its form.
 *
 * @category models
 * @since 0.1.0
 */
export type InspectResult =
  | { readonly _tag: "Form" }
  | {
      readonly _tag: "Cluster"
      readonly affiliates: ReadonlyArray<AffiliateView>
      /** Its last changes, newest first; `undefined` when they could not be read. */
      readonly history?: ReadonlyArray<ChangeRecord> | undefined
      /** The revision and expiry of each affiliate, as its last changes say. */
      readonly known?: ReadonlyMap<string, KnownAffiliate> | undefined
      /** The time the page counts time left from (default: now). */
      readonly now?: number | undefined
    }
  | { readonly _tag: "Error"; readonly message: string }

/**
 * The inspect page: the form (filled with `clusterId`), then the cluster's
 * affiliates (or a note that there are none) and its last changes with
 * their causes, or an error message.
 *
 * @category rendering
 * @since 0.1.0
 */
export const inspectPage = (clusterId: string, result: InspectResult): string => {
  let content = ""
  switch (result._tag) {
    case "Form":
      break
    case "Error":
      content = `<p class="error">${escapeHtml(result.message)}</p>`
      break
    case "Cluster": {
      const now = result.now ?? Date.now()
      const revision = result.history?.find((record) => record.revision !== undefined)?.revision
      const count = plural(result.affiliates.length, "affiliate")
      content =
        `<h2>Cluster <code class="cluster-id">${escapeHtml(clusterId)}</code></h2>
<p class="note" id="live-status">Changes show here as they happen while this page is open (with JavaScript).</p>
<div id="affiliates">
` +
        (result.affiliates.length === 0
          ? `<p class="note no-affiliates">No affiliate data for this cluster.</p>`
          : `<p class="affiliate-count">${revision === undefined ? `${count}.` : `${count}, revision ${revision}.`}</p>\n` +
            result.affiliates
              .map((affiliate) => affiliateBlock(affiliate, result.known?.get(affiliate.id), now))
              .join("\n")) +
        `\n</div>\n<div id="history">\n${historySection(result.history)}\n</div>`
      return page(
        "Inspect a cluster",
        `${header}\n${form(clusterId)}\n${content}`,
        `\n<script src="/assets/inspect.js" defer></script>`
      )
    }
  }
  return page("Inspect a cluster", `${header}\n${form(clusterId)}\n${content}`)
}
