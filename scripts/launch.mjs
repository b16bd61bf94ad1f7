// @ts-check
/**
 * What every start needs before the service's code runs, shared by
 * `start.mjs` and `bundle.ts`: the V8 flags and the name of the start-up
 * bundle for the sources as they are. It is JavaScript because Node strips a
 * `.ts` file's types with a WebAssembly compiler that takes about 30 ms to
 * load; a start that finds its bundle loads no TypeScript at all.
 *
 * @since 0.1.0
 */
import { createHash } from "node:crypto"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join, relative, resolve } from "node:path"

/** The repository root. */
export const root = resolve(import.meta.dirname, "..")

/** Where bundles are written. */
export const cacheDir = resolve(root, "node_modules/.cache/talos-discovery")

/** The V8 flags of `src/cli/heapTuning.ts` (which says why), to set before the program loads. */
export const heapFlags = ["--no-allocation-site-pretenuring"]

/** Files and folders whose content the bundle depends on. */
const inputs = [
  "src",
  "package.json",
  "package-lock.json",
  "node_modules/.package-lock.json",
  "scripts/bundle.ts",
  "scripts/launch.mjs"
]

/**
 * @param {import("node:crypto").Hash} hash
 * @param {string} path
 */
const hashTree = (hash, path) => {
  const stat = statSync(path, { throwIfNoEntry: false })
  if (stat === undefined) return
  hash.update(`\0${relative(root, path)}\0`)
  if (!stat.isDirectory()) {
    hash.update(readFileSync(path))
    return
  }
  for (const entry of readdirSync(path).sort()) hashTree(hash, join(path, entry))
}

/**
 * The bundle for the sources as they are now (a few ms: reads every source
 * file); it exists when `bundle.ts` already built it.
 *
 * @returns {string}
 */
export const bundlePath = () => {
  const hash = createHash("sha256")
  for (const input of inputs) hashTree(hash, resolve(root, input))
  return join(cacheDir, `discovery-service-${hash.digest("hex").slice(0, 16)}.cjs`)
}
