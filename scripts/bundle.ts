/**
 * The start-up bundle: `src/cli/program.ts` and everything it imports, in one
 * CommonJS file built by rolldown (installed with vitest). Node then reads one
 * file instead of resolving, reading and compiling some 500 modules, which
 * roughly halves the time from spawn to the first answered call. It is
 * CommonJS because, when an ES module imports a built-in such as `node:http`,
 * Node reads every export of it, and the lazy getters among them load undici,
 * web crypto, web streams and worker threads: about 10 ms of each start.
 *
 * The bundle is a cache, not a build product: it lives in
 * `node_modules/.cache/talos-discovery/`, named after a hash of its inputs
 * (the sources, the lockfiles and the scripts that build it: see
 * `launch.mjs`), so any change to them, however it was made, leads
 * `scripts/start.mjs` to build a new one.
 *
 * Run `node scripts/bundle.ts` to build it now.
 *
 * @since 0.1.0
 */
import { mkdirSync, readdirSync, renameSync, rmSync } from "node:fs"
import { basename, dirname, join, resolve } from "node:path"
import { bundlePath, root } from "./launch.mjs"

/**
 * Builds the bundle in a temporary folder, then renames it into place, so a
 * start running at the same moment reads either the old or the new bundle,
 * never half of one. Throws when rolldown is not installed (`npm ci
 * --omit=dev`); `scripts/start.mjs` then runs the sources.
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
      logLevel: "silent",
      // `import.meta` has no CommonJS equivalent; effect reads only `import.meta?.env`, which Node leaves undefined.
      transform: { define: { "import.meta": "{}" } },
      output: { file, format: "cjs", codeSplitting: false, comments: false, sourcemap: true }
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

if (import.meta.main) await build(bundlePath())
