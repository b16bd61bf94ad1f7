/**
 * The assertions the conformance cases use, on `node:assert`, so the kit
 * runs without a test framework (the CLI) and inside any of them (vitest,
 * node's test runner): a failed check throws an `AssertionError` carrying
 * what was expected and what came.
 *
 * @since 0.1.0
 */
import * as nodeAssert from "node:assert/strict"

/**
 * The checks, named as chai's `assert` names them.
 *
 * @category assertions
 * @since 0.1.0
 */
export const assert = {
  /** Values equal by structure (typed arrays by their bytes). */
  deepStrictEqual: <A>(actual: unknown, expected: A, message?: string): void =>
    nodeAssert.deepStrictEqual(actual, expected, message),
  /** Values identical (`Object.is`). */
  strictEqual: <A>(actual: unknown, expected: A, message?: string): void =>
    nodeAssert.strictEqual(actual, expected, message),
  /** Always fails. */
  fail: (message: string): never => nodeAssert.fail(message),
  isTrue: (value: unknown, message?: string): void => nodeAssert.strictEqual(value, true, message),
  isFalse: (value: unknown, message?: string): void => nodeAssert.strictEqual(value, false, message),
  isAtMost: (actual: number, limit: number, message?: string): void =>
    nodeAssert.ok(actual <= limit, message ?? `expected ${actual} to be at most ${limit}`),
  isBelow: (actual: number, limit: number, message?: string): void =>
    nodeAssert.ok(actual < limit, message ?? `expected ${actual} to be below ${limit}`)
} as const
