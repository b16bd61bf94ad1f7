/**
 * The start-up bundle: `src/cli/program.ts` and everything it imports, in one
 * ES module built by rolldown (installed with vitest). Node then reads one
 * file instead of resolving, reading and compiling some 500 modules, which
 * roughly halves the time from spawn to the first answered call.
 *
 * The bundle is a cache, not a build product: it lives in
 * `node_modules/.cache/talos-discovery/`, named after a hash of its inputs
 * (the sources, the lockfiles and this script), so any change to them, however
 * it was made, leads `scripts/start.ts` to build a new one. Packages that read
 * files next to their own code at run time stay outside it.
 *
 * Run `node scripts/bundle.ts` to build it now.
 *
 * @since 0.1.0
 */
import { createHash, type Hash } from "node:crypto"
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs"
import { basename, dirname, join, relative, resolve } from "node:path"

/** The repository root. */
export const root: string = resolve(import.meta.dirname, "..")

/** Where bundles are written. */
const cacheDir = resolve(root, "node_modules/.cache/talos-discovery")

/** Packages kept outside the bundle: they load `.proto` files relative to `__dirname`. */
const external = ["grpc-health-check", "@grpc/reflection"]

/** Files and folders whose content the bundle depends on. */
const inputs = ["src", "package.json", "package-lock.json", "node_modules/.package-lock.json", "scripts/bundle.ts"]

const hashTree = (hash: Hash, path: string): void => {
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
 * file); it exists when `build` already made it.
 */
export const bundlePath = (): string => {
  const hash = createHash("sha256")
  for (const input of inputs) hashTree(hash, resolve(root, input))
  return join(cacheDir, `discovery-service-${hash.digest("hex").slice(0, 16)}.mjs`)
}

/**
 * Builds the bundle in a temporary folder, then renames it into place, so a
 * start running at the same moment reads either the old or the new bundle,
 * never half of one. Throws when rolldown is not installed (`npm ci
 * --omit=dev`); `scripts/start.ts` then runs the sources.
 */
export const build = async (bundle: string): Promise<void> => {
  const { build: rolldown } = await import("rolldown")
  const temporary = join(dirname(bundle), `build-${process.pid}`)
  const file = join(temporary, basename(bundle))
  mkdirSync(temporary, { recursive: true })
  try {
    await rolldown({
      input: resolve(root, "src/cli/program.ts"),
      platform: "node",
      external,
      logLevel: "silent",
      output: { file, format: "esm", codeSplitting: false, comments: false, sourcemap: true }
    })
    renameSync(`${file}.map`, `${bundle}.map`)
    renameSync(file, bundle)
  } finally {
    rmSync(temporary, { recursive: true, force: true })
  }
  // Older bundles are of no further use; a start that is loading one at this moment has already opened it.
  for (const entry of readdirSync(dirname(bundle))) {
    if (entry.startsWith("discovery-service-") && !entry.startsWith(basename(bundle))) {
      rmSync(join(dirname(bundle), entry), { force: true })
    }
  }
}

/** The bundle for the sources as they are now, built first when missing. */
export const ensureBundle = async (): Promise<string> => {
  const bundle = bundlePath()
  if (!existsSync(bundle)) await build(bundle)
  return bundle
}

if (import.meta.main) await build(bundlePath())
