/**
 * The contract suite's targets: the conformance kit's `ContractTarget`.
 *
 * @since 0.1.0
 */
export type * from "../../src/conformance/Target.ts"
