/**
 * Where the service keeps its state snapshot between runs: one byte string,
 * replaced all at once. The core encodes and decodes the bytes; a store only
 * keeps them safe (a file written atomically, or memory in tests).
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option, Schema } from "effect"

/**
 * The pieces, one after the other, in new bytes of their own.
 *
 * @category utils
 * @since 0.1.0
 */
export const joinPieces = (pieces: ReadonlyArray<Uint8Array>): Uint8Array => {
  const bytes = new Uint8Array(pieces.reduce((size, piece) => size + piece.length, 0))
  let offset = 0
  for (const piece of pieces) {
    bytes.set(piece, offset)
    offset += piece.length
  }
  return bytes
}

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
 * A snapshot made piece by piece as it is iterated, once: its bytes in order.
 * A piece stays valid until the piece after the next one is asked for (the
 * encoder reuses two buffers in turn), so a store may write one piece while
 * the next is made, and has written or copied it before asking for the one
 * after; it may let other work run in between.
 *
 * @category models
 * @since 0.1.0
 */
export type SnapshotPieces = Iterable<Uint8Array>

/**
 * Reads a snapshot as it arrives: called with the bytes not consumed yet
 * (those it left last time, then more of the snapshot; a view valid only
 * during the call), it consumes a prefix and returns its length. The call
 * with `final` set holds everything that is left and must consume it all.
 *
 * @category models
 * @since 0.1.0
 */
export type SnapshotReader = (bytes: Uint8Array, final: boolean) => number

const messageOf = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))

/**
 * The pieces of a snapshot, in order: the bytes themselves, or copies of the
 * pieces made now.
 *
 * @category utils
 * @since 0.1.0
 */
export const snapshotPieces = (snapshot: Uint8Array | SnapshotPieces): Array<Uint8Array> =>
  snapshot instanceof Uint8Array ? [snapshot] : Array.from(snapshot, (piece) => piece.slice())

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
     * The last snapshot saved, whole, or `None` when there is none yet (for
     * tools and tests; the service starts from `read`). The bytes are handed
     * over: the caller may detach their buffer once it has read them, so
     * return bytes no one else uses.
     */
    readonly load: Effect.Effect<Option.Option<Uint8Array>, SnapshotStoreError>
    /**
     * Hands the last snapshot saved to `reader` as it is read, in pieces of
     * the store's choosing (so a large snapshot never needs a buffer of its
     * size), and returns whether there was one. A reader that throws fails
     * the read as a read error does. The service loads its state through it
     * at start.
     */
    readonly read: (reader: SnapshotReader) => Effect.Effect<boolean, SnapshotStoreError>
    /**
     * Replaces the snapshot with these bytes, or with these pieces, all or
     * nothing: when the save fails or is interrupted, the previous snapshot
     * stays as it was. Empty bytes are a valid snapshot (no clusters). The
     * pieces are iterated once, each written or copied before the one after
     * the next is asked for.
     */
    readonly save: (snapshot: Uint8Array | SnapshotPieces) => Effect.Effect<void, SnapshotStoreError>
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
      read: (reader) =>
        Effect.try({
          try: () => {
            if (current === undefined) return false
            reader(current.slice(), true)
            return true
          },
          catch: (cause) => new SnapshotStoreError({ operation: "load", message: messageOf(cause) })
        }),
      save: (snapshot) =>
        Effect.try({
          try: () => {
            current = joinPieces(snapshotPieces(snapshot))
          },
          catch: (cause) => new SnapshotStoreError({ operation: "save", message: messageOf(cause) })
        }),
      moveAside: Effect.sync(() => {
        if (current === undefined) return Option.none()
        current = undefined
        return Option.some(`memory.corrupt-${++movedAside}`)
      })
    })
  })
