/**
 * The server's metrics under the original's names and labels (PROTOCOL.md
 * §4.6), as Effect metrics in the registry of the context (by default the
 * global one that `PrometheusMetrics.format` reads): the go-grpc-middleware
 * set `grpc_server_started_total`, `grpc_server_handled_total`,
 * `grpc_server_msg_received_total`, `grpc_server_msg_sent_total` and the
 * `grpc_server_handling_seconds` histogram, with `grpc_code` in Go's spelling
 * (`OK`, `InvalidArgument`, …), plus `discovery_server_hello_requests_total`
 * by normalized client version, and our own
 * `discovery_server_log_lines_suppressed_total` (request log lines the failure
 * log held back). Every series is built once per method (or version label)
 * and updated without allocating.
 *
 * @since 0.1.0
 */
import type { Context } from "effect"
import { Metric } from "effect"
import { Cluster } from "../../gen/discovery/server/cluster_pb.ts"

/**
 * The client version label of Hello (§2.4): `v1.8.3` gives `v1.8`, a version
 * with a `-` suffix gives `v1.8-pre`, anything else `unknown`. Like the
 * original, it does not check for digits (quirk Q11).
 *
 * @category metrics
 * @since 0.1.0
 */
export const parseVersion = (version: string): string => {
  const dash = version.indexOf("-")
  const head = dash === -1 ? version : version.slice(0, dash)
  if (head.length === 0 || head[0] !== "v") return "unknown"
  const first = head.indexOf(".")
  if (first === -1 || first > 3) return "unknown"
  const second = head.indexOf(".", first + 1)
  if (second === -1 || second - (first + 1) > 3) return "unknown"
  return dash !== -1 && dash < version.length - 1 ? `${head.slice(0, second)}-pre` : head.slice(0, second)
}

/**
 * The gRPC status code names as Go's `codes.Code.String()` spells them, by
 * code number; the values of the `grpc_code` label.
 *
 * @category metrics
 * @since 0.1.0
 */
export const goCodeNames: ReadonlyArray<string> = [
  "OK",
  "Canceled",
  "Unknown",
  "InvalidArgument",
  "DeadlineExceeded",
  "NotFound",
  "AlreadyExists",
  "PermissionDenied",
  "ResourceExhausted",
  "FailedPrecondition",
  "Aborted",
  "OutOfRange",
  "Unimplemented",
  "Internal",
  "Unavailable",
  "DataLoss",
  "Unauthenticated"
]

/**
 * The upper bounds of the `grpc_server_handling_seconds` buckets.
 *
 * @category metrics
 * @since 0.1.0
 */
export const handlingSecondsBuckets: ReadonlyArray<number> = [0.01, 0.1, 0.25, 0.5, 1, 2.5]

/** A counter that only goes up, as Prometheus counters do. */
const total = (name: string, description: string) => Metric.counter(name, { description, incremental: true })

const startedTotal = total("grpc_server_started_total", "Total number of RPCs started on the server.")
const handledTotal = total(
  "grpc_server_handled_total",
  "Total number of RPCs completed on the server, regardless of success or failure."
)
const msgReceivedTotal = total(
  "grpc_server_msg_received_total",
  "Total number of RPC stream messages received on the server."
)
const msgSentTotal = total("grpc_server_msg_sent_total", "Total number of gRPC stream messages sent by the server.")
const handlingSeconds = Metric.histogram("grpc_server_handling_seconds", {
  description: "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
  boundaries: handlingSecondsBuckets
})

/**
 * The series of one method.
 *
 * @category metrics
 * @since 0.1.0
 */
export interface MethodMetrics {
  readonly started: Metric.Counter<number>
  readonly received: Metric.Counter<number>
  readonly sent: Metric.Counter<number>
  /** `grpc_server_handled_total` by code number (0 to 16). */
  readonly handled: ReadonlyArray<Metric.Counter<number>>
  readonly handlingSeconds: Metric.Histogram<number>
}

/**
 * The `grpc_type` label: `unary` or `server_stream` for this service.
 *
 * @category metrics
 * @since 0.1.0
 */
export type GrpcType = "unary" | "server_stream"

/**
 * Builds the series of one method of the Cluster service.
 *
 * @category metrics
 * @since 0.1.0
 */
export const methodMetrics = (method: string, type: GrpcType, service: string = Cluster.typeName): MethodMetrics => {
  const labels = { grpc_method: method, grpc_service: service, grpc_type: type }
  return {
    started: Metric.withAttributes(startedTotal, labels),
    received: Metric.withAttributes(msgReceivedTotal, labels),
    sent: Metric.withAttributes(msgSentTotal, labels),
    handled: goCodeNames.map((code) => Metric.withAttributes(handledTotal, { grpc_code: code, ...labels })),
    handlingSeconds: Metric.withAttributes(handlingSeconds, labels)
  }
}

const helloRequestsTotal = total("discovery_server_hello_requests_total", "Number of hello requests by client version.")

/**
 * `discovery_server_log_lines_suppressed_total`: the request log lines of
 * failed calls that the failure log (`failureLog.ts`) did not write because
 * their client address, or all addresses together, exceeded the log rate.
 * Not a metric of the original.
 *
 * @category metrics
 * @since 0.1.0
 */
export const logLinesSuppressed = total(
  "discovery_server_log_lines_suppressed_total",
  "Number of request log lines of failed calls not written because of the log rate limit."
)

const helloByVersion = new Map<string, Metric.Counter<number>>()

/** Real versions are digits (`v1.8`, `v0.14-pre`); anything else would let clients mint series at will (Q11). */
const versionLabel = /^v\d{1,3}\.\d{1,3}(-pre)?$/

/**
 * The `discovery_server_hello_requests_total` series of a client version
 * label (one object per label, kept for reuse). A label that is not digits,
 * which `parseVersion` lets through, is counted as `unknown`, so clients cannot
 * grow the number of series without bound.
 *
 * @category metrics
 * @since 0.1.0
 */
export const helloRequests = (parsed: string): Metric.Counter<number> => {
  const label = versionLabel.test(parsed) ? parsed : "unknown"
  let counter = helloByVersion.get(label)
  if (counter === undefined) {
    counter = Metric.withAttributes(helloRequestsTotal, { client_version: label })
    helloByVersion.set(label, counter)
  }
  return counter
}

/**
 * Creates every series at zero in the registry of `context`, as the original
 * does: each method's counters and histogram, `grpc_server_handled_total` for
 * every code, and the `unknown` Hello series, so scrapes see them before the
 * first call.
 *
 * @category metrics
 * @since 0.1.0
 */
export const seed = (context: Context.Context<never>, methods: Iterable<MethodMetrics>): void => {
  for (const metrics of methods) {
    metrics.started.valueUnsafe(context)
    metrics.received.valueUnsafe(context)
    metrics.sent.valueUnsafe(context)
    metrics.handlingSeconds.valueUnsafe(context)
    for (const handled of metrics.handled) handled.valueUnsafe(context)
  }
  helloRequests("unknown").valueUnsafe(context)
}
