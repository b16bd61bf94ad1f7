/**
 * `discovery-service conformance <host:port>`: checks a discovery server
 * against the protocol over gRPC, with the conformance kit's cases (the
 * same ones the project's contract tests run) and its model-based property
 * (random sequences against a reference model, a failing one shrunk and saved
 * for `--replay`). Prints each case as it ends and a summary, or one JSON
 * document with `--json`; exits 0 only when no case failed and the property
 * holds.
 *
 * @since 0.1.0
 */
import { execFile } from "node:child_process"
import { readFileSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { promisify } from "node:util"
import { Duration, Effect, Option } from "effect"
import { Argument, Command, Flag } from "effect/cli"
import { contractCases } from "../conformance/cases.ts"
import { remoteTarget } from "../conformance/remoteTarget.ts"
import {
  checkModelProperty,
  modelPropertyName,
  type PropertyResult,
  type ReplayScript,
  replayScript
} from "../conformance/properties.ts"
import type { CaseResult } from "../conformance/runner.ts"
import { picked, runCases, summarize } from "../conformance/runner.ts"
import { goDuration } from "./command.ts"
import { parseGoDuration } from "./goDuration.ts"

const marks: Record<CaseResult["status"], string> = { passed: "ok  ", failed: "FAIL", skipped: "skip", differs: "diff" }

const shown = (value: unknown): string => {
  try {
    return JSON.stringify(value, (_key, inner) => (typeof inner === "bigint" ? String(inner) : inner))
  } catch (error) {
    return JSON.stringify({ unprintable: error instanceof Error ? error.message : String(error) })
  }
}

/** Runs `command` with `sh -c`; fails with its output when it exits with another status than 0. */
const runShell = (command: string) =>
  Effect.tryPromise({
    try: () => promisify(execFile)("sh", ["-c", command]),
    catch: (error) => new Error(`--stop-command failed: ${error instanceof Error ? error.message : String(error)}`)
  })

const stepOps = new Set(["update", "delete", "list", "watch", "disconnect"])

/** The script a previous run saved, or why it is not one. */
const readScript = (path: string): ReplayScript | Error => {
  try {
    const script = JSON.parse(readFileSync(path, "utf8")) as Partial<ReplayScript>
    const steps = script.steps
    if (
      !Array.isArray(steps) ||
      !steps.every(
        (step) => typeof step === "object" && step !== null && stepOps.has((step as { op?: unknown }).op as string)
      )
    ) {
      return new Error(
        `${path} is not a saved sequence: it needs "steps", each with an "op" of ${[...stepOps].join(", ")}`
      )
    }
    return { property: String(script.property ?? "saved sequence"), seed: Number(script.seed ?? 0), steps }
  } catch (error) {
    return new Error(`cannot read ${path}: ${error instanceof Error ? error.message : String(error)}`)
  }
}

/**
 * One case as a line (and, when it failed, what was expected and what came).
 *
 * @category rendering
 * @since 0.1.0
 */
export const caseLine = (result: CaseResult): string => {
  const head = `${marks[result.status]} ${result.group} › ${result.name}`
  switch (result.status) {
    case "passed":
      return `${head} (${result.millis} ms)`
    case "failed": {
      const values =
        result.expected === undefined && result.actual === undefined
          ? ""
          : `\n       expected: ${shown(result.expected)}\n       came:     ${shown(result.actual)}`
      return `${head}\n       ${result.reason ?? "failed"}${values}`
    }
    default:
      return `${head}: ${result.reason ?? ""}`
  }
}

const flags = {
  target: Argument.String("host:port").pipe(Argument.withDescription("the discovery server's gRPC address")),
  tls: Flag.Boolean("tls").pipe(
    Flag.withDefault(false),
    Flag.withDescription("dial with TLS, trusting the system roots (plaintext otherwise)")
  ),
  ca: Flag.String("ca").pipe(
    Flag.withDescription("dial with TLS, trusting the CA certificate in this PEM file"),
    Flag.optional
  ),
  only: Flag.String("only").pipe(
    Flag.withDescription("run only the cases whose group or name contains this text (e.g. Watch, limits, T46)"),
    Flag.optional
  ),
  json: Flag.Boolean("json").pipe(
    Flag.withDefault(false),
    Flag.withDescription("print one JSON document instead of a line per case")
  ),
  extensions: Flag.Boolean("extensions").pipe(
    Flag.withDefault(false),
    Flag.withDescription("judge the server with our extensions and improvements even if it does not announce them")
  ),
  redirect: Flag.String("redirect").pipe(
    Flag.withDescription("the redirect endpoint the server was started with (Hello must carry it)"),
    Flag.optional
  ),
  caseTimeout: goDuration("case-timeout", "3m").pipe(Flag.withDescription("the longest one case may take")),
  runs: Flag.Int("runs").pipe(
    Flag.withDescription("random sequences the model-based property tries (default 30; 0 leaves it out)"),
    Flag.withDefault(30),
    Flag.filter(
      (n) => n >= 0,
      (n) => `--runs must not be negative, got ${n}`
    )
  ),
  seed: Flag.Int("seed").pipe(
    Flag.withDescription("the property's seed, to run the same sequences again (default: from the clock)"),
    Flag.optional
  ),
  expiryWithin: Flag.String("expiry-within").pipe(
    Flag.withDescription(
      "run the real-time expiry cases (slower): how soon after a TTL passes the server removes the affiliate, its GC interval and a margin (2s for --gc-interval 1s; 1m5s for the original's default)"
    ),
    Flag.optional
  ),
  stopCommand: Flag.String("stop-command").pipe(
    Flag.withDescription(
      'run the shutdown case last: this shell command stops the server gracefully (e.g. "kill -TERM 1234"), and its open watches must end within --stop-within'
    ),
    Flag.optional
  ),
  stopWithin: goDuration("stop-within", "6s").pipe(
    Flag.withDescription("how soon after --stop-command the server's open watches must have ended (the original: 5 s)")
  ),
  replay: Flag.String("replay").pipe(
    Flag.withDescription("replay the failing sequence a previous run saved in this file, and nothing else"),
    Flag.optional
  )
}

/**
 * The property as a line, with the script of a failing sequence.
 *
 * @category rendering
 * @since 0.1.0
 */
export const propertyLine = (result: PropertyResult, savedAt: string | undefined): string => {
  const head = `${result.status === "passed" ? "ok  " : "FAIL"} properties › ${result.name}`
  if (result.status === "passed") return `${head} (${result.runs} runs, seed ${result.seed}, ${result.millis} ms)`
  return [
    `${head}`,
    `       ${result.reason ?? "failed"}`,
    `       smallest failing sequence (seed ${result.seed}): ${shown(result.counterexample?.steps)}`,
    savedAt === undefined ? "" : `       replay it with: discovery-service conformance <host:port> --replay ${savedAt}`
  ]
    .filter((line) => line !== "")
    .join("\n")
}

/** Saves a failing sequence where `--replay` reads it; `undefined` when it cannot be written. */
const saveScript = (script: ReplayScript): string | undefined => {
  const path = join(tmpdir(), `discovery-conformance-${script.seed}.json`)
  try {
    writeFileSync(path, `${JSON.stringify(script, null, 2)}\n`)
    return path
  } catch {
    return undefined
  }
}

/**
 * The command.
 *
 * @category constructors
 * @since 0.1.0
 */
export const command = Command.make("conformance", flags, (parsed) =>
  Effect.gen(function* () {
    const write = (text: string) => process.stdout.write(`${text}\n`)
    /** Says why the check could not run (as JSON with `--json`) and exits 2. */
    const cannot = (message: string) =>
      Effect.sync(() => {
        if (parsed.json) write(shown({ target: parsed.target, error: message }))
        else process.stderr.write(`error: ${message}\n`)
        process.exitCode = 2
      })
    const replayFile = Option.getOrUndefined(parsed.replay)
    const script = replayFile === undefined ? undefined : readScript(replayFile)
    if (script instanceof Error) return yield* cannot(script.message)
    const expiryText = Option.getOrUndefined(parsed.expiryWithin)
    const expiryWithin = expiryText === undefined ? undefined : parseGoDuration(expiryText)
    if (expiryText !== undefined && (expiryWithin === undefined || Duration.isNegative(expiryWithin))) {
      return yield* cannot(`--expiry-within: ${JSON.stringify(expiryText)} is not a duration (examples: 2s, 1m5s)`)
    }
    const ca = Option.getOrUndefined(parsed.ca)
    const reached = yield* Effect.result(
      remoteTarget({
        endpoint: parsed.target,
        tls: ca === undefined ? parsed.tls : { ca: readFileSync(ca) },
        extensions: parsed.extensions ? true : undefined,
        caseTimeoutMillis: Duration.toMillis(parsed.caseTimeout),
        expiryWithinMillis: expiryWithin === undefined ? undefined : Duration.toMillis(expiryWithin)
      })
    )
    if (reached._tag === "Failure") {
      const error = reached.failure
      return yield* cannot(`cannot reach ${parsed.target}: ${"message" in error ? error.message : String(error)}`)
    }
    const { target, extensions } = reached.success
    const stopCommand = Option.getOrUndefined(parsed.stopCommand)
    const cases = contractCases({
      ...target,
      redirectEndpoint: Option.getOrUndefined(parsed.redirect),
      stop:
        stopCommand === undefined
          ? undefined
          : { run: runShell(stopCommand), withinMillis: Duration.toMillis(parsed.stopWithin) }
    })
    const only = Option.getOrUndefined(parsed.only)
    const withProperty = parsed.runs > 0 && picked({ group: "properties", name: modelPropertyName }, only)
    if (script === undefined && !withProperty && !cases.some((one) => picked(one, only))) {
      return yield* cannot(`--only ${JSON.stringify(only)} selects no case and no property`)
    }
    if (!parsed.json) {
      write(
        `checking ${parsed.target} (${extensions ? "with our extensions" : "the original protocol: it announces no extensions"})`
      )
    }
    const results =
      script !== undefined
        ? []
        : yield* runCases(cases, { only, onResult: parsed.json ? undefined : (result) => write(caseLine(result)) })
    const properties: Array<PropertyResult & { readonly savedAt?: string | undefined }> = []
    if (script !== undefined) properties.push(yield* replayScript(target.layer, script))
    else if (withProperty) {
      const checked = yield* checkModelProperty(target.layer, {
        runs: parsed.runs,
        seed: Option.getOrUndefined(parsed.seed)
      })
      properties.push({
        ...checked,
        savedAt: checked.counterexample === undefined ? undefined : saveScript(checked.counterexample)
      })
    }
    if (!parsed.json) for (const property of properties) write(propertyLine(property, property.savedAt))
    const summary = summarize(results)
    const propertiesHold = properties.every((property) => property.status === "passed")
    if (parsed.json) {
      write(
        shown({
          target: parsed.target,
          extensions,
          summary: { ...summary, holds: summary.holds && propertiesHold },
          results,
          properties
        })
      )
    } else {
      write(
        `${summary.passed} passed, ${summary.failed} failed, ${summary.skipped} skipped, ${summary.differs} differ from the original by design; ` +
          `${properties.filter((property) => property.status === "passed").length} of ${properties.length} properties hold`
      )
    }
    if (!summary.holds || !propertiesHold) process.exitCode = 1
  })
).pipe(
  Command.withDescription(
    "Checks a discovery server against the protocol over gRPC: each case of the conformance kit passes, fails (with what was expected and what came), is skipped (with why) or differs from the original by design; then random sequences of updates, deletes, lists and watches are checked against a reference model, a failing one shrunk and saved for --replay. Exits 0 only when no case failed and the property holds, 1 when one did not, 2 when the check could not run, 130 when interrupted."
  )
)
