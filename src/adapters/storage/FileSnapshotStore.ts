/**
 * The snapshot kept in a file, replaced atomically: a save writes
 * `<path>.tmp`, fsyncs it, renames it over `<path>` and fsyncs the directory,
 * so after a crash at any point the file holds either the previous snapshot or
 * the new one, never a mix. A failed save removes its temporary file and
 * leaves the previous snapshot as it was. A damaged snapshot is moved aside to
 * `<path>.corrupt-<UTC timestamp>` rather than overwritten.
 *
 * @since 0.1.0
 */
import * as fs from "node:fs/promises"
import { homedir } from "node:os"
import { dirname, join } from "node:path"
import { Clock, Effect, Layer, Option, Semaphore } from "effect"
import type { SnapshotWriter } from "../../ports/SnapshotStore.ts"
import { SnapshotStore, SnapshotStoreError } from "../../ports/SnapshotStore.ts"

/**
 * An open file as the store uses it (a subset of Node's `FileHandle`).
 *
 * @category models
 * @since 0.1.0
 */
export interface FileHandleOps {
  /** Writes at `position`, or at the file's current position when it is `null`. */
  write(
    buffer: Uint8Array,
    offset: number,
    length: number,
    position: number | null
  ): Promise<{ readonly bytesWritten: number }>
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
  open: (path, flags, mode) => fs.open(path, flags, mode),
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

/** Largest single write call, so one huge snapshot is written in steps. */
const chunkSize = 16 << 20

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
    const directory = dirname(path)
    const temporary = `${path}.tmp`
    // One save at a time: two saves must never share the temporary file.
    const lock = yield* Semaphore.make(1)
    // A temporary file left by a crash mid-save is never the good state: remove it now.
    yield* Effect.promise(() => files.unlink(temporary).catch(() => undefined))

    /** Writes `bytes` at `position` of the file, `chunkSize` bytes per call at most. */
    const writeAll = async (handle: FileHandleOps, bytes: Uint8Array, position: number) => {
      let offset = 0
      while (offset < bytes.length) {
        const length = Math.min(chunkSize, bytes.length - offset)
        const { bytesWritten } = await handle.write(bytes, offset, length, position + offset)
        if (bytesWritten <= 0) throw new Error(`write made no progress at byte ${position + offset}`)
        offset += bytesWritten
      }
    }

    /**
     * Writes the snapshot from the start of the file. A writer's pieces are
     * written as it emits them, each at its own position, so the file system
     * works on one piece while the writer encodes the next; every write has
     * ended when this returns or throws.
     */
    const writeSnapshot = async (handle: FileHandleOps, snapshot: Uint8Array | SnapshotWriter) => {
      if (snapshot instanceof Uint8Array) return writeAll(handle, snapshot, 0)
      const writes: Array<Promise<void>> = []
      let position = 0
      let writerFailure: { readonly error: unknown } | undefined
      try {
        snapshot((piece) => {
          writes.push(writeAll(handle, piece, position))
          position += piece.length
        })
      } catch (error) {
        writerFailure = { error }
      }
      const failed = (await Promise.allSettled(writes)).find((result) => result.status === "rejected")
      if (writerFailure !== undefined) throw writerFailure.error
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

    const writeAtomically = async (snapshot: Uint8Array | SnapshotWriter) => {
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

    const save = (snapshot: Uint8Array | SnapshotWriter) =>
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

    return SnapshotStore.of({ location: path, load, save, moveAside })
  })

/**
 * The store over one file.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (options: FileStoreOptions = {}): Layer.Layer<SnapshotStore> =>
  Layer.effect(SnapshotStore, make(options))
