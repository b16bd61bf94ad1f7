/**
 * The contract suite: the conformance kit's cases (`src/conformance/cases.ts`)
 * registered with vitest for one target, grouped as the protocol's sections;
 * a case the target cannot run is registered as skipped, with the reasons in
 * its name.
 *
 * @since 0.1.0
 */
import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { contractCases } from "../../src/conformance/cases.ts"
import type { ContractTarget } from "../../src/conformance/Target.ts"

/** Registers the contract cases for one target inside a `describe` named after it. */
export const clusterApiSuite = <R>(target: ContractTarget<R>): void => {
  const cases = contractCases(target)
  describe(`ClusterApi contract: ${target.name}`, () => {
    for (const group of new Set(cases.map((one) => one.group))) {
      describe(group, () => {
        for (const one of cases.filter((candidate) => candidate.group === group)) {
          if (one.unmet.length > 0) it.effect.skip(`${one.name} [skipped: ${one.unmet.join("; ")}]`, () => Effect.void)
          else it.effect(one.name, () => Effect.scoped(one.run()).pipe(Effect.provide(one.layer)), one.timeout)
        }
      })
    }
  })
}
