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
 * A snapshot made piece by piece: called once with `emit`, it hands over the
 * snapshot's bytes in order, synchronously, in one step. Each piece belongs to
 * the store once emitted.
 *
 * @category models
 * @since 0.1.0
 */
export type SnapshotWriter = (emit: (piece: Uint8Array) => void) => void

/**
 * The pieces of a snapshot, in order: the bytes themselves, or what the writer
 * emits when called now.
 *
 * @category utils
 * @since 0.1.0
 */
export const snapshotPieces = (snapshot: Uint8Array | SnapshotWriter): Array<Uint8Array> => {
  if (snapshot instanceof Uint8Array) return [snapshot]
  const pieces: Array<Uint8Array> = []
  snapshot((piece) => pieces.push(piece))
  return pieces
}

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
     * Replaces the snapshot with these bytes, or with what the writer emits,
     * all or nothing: when the save fails or is interrupted, the previous
     * snapshot stays as it was. Empty bytes are a valid snapshot (no
     * clusters). A writer is called exactly once; the store may start writing
     * each piece while the writer makes the next.
     */
    readonly save: (snapshot: Uint8Array | SnapshotWriter) => Effect.Effect<void, SnapshotStoreError>
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
      save: (snapshot) =>
        Effect.sync(() => {
          const pieces = snapshotPieces(snapshot)
          const bytes = new Uint8Array(pieces.reduce((size, piece) => size + piece.length, 0))
          let offset = 0
          for (const piece of pieces) {
            bytes.set(piece, offset)
            offset += piece.length
          }
          current = bytes
        }),
      moveAside: Effect.sync(() => {
        if (current === undefined) return Option.none()
        current = undefined
        return Option.some(`memory.corrupt-${++movedAside}`)
      })
    })
  })
