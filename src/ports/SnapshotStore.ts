/**
 * Where the service keeps its state snapshot between runs: one byte string,
 * replaced all at once. The core encodes and decodes the bytes; a store only
 * keeps them safe (a file written atomically, or memory in tests).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option, Schema } from "effect"

/**
 * A snapshot could not be read, written or moved aside. The message names the
 * location and the cause.
 *
 * @category errors
 * @since 0.1.0
 */
export class SnapshotStoreError extends Schema.TaggedError<SnapshotStoreError>()("SnapshotStoreError", {
  operation: Schema.Literals(["load", "save", "moveAside"]),
  message: Schema.String
}) {}

/**
 * Loads and saves the snapshot as bytes.
 *
 * @category services
 * @since 0.1.0
 */
export class SnapshotStore extends Context.Service<
  SnapshotStore,
  {
    /** Where the snapshot lives, for logs (a file path, or `memory`). */
    readonly location: string
    /**
     * The last snapshot saved, or `None` when there is none yet. The bytes are
     * handed over: the caller may detach their buffer once it has read them,
     * so return bytes no one else uses.
     */
    readonly load: Effect.Effect<Option.Option<Uint8Array>, SnapshotStoreError>
    /**
     * Replaces the snapshot with these bytes, all or nothing: when the save
     * fails or is interrupted, the previous snapshot stays as it was. Empty
     * bytes are a valid snapshot (no clusters). The store must not keep the
     * bytes once the save succeeded (copy them if it needs them): the caller
     * may then detach their buffer.
     */
    readonly save: (bytes: Uint8Array) => Effect.Effect<void, SnapshotStoreError>
    /**
     * Moves the current snapshot out of the way (it was found damaged or
     * unreadable) so that the next save does not destroy it. Returns where it
     * went, or `None` when there was nothing to move.
     */
    readonly moveAside: Effect.Effect<Option.Option<string>, SnapshotStoreError>
  }
>()("talos-discovery/SnapshotStore") {
  /**
   * A store in memory, optionally starting with `initial` bytes. Snapshots
   * moved aside are kept in memory too, named `memory.corrupt-<n>`.
   */
  static readonly layerMemory = (initial?: Uint8Array): Layer.Layer<SnapshotStore> =>
    Layer.effect(SnapshotStore, makeMemorySnapshotStore(initial))
}

/**
 * Builds an in-memory store, optionally starting with `initial` bytes. Saved
 * bytes are copied, so the caller may reuse its buffer.
 *
 * @category constructors
 * @since 0.1.0
 */
export const makeMemorySnapshotStore = (
  initial?: Uint8Array
): Effect.Effect<Context.Service.Shape<typeof SnapshotStore>> =>
  Effect.sync(() => {
    let current: Uint8Array | undefined = initial?.slice()
    let movedAside = 0
    return SnapshotStore.of({
      location: "memory",
      load: Effect.sync(() => Option.fromUndefinedOr(current?.slice())),
      save: (bytes) =>
        Effect.sync(() => {
          current = bytes.slice()
        }),
      moveAside: Effect.sync(() => {
        if (current === undefined) return Option.none()
        current = undefined
        return Option.some(`memory.corrupt-${++movedAside}`)
      })
    })
  })
