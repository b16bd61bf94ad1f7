import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { makeMemorySnapshotStore, SnapshotStoreError } from "../../src/ports/SnapshotStore.ts"

const failureOf = <A>(exit: Exit.Exit<A, SnapshotStoreError>): SnapshotStoreError | undefined =>
  Exit.isFailure(exit) ? Option.getOrUndefined(Exit.findErrorOption(exit)) : undefined

describe("makeMemorySnapshotStore", () => {
  it.effect("fails the read with a SnapshotStoreError when the reader throws", () =>
    Effect.gen(function* () {
      const store = yield* makeMemorySnapshotStore(new Uint8Array([1, 2, 3]))
      const exit = yield* Effect.exit(
        store.read(() => {
          throw new Error("reader broke")
        })
      )
      const error = failureOf(exit)
      assert.instanceOf(error, SnapshotStoreError)
      assert.include(error?.message, "reader broke")
    })
  )

  it.effect("fails the save with a SnapshotStoreError when the writer throws, keeping the previous snapshot", () =>
    Effect.gen(function* () {
      const store = yield* makeMemorySnapshotStore(new Uint8Array([1, 2, 3]))
      const exit = yield* Effect.exit(
        store.save(
          (function* () {
            yield new Uint8Array([9])
            throw new Error("writer broke")
          })()
        )
      )
      const error = failureOf(exit)
      assert.instanceOf(error, SnapshotStoreError)
      assert.include(error?.message, "writer broke")
      const kept = yield* store.load
      assert.deepStrictEqual(Option.getOrUndefined(kept), new Uint8Array([1, 2, 3]))
    })
  )
})
