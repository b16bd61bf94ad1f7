import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { dirname, join } from "node:path"
import { fromBinary } from "@bufbuild/protobuf"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option } from "effect"
import { TestClock } from "effect/testing"
import type { FileHandleOps, FileSystemOps } from "../../src/adapters/storage/FileSnapshotStore.ts"
import * as FileSnapshotStore from "../../src/adapters/storage/FileSnapshotStore.ts"
import { decode, encode, SnapshotDecoder } from "../../src/core/server/SnapshotCodec.ts"
import { StateSnapshotSchema } from "../../src/gen/discovery/storage/discovery_pb.ts"
import { SnapshotStore } from "../../src/ports/SnapshotStore.ts"
import {
  affiliateEntry,
  clusterEntry,
  concat,
  endpointEntry,
  now,
  plainState,
  tempDirsForTests,
  utf8
} from "./fixtures/snapshots.ts"

const newDir = tempDirsForTests()

const stateA = encode(
  [clusterEntry("a", [affiliateEntry("x", utf8("data-a"), 60, [endpointEntry(utf8("e"), 30)])])],
  now
).bytes
const stateB = encode([clusterEntry("b", [affiliateEntry("y", new Uint8Array(300_000).fill(7), 90)])], now).bytes

type Step = "write" | "datasync" | "sync" | "close" | "rename" | "mkdir" | "open"

/** Node's file system, failing at `step` when saving the temporary file; a failing write first writes half its bytes. */
const failingAt = (step: Step): FileSystemOps => {
  const real = FileSnapshotStore.nodeFileSystem
  const boom = () => Object.assign(new Error(`injected ${step} failure`), { code: "EIO" })
  const wrap = (handle: FileHandleOps): FileHandleOps => ({
    read: (buffer, offset, length) => handle.read(buffer, offset, length),
    write: async (buffer, offset, length, position) => {
      if (step !== "write") return handle.write(buffer, offset, length, position)
      await handle.write(buffer, offset, Math.floor(length / 2), position)
      throw boom()
    },
    datasync: () => (step === "datasync" ? Promise.reject(boom()) : handle.datasync()),
    sync: () => (step === "sync" ? Promise.reject(boom()) : handle.sync()),
    close: async () => {
      await handle.close()
      if (step === "close") throw boom()
    }
  })
  return {
    ...real,
    mkdir: (path, options) => (step === "mkdir" ? Promise.reject(boom()) : real.mkdir(path, options)),
    open: async (path, flags, mode) => {
      if (!path.endsWith(".tmp")) return real.open(path, flags, mode)
      if (step === "open") throw boom()
      return wrap(await real.open(path, flags, mode))
    },
    rename: (from, to) => (step === "rename" && from.endsWith(".tmp") ? Promise.reject(boom()) : real.rename(from, to))
  }
}

/** One file system call of a save: `what` names the call and its file, `phase` whether it starts or has ended. */
interface Call {
  readonly what: string
  readonly phase: "call" | "ended"
}

/**
 * Node's file system, recording every call and the end of every call in
 * order, files named by their role: `temp`, `snapshot`, `directory`.
 */
const recording = (calls: Array<Call>, path: string): FileSystemOps => {
  const real = FileSnapshotStore.nodeFileSystem
  const role = (file: string) =>
    file === path ? "snapshot" : file === `${path}.tmp` ? "temp" : file === dirname(path) ? "directory" : file
  const record = async <A>(what: string, run: () => Promise<A>): Promise<A> => {
    calls.push({ what, phase: "call" })
    const result = await run()
    calls.push({ what: `${what} ended`, phase: "ended" })
    return result
  }
  const wrap = (handle: FileHandleOps, name: string): FileHandleOps => ({
    read: (buffer, offset, length) => record(`read ${name}`, () => handle.read(buffer, offset, length)),
    write: (buffer, offset, length, position) =>
      record(`write ${name}`, () => handle.write(buffer, offset, length, position)),
    datasync: () => record(`datasync ${name}`, () => handle.datasync()),
    sync: () => record(`sync ${name}`, () => handle.sync()),
    close: () => record(`close ${name}`, () => handle.close())
  })
  return {
    ...real,
    mkdir: (file, options) => record(`mkdir ${role(file)}`, () => real.mkdir(file, options)),
    open: async (file, flags, mode) =>
      wrap(await record(`open ${role(file)}`, () => real.open(file, flags, mode)), role(file)),
    rename: (from, to) => record(`rename ${role(from)} to ${role(to)}`, () => real.rename(from, to)),
    unlink: (file) => record(`unlink ${role(file)}`, () => real.unlink(file))
  }
}

describe("FileSnapshotStore", () => {
  it.effect("T32: saves a file that decodes to the snapshot, loads it back, and overwrites it after a change", () =>
    Effect.gen(function* () {
      const path = join(newDir(), "nested", "dir", "state.binpb")
      const store = yield* FileSnapshotStore.make({ path })
      assert.strictEqual(store.location, path)
      assert.isTrue(Option.isNone(yield* store.load))

      yield* store.save(stateA)
      assert.deepStrictEqual(
        plainState(fromBinary(StateSnapshotSchema, readFileSync(path))),
        plainState(fromBinary(StateSnapshotSchema, stateA))
      )
      assert.deepStrictEqual(Option.getOrThrow(yield* store.load), stateA)

      yield* store.save(stateB)
      assert.deepStrictEqual(Option.getOrThrow(yield* store.load), stateB)
      assert.isFalse(existsSync(`${path}.tmp`))
    })
  )

  it.effect("writes an empty snapshot as an empty file, replacing the old one (Q13)", () =>
    Effect.gen(function* () {
      const path = join(newDir(), "state.binpb")
      const store = yield* FileSnapshotStore.make({ path })
      yield* store.save(stateA)
      yield* store.save(new Uint8Array(0))
      assert.strictEqual(readFileSync(path).length, 0)
      assert.deepStrictEqual(Option.getOrThrow(yield* store.load), new Uint8Array(0))
    })
  )

  for (const step of ["write", "datasync", "sync", "close", "rename", "open", "mkdir"] as const) {
    it.effect(`keeps the previous file intact when the save fails at ${step}`, () =>
      Effect.gen(function* () {
        const dir = newDir()
        const path = join(dir, "state.binpb")
        yield* (yield* FileSnapshotStore.make({ path })).save(stateA)
        const failing = yield* FileSnapshotStore.make({ path, fileSystem: failingAt(step), flushEvery: 4096 })
        const exit = yield* Effect.exit(failing.save(stateB))
        assert.isTrue(Exit.isFailure(exit))
        const error = Exit.findErrorOption(exit)
        assert.isTrue(Option.isSome(error))
        const failure = Option.getOrThrow(error)
        assert.strictEqual(failure._tag, "SnapshotStoreError")
        assert.strictEqual(failure.operation, "save")
        assert.include(failure.message, `injected ${step} failure`)
        assert.include(failure.message, path)
        assert.deepStrictEqual(new Uint8Array(readFileSync(path)), stateA)
        assert.deepStrictEqual(readdirSync(dir), ["state.binpb"])
      })
    )
  }

  it.effect(
    "makes a save durable in order: file synced after its writes, closed, renamed, then the directory synced",
    () =>
      Effect.gen(function* () {
        const dir = newDir()
        const path = join(dir, "state.binpb")
        const calls: Array<Call> = []
        const store = yield* FileSnapshotStore.make({ path, fileSystem: recording(calls, path), flushEvery: 4096 })
        calls.length = 0
        yield* store.save(
          (function* () {
            for (let i = 0; i < 5; i++) yield new Uint8Array(3000).fill(i)
          })()
        )
        assert.strictEqual(readFileSync(path).length, 15_000)

        const first = (what: string) => calls.findIndex((call) => call.what === what)
        const last = (what: string) => calls.findLastIndex((call) => call.what === what)
        const every = (op: string) => calls.filter((call) => call.what.startsWith(`${op} `))
        assert.deepStrictEqual(
          calls
            .filter(
              (call) => call.phase === "call" && !call.what.startsWith("write ") && !call.what.startsWith("datasync ")
            )
            .map((call) => call.what),
          [
            "mkdir directory",
            "open temp",
            "sync temp",
            "close temp",
            "rename temp to snapshot",
            "open directory",
            "sync directory",
            "close directory"
          ]
        )
        assert.isAbove(every("write temp").length, 0)
        assert.isAbove(every("datasync temp").length, 0, "early flushes happen")
        assert.isBelow(last("write temp ended"), first("sync temp"), "the file is synced after its last write")
        assert.isBelow(last("datasync temp ended"), first("sync temp"), "and after every early flush")
        assert.isBelow(first("sync temp ended"), first("close temp"), "then closed")
        assert.isBelow(first("close temp ended"), first("rename temp to snapshot"), "then renamed")
        assert.isBelow(first("rename temp to snapshot ended"), first("open directory"), "then the directory is opened")
        assert.isBelow(first("open directory ended"), first("sync directory"))
        assert.isBelow(first("sync directory ended"), first("close directory"))
        const syncs = calls.filter((call) => call.phase === "call" && /^(data)?sync /.test(call.what))
        assert.strictEqual(syncs.at(-1)?.what, "sync directory", "the directory sync is the last sync")
        assert.strictEqual(calls.at(-1)?.what, "close directory ended")
      })
  )

  it.effect(
    "writes each piece before asking for the one after the next, so the encoder may reuse two buffers, and flushes early",
    () =>
      Effect.gen(function* () {
        const dir = newDir()
        const path = join(dir, "state.binpb")
        let flushes = 0
        const counting: FileSystemOps = {
          ...FileSnapshotStore.nodeFileSystem,
          open: async (file, flags, mode) => {
            const handle = await FileSnapshotStore.nodeFileSystem.open(file, flags, mode)
            return {
              ...handle,
              datasync: () => {
                flushes++
                return handle.datasync()
              }
            }
          }
        }
        const store = yield* FileSnapshotStore.make({ path, fileSystem: counting, flushEvery: 10_000 })
        const sizes = Array.from({ length: 40 }, (_, i) => 1000 + i)
        const buffers = [new Uint8Array(2000), new Uint8Array(2000)]
        yield* store.save(
          (function* () {
            for (const [i, size] of sizes.entries()) yield buffers[i % 2]!.fill(i).subarray(0, size)
          })()
        )
        const expected = Uint8Array.from(sizes.flatMap((size, i) => Array.from({ length: size }, () => i)))
        assert.deepStrictEqual(new Uint8Array(readFileSync(path)), expected)
        assert.deepStrictEqual(readdirSync(dir), ["state.binpb"])
        assert.strictEqual(flushes, 4, "one per 10,000 bytes written")
      })
  )

  it.effect("writes one piece while the next is made, asks for a piece only once the one two before is written", () =>
    Effect.gen(function* () {
      const path = join(newDir(), "state.binpb")
      let written = 0
      let turns = 0
      let pending: NodeJS.Immediate | undefined
      const turn = () => {
        turns++
        pending = setImmediate(turn)
      }
      const slow: FileSystemOps = {
        ...FileSnapshotStore.nodeFileSystem,
        open: async (file, flags, mode) => {
          const handle = await FileSnapshotStore.nodeFileSystem.open(file, flags, mode)
          return {
            ...handle,
            write: async (buffer, offset, length, position) => {
              await new Promise((resolve) => setImmediate(resolve))
              const bytes = await handle.write(buffer, offset, length, position)
              written++
              return bytes
            }
          }
        }
      }
      const store = yield* FileSnapshotStore.make({ path, fileSystem: slow })
      turn()
      const writtenBefore: Array<number> = []
      const turnsBefore: Array<number> = []
      yield* store
        .save(
          (function* () {
            for (let i = 0; i < 6; i++) {
              writtenBefore.push(written)
              turnsBefore.push(turns)
              yield utf8(`piece ${i};`)
            }
          })()
        )
        .pipe(Effect.ensuring(Effect.sync(() => clearImmediate(pending))))
      for (let i = 2; i < 6; i++) assert.isAtLeast(writtenBefore[i]!, i - 1, `pieces written before piece ${i} is made`)
      assert.isBelow(writtenBefore[1]!, 1, "piece 1 is made while piece 0 is written")
      assert.isAbove(turnsBefore[5]!, turnsBefore[0]!, "the event loop runs during the save")
      assert.strictEqual(readFileSync(path, "utf8"), "piece 0;piece 1;piece 2;piece 3;piece 4;piece 5;")
    })
  )

  it.effect("keeps the previous file intact when a piece fails to write or the writer throws", () =>
    Effect.gen(function* () {
      const dir = newDir()
      const path = join(dir, "state.binpb")
      yield* (yield* FileSnapshotStore.make({ path })).save(stateA)
      const failing = yield* FileSnapshotStore.make({ path, fileSystem: failingAt("write") })
      const failedWrite = yield* Effect.exit(
        failing.save(
          (function* () {
            yield stateB
            yield stateB
          })()
        )
      )
      assert.isTrue(Exit.isFailure(failedWrite))
      const store = yield* FileSnapshotStore.make({ path })
      const thrown = yield* Effect.exit(
        store.save(
          (function* () {
            yield stateB
            throw new Error("writer broke")
          })()
        )
      )
      assert.isTrue(Exit.isFailure(thrown))
      assert.include(String(Exit.isFailure(thrown) && Exit.findErrorOption(thrown)), "writer broke")
      assert.deepStrictEqual(new Uint8Array(readFileSync(path)), stateA)
      assert.deepStrictEqual(readdirSync(dir), ["state.binpb"])
    })
  )

  it.effect("moves a file aside under a timestamped name, never over an earlier one", () =>
    Effect.gen(function* () {
      const dir = newDir()
      const path = join(dir, "state.binpb")
      const store = yield* FileSnapshotStore.make({ path })
      assert.isTrue(Option.isNone(yield* store.moveAside))
      yield* TestClock.setTime(Date.UTC(2024, 0, 31, 23, 59, 59, 123))
      writeFileSync(path, "damaged")
      assert.deepStrictEqual(yield* store.moveAside, Option.some(`${path}.corrupt-20240131T235959.123Z`))
      writeFileSync(path, "damaged again")
      assert.deepStrictEqual(yield* store.moveAside, Option.some(`${path}.corrupt-20240131T235959.123Z-1`))
      assert.isFalse(existsSync(path))
      assert.strictEqual(readFileSync(`${path}.corrupt-20240131T235959.123Z`, "utf8"), "damaged")
      assert.strictEqual(readFileSync(`${path}.corrupt-20240131T235959.123Z-1`, "utf8"), "damaged again")
    })
  )

  it("reads a whole file, also one longer than its size said (as files in /proc are)", async () => {
    const path = join(newDir(), "state.binpb")
    const bytes = Uint8Array.from({ length: 200_000 }, (_, i) => i % 251)
    writeFileSync(path, bytes)
    assert.deepStrictEqual(await FileSnapshotStore.nodeFileSystem.readFile(path), bytes)
    const unsized = "/proc/self/cmdline"
    if (existsSync(unsized)) {
      assert.deepStrictEqual(
        await FileSnapshotStore.nodeFileSystem.readFile(unsized),
        new Uint8Array(readFileSync(unsized))
      )
    }
  })

  it.effect("reads a file in pieces, handing back what the reader left, whatever it consumes", () =>
    Effect.gen(function* () {
      const dir = newDir()
      const path = join(dir, "state.binpb")
      const store = yield* FileSnapshotStore.make({ path })
      assert.isFalse(yield* store.read(() => assert.fail("no snapshot to read")))
      const bytes = Uint8Array.from({ length: 20_000_003 }, (_, i) => (i * 7) % 253)
      writeFileSync(path, bytes)
      // Consumes whole blocks of 1000 bytes, then nothing until the end, then everything.
      for (const block of [1000, Number.POSITIVE_INFINITY]) {
        const seen: Array<Uint8Array> = []
        let calls = 0
        assert.isTrue(
          yield* store.read((piece, final) => {
            calls++
            const take = final
              ? piece.length
              : block === Number.POSITIVE_INFINITY
                ? 0
                : piece.length - (piece.length % block)
            seen.push(piece.slice(0, take))
            return take
          })
        )
        assert.isAbove(calls, 2)
        assert.deepStrictEqual(concat(...seen), bytes)
      }
    })
  )

  it.effect("decodes a snapshot read in pieces as it decodes the whole file", () =>
    Effect.gen(function* () {
      const path = join(newDir(), "state.binpb")
      const store = yield* FileSnapshotStore.make({ path })
      const bytes = encode(
        Array.from({ length: 30_000 }, (_, c) =>
          clusterEntry(`cluster-${c}`, [affiliateEntry(`a${c}`, new Uint8Array(300).fill(c % 251), 60)])
        ),
        now
      ).bytes
      yield* store.save(bytes)
      const decoder = new SnapshotDecoder(now)
      assert.isTrue(yield* store.read((piece, final) => decoder.feed(piece, 0, piece.length, final)))
      const inPieces = decoder.result()
      const whole = decode(bytes, now)
      assert.isAbove(bytes.length, 8 << 20, "more than one piece")
      assert.deepStrictEqual(inPieces.skipped, [])
      assert.strictEqual(inPieces.size, bytes.length)
      assert.deepStrictEqual(
        inPieces.clusters.map((c) => [c.id, [...c.affiliates.values()].map((a) => a.unsafeRecord)]),
        whole.clusters.map((c) => [c.id, [...c.affiliates.values()].map((a) => a.unsafeRecord)])
      )
    })
  )

  it.effect("reports an unreadable snapshot as a load error", () =>
    Effect.gen(function* () {
      const dir = newDir()
      const store = yield* FileSnapshotStore.make({ path: dir })
      for (const error of [yield* Effect.flip(store.load), yield* Effect.flip(store.read(() => 0))]) {
        assert.strictEqual(error.operation, "load")
        assert.include(error.message, dir)
      }
    })
  )

  it.effect("serves the port from its layer", () =>
    Effect.gen(function* () {
      const store = yield* SnapshotStore
      yield* store.save(stateA)
      assert.deepStrictEqual(Option.getOrThrow(yield* store.load), stateA)
    }).pipe(Effect.provide(FileSnapshotStore.layer({ path: join(newDir(), "state.binpb") })))
  )

  it("defaults to the XDG state directory, or ~/.local/state", () => {
    assert.strictEqual(
      FileSnapshotStore.defaultPath({ XDG_STATE_HOME: "/xdg" }, "/home/u"),
      "/xdg/discovery-service/state.binpb"
    )
    assert.strictEqual(
      FileSnapshotStore.defaultPath({}, "/home/u"),
      "/home/u/.local/state/discovery-service/state.binpb"
    )
    assert.strictEqual(
      FileSnapshotStore.defaultPath({ XDG_STATE_HOME: "relative" }, "/home/u"),
      "/home/u/.local/state/discovery-service/state.binpb"
    )
  })
})

describe("SnapshotStore.layerMemory", () => {
  it.effect("keeps a copy of the saved bytes and moves them aside", () =>
    Effect.gen(function* () {
      const store = yield* SnapshotStore
      assert.deepStrictEqual(Option.getOrThrow(yield* store.load), utf8("initial"))
      const bytes = utf8("saved")
      yield* store.save(bytes)
      bytes.fill(0)
      assert.deepStrictEqual(Option.getOrThrow(yield* store.load), utf8("saved"))
      const read: Array<[Array<number>, boolean]> = []
      assert.isTrue(
        yield* store.read((piece, final) => {
          read.push([Array.from(piece), final])
          return piece.length
        })
      )
      assert.deepStrictEqual(read, [[Array.from(utf8("saved")), true]])
      // Pieces emitted from a reused buffer are copied while they are emitted.
      const buffer = new Uint8Array(1)
      yield* store.save(
        (function* () {
          for (const byte of utf8("ab")) yield buffer.fill(byte)
        })()
      )
      assert.deepStrictEqual(Option.getOrThrow(yield* store.load), utf8("ab"))
      assert.deepStrictEqual(yield* store.moveAside, Option.some("memory.corrupt-1"))
      assert.isTrue(Option.isNone(yield* store.load))
      assert.isFalse(yield* store.read(() => assert.fail("nothing to read")))
      assert.isTrue(Option.isNone(yield* store.moveAside))
    }).pipe(Effect.provide(SnapshotStore.layerMemory(utf8("initial"))))
  )
})
