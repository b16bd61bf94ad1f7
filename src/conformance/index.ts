/**
 * The conformance kit (`talos-discovery/conformance`): the protocol's cases,
 * runnable against any discovery server over gRPC, from the command
 * (`discovery-service conformance <host:port>`) or from another project's
 * test runner (`registerTests` and `registerProperty`, for vitest or node's
 * test runner).
 *
 * @since 0.1.0
 */
import { Effect } from "effect"
import { type ConformanceCase, contractCases } from "./cases.ts"
import { checkModelProperty, modelPropertyName, type PropertyOptions } from "./properties.ts"
import { clientLayer, type RemoteOptions, remoteTarget } from "./remoteTarget.ts"
import { picked, runCase } from "./runner.ts"

export { type ConformanceCase, contractCases } from "./cases.ts"
export { assert } from "./check.ts"
export {
  checkModelProperty,
  modelPropertyName,
  type PropertyOptions,
  type PropertyResult,
  type ReplayScript,
  replayScript
} from "./properties.ts"
export { announcesExtensions, clientLayer, type RemoteOptions, remoteTarget } from "./remoteTarget.ts"
export { type CaseResult, type CaseStatus, type RunOptions, runCase, runCases, summarize } from "./runner.ts"
export type * from "./Target.ts"
export { runSteps, type Step, stepsArbitrary } from "./wireModel.ts"

/**
 * What `registerTests` needs of a test runner: `describe(name, body)` and
 * `test(name, { skip, timeout }, body)`, which vitest and `node:test` both
 * have.
 *
 * @category models
 * @since 0.1.0
 */
export interface TestRunner {
  readonly describe: (name: string, body: () => void) => unknown
  readonly test: (
    name: string,
    options: { readonly skip?: boolean | string | undefined; readonly timeout?: number | undefined },
    body: () => Promise<void>
  ) => unknown
}

/**
 * Registers one test per case for the server of `options`, grouped as the
 * protocol's sections. Registration is synchronous, so the server is judged
 * with our extensions only when `options.extensions` says so (the original
 * protocol otherwise); a case that cannot run there is registered skipped,
 * with why, and a case of our improvements, on the original protocol, is
 * skipped as differing from the original by design.
 *
 * @category constructors
 * @since 0.1.0
 */
export const registerTests = (
  options: RemoteOptions & { readonly only?: string | undefined; readonly redirectEndpoint?: string | undefined },
  runner: TestRunner
): void => {
  const target = Effect.runSync(
    Effect.map(remoteTarget({ ...options, extensions: options.extensions ?? false }), (remote) => remote.target)
  )
  registerCases(contractCases({ ...target, redirectEndpoint: options.redirectEndpoint }), runner, options.only)
}

/**
 * Registers `cases` (of any target) with a test runner. Each case runs on
 * Effect's default services: the time cases of a target whose time control
 * is `TestClock` need `TestClock.layer()` in the target's layer.
 *
 * @category constructors
 * @since 0.1.0
 */
export const registerCases = <R>(
  cases: ReadonlyArray<ConformanceCase<R>>,
  runner: TestRunner,
  only?: string | undefined
): void => {
  const chosen = cases.filter((one) => picked(one, only))
  for (const group of new Set(chosen.map((one) => one.group))) {
    runner.describe(group, () => {
      for (const one of chosen.filter((candidate) => candidate.group === group)) {
        const skip =
          one.unmet.length === 0
            ? false
            : one.improvement && one.unmet.includes("not our server")
              ? "differs from the original by design"
              : one.unmet.join("; ")
        runner.test(one.name, { skip, timeout: one.timeout }, async () => {
          const result = await Effect.runPromise(runCase(one))
          if (result.status === "failed") {
            throw Object.assign(new Error(result.reason ?? "failed"), {
              expected: result.expected,
              actual: result.actual
            })
          }
        })
      }
    })
  }
}

/**
 * Registers the model-based property for the server of `options` as one
 * test: it fails with the shrunk failing sequence, ready for `replayScript`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const registerProperty = (options: RemoteOptions & PropertyOptions, runner: TestRunner): void => {
  runner.describe("properties", () => {
    runner.test(modelPropertyName, { timeout: options.caseTimeoutMillis ?? 600_000 }, async () => {
      const result = await Effect.runPromise(checkModelProperty(clientLayer(options), options))
      if (result.status === "failed") {
        throw new Error(`${result.reason ?? "failed"}\nreplay script: ${JSON.stringify(result.counterexample)}`)
      }
    })
  })
}
