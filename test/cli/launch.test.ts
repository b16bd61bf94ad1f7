import { dirname, resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import * as HeapTuning from "../../src/cli/heapTuning.ts"

/** `scripts/launch.mjs`, which has no type declarations (the scripts are not type-checked). */
interface Launch {
  readonly cacheDir: string
  readonly heapFlags: ReadonlyArray<string>
  readonly bundlePath: () => string
}

const launch = (await import(pathToFileURL(resolve(import.meta.dirname, "../../scripts/launch.mjs")).href)) as Launch

describe("launch", () => {
  it("sets the same V8 flags as the executable", () => {
    assert.deepStrictEqual(launch.heapFlags, HeapTuning.flags)
  })

  it("names a CommonJS bundle in the cache folder after the inputs as they are", () => {
    const path = launch.bundlePath()
    assert.strictEqual(dirname(path), launch.cacheDir)
    assert.match(path, /discovery-service-[0-9a-f]{16}\.cjs$/)
    assert.strictEqual(launch.bundlePath(), path)
  })
})
