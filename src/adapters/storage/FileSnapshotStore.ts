/**
 * The snapshot kept in a file, replaced atomically: a save writes
 * `<path>.tmp`, fsyncs it, renames it over `<path>` and fsyncs the directory,
 * so after a crash at any point the file holds either the previous snapshot or
 * the new one, never a mix. A failed save removes its temporary file and
 * leaves the previous snapshot as it was. A damaged snapshot is moved aside to
 * `<path>.corrupt-<UTC timestamp>` rather than overwritten.
 *
 * A save writes each piece at its own offset while the encoder makes the
 * next (the encoder reuses two small buffers in turn), off the main thread,
 * so the event loop serves calls between pieces and a stuck disk holds up
 * only the save; it asks the device
 * to start writing every 16 MiB, so the final fsync finds little left to do.
 * A snapshot can also be read in pieces, through one reused buffer.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs/promises"
import { homedir } from "node:os"
import { dirname, join } from "node:path"
import { Clock, Effect, Layer, Option, Semaphore } from "effect"
import type { SnapshotPieces, SnapshotReader } from "../../ports/SnapshotStore.ts"
import { SnapshotStore, SnapshotStoreError } from "../../ports/SnapshotStore.ts"

/**
 * An open file as the store uses it: the calls of Node's `FileHandle` that a
 * save and a read make.
 *
 * @category models
 * @since 0.1.0
 */
export interface FileHandleOps {
  /** Reads up to `length` bytes from the file's current position into `buffer` at `offset`; returns how many (0 at the end). */
  read(buffer: Uint8Array, offset: number, length: number): Promise<number>
  /** Writes `buffer[offset, offset + length)` at file offset `position`; resolves to how many bytes were written. */
  write(buffer: Uint8Array, offset: number, length: number, position: number): Promise<number>
  /** Starts writing what the file holds so far to the device (`fdatasync`), so the final `sync` has less left to do. */
  datasync(): Promise<void>
  sync(): Promise<void>
  close(): Promise<void>
}

/**
 * The file system calls the store makes (a subset of `node:fs/promises`);
 * tests replace them to inject failures.
 *
 * @category models
 * @since 0.1.0
 */
export interface FileSystemOps {
  readonly mkdir: (path: string, options: { readonly recursive: true; readonly mode: number }) => Promise<unknown>
  readonly open: (path: string, flags: string, mode?: number) => Promise<FileHandleOps>
  readonly rename: (from: string, to: string) => Promise<void>
  readonly unlink: (path: string) => Promise<void>
  readonly readFile: (path: string) => Promise<Uint8Array>
  readonly access: (path: string) => Promise<void>
  /** What kind of entry a path is; without it every existing path counts as a file. */
  readonly stat?: ((path: string) => Promise<{ readonly isFile: () => boolean }>) | undefined
}

/** Most bytes asked of one read call (Linux caps a read just below 2 GiB). */
const maxRead = 1 << 30

/**
 * A whole file in one plain `Uint8Array`, read in as few calls as the kernel
 * allows: `fs.readFile` reads 512 KiB per call and returns a `Buffer`, whose
 * `subarray` is slower for the snapshot decoder. A file that grows while it is
 * read is read to its end.
 */
const readWhole = async (path: string): Promise<Uint8Array> => {
  const handle = await fs.open(path, "r")
  try {
    let bytes = new Uint8Array((await handle.stat()).size)
    let length = 0
    for (;;) {
      if (length === bytes.length) {
        const probe = new Uint8Array(1 << 16)
        const { bytesRead } = await handle.read(probe, 0, probe.length, null)
        if (bytesRead === 0) return bytes
        const grown = new Uint8Array(Math.max(2 * bytes.length, length + bytesRead))
        grown.set(bytes.subarray(0, length))
        grown.set(probe.subarray(0, bytesRead), length)
        bytes = grown
        length += bytesRead
        continue
      }
      const { bytesRead } = await handle.read(bytes, length, Math.min(bytes.length - length, maxRead), null)
      if (bytesRead === 0) return bytes.subarray(0, length)
      length += bytesRead
    }
  } finally {
    await handle.close()
  }
}

/**
 * Node's file system.
 *
 * @category models
 * @since 0.1.0
 */
export const nodeFileSystem: FileSystemOps = {
  mkdir: (path, options) => fs.mkdir(path, options),
  open: async (path, flags, mode) => {
    const handle = await fs.open(path, flags, mode)
    return {
      read: async (buffer, offset, length) => (await handle.read(buffer, offset, length, null)).bytesRead,
      write: async (buffer, offset, length, position) =>
        (await handle.write(buffer, offset, length, position)).bytesWritten,
      datasync: () => handle.datasync(),
      sync: () => handle.sync(),
      close: () => handle.close()
    }
  },
  rename: (from, to) => fs.rename(from, to),
  unlink: (path) => fs.unlink(path),
  readFile: readWhole,
  access: (path) => fs.access(path),
  stat: (path) => fs.stat(path)
}

/**
 * Where the store keeps its file.
 *
 * @category models
 * @since 0.1.0
 */
export interface FileStoreOptions {
  /** The snapshot file (default {@link defaultPath}). Its directory is created when missing. */
  readonly path?: string | undefined
  /** The file system to use (default Node's); for tests. */
  readonly fileSystem?: FileSystemOps | undefined
  /** Bytes written between two early flushes of a save (default 16 MiB). */
  readonly flushEvery?: number | undefined
}

/**
 * The default snapshot file, writable without root:
 * `$XDG_STATE_HOME/discovery-service/state.binpb`, or
 * `~/.local/state/discovery-service/state.binpb` when `XDG_STATE_HOME` is not
 * an absolute path. (The original uses `/var/discovery-service/state.binpb`.)
 *
 * @category models
 * @since 0.1.0
 */
export const defaultPath = (
  env: Readonly<Record<string, string | undefined>> = process.env,
  home: string = homedir()
): string => {
  const stateHome = env.XDG_STATE_HOME
  const base = stateHome?.startsWith("/") ? stateHome : join(home, ".local", "state")
  return join(base, "discovery-service", "state.binpb")
}

/**
 * Bytes read per call when a snapshot is read in pieces: one buffer of this
 * size, reused, instead of one the size of the file (whose fresh pages cost
 * more to fault in than the reads themselves).
 */
const readPieceBytes = 8 << 20

/**
 * Hands a file to `reader` piece by piece, from its current position to its
 * end (a file that grows while it is read is read to its end). The bytes the
 * reader leaves come again before the next piece; the buffer doubles when
 * the reader consumes nothing of a full one, and is released at the end.
 */
const readInPieces = async (handle: FileHandleOps, reader: SnapshotReader): Promise<void> => {
  let buffer = new Uint8Array(readPieceBytes)
  let held = 0
  for (;;) {
    if (held === buffer.length) {
      const grown = new Uint8Array(2 * buffer.length)
      grown.set(buffer)
      buffer = grown
    }
    const bytesRead = await handle.read(buffer, held, buffer.length - held)
    const end = held + bytesRead
    const final = bytesRead === 0
    const stop = reader(buffer.subarray(0, end), final)
    if (final) {
      // Freed now rather than at some later full collection: the reader holds no view past its call.
      buffer.buffer.transfer(0)
      return
    }
    buffer.copyWithin(0, stop, end)
    held = end - stop
  }
}

/** Largest single write call, so one huge snapshot is written in steps. */
const chunkSize = 16 << 20

const ignore = (): void => {}

/**
 * Bytes written between two early flushes by default: the device writes the
 * start of a snapshot while the rest is still being encoded, instead of all
 * of it in the final fsync.
 */
const defaultFlushEvery = 16 << 20

const errorCode = (error: unknown): string | undefined =>
  typeof error === "object" && error !== null && "code" in error ? String(error.code) : undefined

const describe = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/** Codes of file systems or platforms that cannot fsync a directory; the rename is then as durable as they allow. */
const directorySyncUnsupported = new Set(["EISDIR", "EINVAL", "ENOTSUP", "EPERM", "EACCES", "EBADF"])

/** `20240131T235959.123Z`: an ISO 8601 UTC instant that is safe in a file name. */
const fileTimestamp = (millis: number): string => new Date(millis).toISOString().replace(/[-:]/g, "")

/**
 * Builds a store over one file.
 *
 * @category constructors
 * @since 0.1.0
 */
export const make = (options: FileStoreOptions = {}) =>
  Effect.gen(function* () {
    const path = options.path ?? defaultPath()
    const files = options.fileSystem ?? nodeFileSystem
    const flushEvery = options.flushEvery ?? defaultFlushEvery
    const directory = dirname(path)
    const temporary = `${path}.tmp`
    // One save at a time: two saves must never share the temporary file.
    const lock = yield* Semaphore.make(1)
    // A temporary file left by a crash mid-save is never the good state: remove it now.
    yield* Effect.promise(() => files.unlink(temporary).catch(() => undefined))

    /**
     * Writes the snapshot from the start of the file, each piece at its own
     * offset while the next one is made (a piece is only valid until the one
     * after the next is asked for), and asks the device to start writing
     * every `flushEvery` bytes. Every write and early flush has ended when
     * this returns or throws; a failed flush fails the save, since the final
     * fsync may no longer report its error.
     */
    const writeSnapshot = async (handle: FileHandleOps, snapshot: Uint8Array | SnapshotPieces) => {
      const flushes: Array<Promise<void>> = []
      let completed = 0
      let flushed = 0
      const writeAt = async (piece: Uint8Array, position: number) => {
        let offset = 0
        while (offset < piece.length) {
          const length = Math.min(chunkSize, piece.length - offset)
          const bytesWritten = await handle.write(piece, offset, length, position + offset)
          if (bytesWritten <= 0) throw new Error(`write made no progress at byte ${position + offset}`)
          offset += bytesWritten
          completed += bytesWritten
          if (completed - flushed >= flushEvery) {
            flushed = completed
            flushes.push(handle.datasync())
          }
        }
      }
      let previous: Promise<void> = Promise.resolve()
      let failure: { readonly error: unknown } | undefined
      try {
        let position = 0
        for (const piece of snapshot instanceof Uint8Array ? [snapshot] : snapshot) {
          const current = writeAt(piece, position)
          // Handled now, awaited below: a write that fails while the previous one is awaited is no unhandled rejection.
          current.catch(ignore)
          position += piece.length
          // The previous piece must be written before the next is made in its buffer.
          const waited = previous
          previous = current
          await waited
        }
        await previous
      } catch (error) {
        failure = { error }
      }
      const settled = await Promise.allSettled([previous, ...flushes])
      if (failure !== undefined) throw failure.error
      const failed = settled.find((result) => result.status === "rejected")
      if (failed !== undefined) throw failed.reason
    }

    const syncDirectory = async () => {
      let handle: FileHandleOps
      try {
        handle = await files.open(directory, "r")
      } catch (error) {
        if (directorySyncUnsupported.has(errorCode(error) ?? "")) return
        throw error
      }
      try {
        await handle.sync()
      } catch (error) {
        if (!directorySyncUnsupported.has(errorCode(error) ?? "")) throw error
      } finally {
        await handle.close()
      }
    }

    const writeAtomically = async (snapshot: Uint8Array | SnapshotPieces) => {
      await files.mkdir(directory, { recursive: true, mode: 0o755 })
      const handle = await files.open(temporary, "w", 0o666)
      try {
        try {
          await writeSnapshot(handle, snapshot)
          await handle.sync()
        } finally {
          await handle.close()
        }
        await files.rename(temporary, path)
      } catch (error) {
        await files.unlink(temporary).catch(() => undefined)
        throw error
      }
      await syncDirectory()
    }

    const save = (snapshot: Uint8Array | SnapshotPieces) =>
      Effect.tryPromise({
        try: () => writeAtomically(snapshot),
        catch: (error) => new SnapshotStoreError({ operation: "save", message: `save ${path}: ${describe(error)}` })
      }).pipe(
        // Not interruptible: an abandoned write could otherwise still rename
        // its temporary file after the next save has started writing it.
        Effect.uninterruptible,
        lock.withPermits(1)
      )

    const load = Effect.tryPromise({
      try: async () => {
        try {
          const bytes = await files.readFile(path)
          return Option.some(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength))
        } catch (error) {
          if (errorCode(error) === "ENOENT") return Option.none<Uint8Array>()
          throw error
        }
      },
      catch: (error) => new SnapshotStoreError({ operation: "load", message: `load ${path}: ${describe(error)}` })
    })

    const read = (reader: SnapshotReader) =>
      Effect.tryPromise({
        try: async () => {
          let handle: FileHandleOps
          try {
            handle = await files.open(path, "r")
          } catch (error) {
            if (errorCode(error) === "ENOENT") return false
            throw error
          }
          try {
            await readInPieces(handle, reader)
          } finally {
            await handle.close()
          }
          return true
        },
        catch: (error) => new SnapshotStoreError({ operation: "load", message: `load ${path}: ${describe(error)}` })
      })

    const moveAside = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.tryPromise({
        try: async () => {
          try {
            await files.access(path)
          } catch (error) {
            if (errorCode(error) === "ENOENT") return Option.none<string>()
            throw error
          }
          if (files.stat !== undefined && !(await files.stat(path)).isFile()) {
            throw new Error("it is not a regular file; refusing to move it")
          }
          const base = `${path}.corrupt-${fileTimestamp(now)}`
          for (let attempt = 0; ; attempt++) {
            const target = attempt === 0 ? base : `${base}-${attempt}`
            const taken = await files.access(target).then(
              () => true,
              (error) => {
                if (errorCode(error) === "ENOENT") return false
                throw error
              }
            )
            if (taken) continue
            await files.rename(path, target)
            await syncDirectory()
            return Option.some(target)
          }
        },
        catch: (error) =>
          new SnapshotStoreError({ operation: "moveAside", message: `move ${path} aside: ${describe(error)}` })
      }).pipe(Effect.uninterruptible, lock.withPermits(1))
    )

    return SnapshotStore.of({ location: path, load, read, save, moveAside })
  })

/**
 * The store over one file.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: FileStoreOptions = {}): Layer.Layer<SnapshotStore> =>
  Layer.effect(SnapshotStore, make(options))
