/**
 * The `discovery-service` command line: the original service's flag names for
 * what exists, the new caps, and a clear refusal for flags whose feature is not
 * built yet.
 *
 * @since 0.1.0
 */
import { Config, Duration, Effect, Option } from "effect"
import { Command, Flag } from "effect/cli"
import { defaultCaps } from "../core/server/ClusterStore.ts"
import { parseGoDuration } from "./goDuration.ts"
import type { ServiceConfig } from "./ServiceConfig.ts"

const goDuration = (name: string, fallback: string) =>
  Flag.String(name).pipe(
    Flag.withDefault(fallback),
    Flag.filterMap(
      (text) =>
        Option.filter(Option.fromUndefinedOr(parseGoDuration(text)), (d) => Duration.isGreaterThan(d, Duration.zero)),
      (text) => `--${name}: ${JSON.stringify(text)} is not a positive duration (examples: 30s, 1m, 1h30m)`
    )
  )

const positiveInt = (name: string, fallback: number) =>
  Flag.Int(name).pipe(
    Flag.withDefault(fallback),
    Flag.filter(
      (n) => n > 0,
      (n) => `--${name} must be positive, got ${n}`
    )
  )

/**
 * The flags this build implements, with their help text.
 *
 * @category flags
 * @since 0.1.0
 */
export const flags = {
  addr: Flag.String("addr").pipe(
    Flag.withDescription("gRPC listen address (host:port); an empty host listens on every interface (default :3000)"),
    Flag.withDefault(":3000")
  ),
  gcInterval: goDuration("gc-interval", "1m").pipe(
    Flag.withDescription(
      "how often expired affiliates and endpoints are removed, as a Go duration such as 30s (default 1m)"
    )
  ),
  redirectEndpoint: Flag.String("redirect-endpoint").pipe(
    Flag.withDescription("send every client to this endpoint (host:port) in Hello; empty means no redirect"),
    Flag.withDefault("")
  ),
  trustXRealIp: Flag.Boolean("trust-x-real-ip").pipe(
    Flag.withDescription("take the client address from X-Real-IP; only behind a proxy that sets it (default false)"),
    Flag.withDefault(false)
  ),
  trustFirstXForwardedFor: Flag.Boolean("trust-first-x-forwarded-for").pipe(
    Flag.withDescription(
      "take the client address from the first X-Forwarded-For entry; only behind a proxy (default false)"
    ),
    Flag.withDefault(false)
  ),
  disableClientIpReporting: Flag.Boolean("disable-client-ip-reporting").pipe(
    Flag.withDescription("do not report the client's public address in Hello"),
    Flag.withDefault(false)
  ),
  maxClusters: positiveInt("max-clusters", defaultCaps.maxClusters).pipe(
    Flag.withDescription(
      `most clusters held at once; beyond it new clusters get RESOURCE_EXHAUSTED (default ${defaultCaps.maxClusters})`
    )
  ),
  maxWatches: positiveInt("max-watches", defaultCaps.maxWatches).pipe(
    Flag.withDescription(
      `most Watch streams open at once; beyond it new watches get RESOURCE_EXHAUSTED (default ${defaultCaps.maxWatches})`
    )
  ),
  debug: Flag.Boolean("debug").pipe(
    Flag.withDescription("human-readable logs at debug level instead of JSON lines; MODE=dev does the same"),
    Flag.withFallbackConfig(Config.String("MODE").pipe(Config.map((mode) => mode === "dev"))),
    Flag.withDefault(false)
  )
}

/**
 * Flags of the original service whose feature this build does not have yet. A
 * value that asks for the feature is refused; a value that turns it off is
 * accepted, since that is what this build does.
 *
 * @category flags
 * @since 0.1.0
 */
export const pendingFlags = {
  landingAddr: Flag.String("landing-addr").pipe(
    Flag.withDescription("not available yet (landing page); only an empty value is accepted"),
    Flag.optional
  ),
  metricsAddr: Flag.String("metrics-addr").pipe(
    Flag.withDescription("not available yet (Prometheus metrics); only an empty value is accepted"),
    Flag.optional
  ),
  debugAddr: Flag.String("debug-addr").pipe(
    Flag.withDescription("not available (pprof server of Go debug builds); only an empty value is accepted"),
    Flag.optional
  ),
  snapshotsEnabled: Flag.Boolean("snapshots-enabled").pipe(
    Flag.withDescription("not available yet (state snapshots); only false is accepted"),
    Flag.optional
  ),
  snapshotPath: Flag.String("snapshot-path").pipe(
    Flag.withDescription("not available yet (state snapshots)"),
    Flag.optional
  ),
  snapshotInterval: Flag.String("snapshot-interval").pipe(
    Flag.withDescription("not available yet (state snapshots)"),
    Flag.optional
  ),
  certificatePath: Flag.String("certificate-path").pipe(
    Flag.withDescription("not available yet (TLS); put a TLS-terminating proxy in front meanwhile"),
    Flag.optional
  ),
  keyPath: Flag.String("key-path").pipe(
    Flag.withDescription("not available yet (TLS); put a TLS-terminating proxy in front meanwhile"),
    Flag.optional
  )
}

/**
 * The values given for the pending flags.
 *
 * @category models
 * @since 0.1.0
 */
export interface Pending {
  readonly landingAddr: Option.Option<string>
  readonly metricsAddr: Option.Option<string>
  readonly debugAddr: Option.Option<string>
  readonly snapshotsEnabled: Option.Option<boolean>
  readonly snapshotPath: Option.Option<string>
  readonly snapshotInterval: Option.Option<string>
  readonly certificatePath: Option.Option<string>
  readonly keyPath: Option.Option<string>
}

/**
 * The reasons to refuse the given pending flags, one line each; empty when
 * every value given only turns a missing feature off.
 *
 * @category flags
 * @since 0.1.0
 */
export const refusals = (pending: Pending): Array<string> => {
  const problems: Array<string> = []
  const emptyOnly = (name: string, value: Option.Option<string>, feature: string) => {
    if (Option.isSome(value) && value.value !== "") {
      problems.push(`--${name}: ${feature} is not available in this build yet; only --${name}="" is accepted`)
    }
  }
  const never = (name: string, value: Option.Option<string>, feature: string) => {
    if (Option.isSome(value)) problems.push(`--${name}: ${feature} is not available in this build yet`)
  }
  emptyOnly("landing-addr", pending.landingAddr, "the landing page")
  emptyOnly("metrics-addr", pending.metricsAddr, "the metrics endpoint")
  emptyOnly("debug-addr", pending.debugAddr, "the debug server")
  if (Option.isSome(pending.snapshotsEnabled) && pending.snapshotsEnabled.value) {
    problems.push("--snapshots-enabled: state snapshots are not available in this build yet; state lives in memory")
  }
  never("snapshot-path", pending.snapshotPath, "state snapshots")
  never("snapshot-interval", pending.snapshotInterval, "state snapshots")
  never("certificate-path", pending.certificatePath, "TLS")
  never("key-path", pending.keyPath, "TLS")
  return problems
}

/**
 * Builds the command; `serve` runs the service with the parsed settings.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = <E, R>(serve: (config: ServiceConfig) => Effect.Effect<void, E, R>) =>
  Command.make("discovery-service", { ...flags, ...pendingFlags }, (parsed): Effect.Effect<void, E | Error, R> => {
    const problems = refusals(parsed)
    if (problems.length > 0) return Effect.fail(new Error(problems.join("\n")))
    return serve({
      addr: parsed.addr,
      gcInterval: parsed.gcInterval,
      redirectEndpoint: parsed.redirectEndpoint,
      trustXRealIp: parsed.trustXRealIp,
      trustFirstXForwardedFor: parsed.trustFirstXForwardedFor,
      disableClientIpReporting: parsed.disableClientIpReporting,
      maxClusters: parsed.maxClusters,
      maxWatches: parsed.maxWatches,
      debug: parsed.debug
    })
  }).pipe(
    Command.withDescription(
      "Talos-compatible cluster discovery service: nodes of a cluster publish encrypted data about themselves " +
        "and watch the other members. State is held in memory with the TTLs the clients give."
    )
  )

/**
 * Rewrites Go-style single-dash long flags (`-addr=:3000`, `-debug`) into the
 * double-dash form; single-letter short flags (`-h`) are left alone.
 *
 * @category parsing
 * @since 0.1.0
 */
export const normalizeArgs = (args: ReadonlyArray<string>): Array<string> =>
  args.map((arg) => (/^-[a-z][a-z0-9-]+(=.*)?$/.test(arg) ? `-${arg}` : arg))
