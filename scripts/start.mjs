// @ts-check
/**
 * `npm start`: runs the service from the start-up bundle (see `bundle.ts`),
 * building it first when there is none for the sources as they are (about
 * 1.5 s, once after each change). Without rolldown, or when the build fails,
 * it runs the sources instead, which start slower but behave the same. Node's
 * compile cache is on either way (in the OS temp directory;
 * `NODE_DISABLE_COMPILE_CACHE=1` turns it off).
 *
 * It is JavaScript, as is `launch.mjs`, so that a start which finds its
 * bundle loads no TypeScript (see `launch.mjs`); `start.ts` does the same
 * for the commands that name it.
 *
 * Flags go to the service: `npm start -- --addr=:3000 --debug`.
 *
 * @since 0.1.0
 */
import { existsSync } from "node:fs"
import { createRequire, enableCompileCache } from "node:module"
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { setFlagsFromString } from "node:v8"
import { bundlePath, heapFlags, root } from "./launch.mjs"

for (const flag of heapFlags) setFlagsFromString(flag)
enableCompileCache()

const sources = resolve(root, "src/cli/program.ts")

/** The bundle for the sources as they are, built first when missing; the sources when it cannot be built. */
const entry = async () => {
  const bundle = bundlePath()
  if (existsSync(bundle)) return bundle
  try {
    const { build } = await import("./bundle.ts")
    await build(bundle)
    return bundle
  } catch (error) {
    const reason = error instanceof Error ? error.message.split("\n")[0] : String(error)
    process.stderr.write(`start: no start-up bundle (${reason}); running the sources\n`)
    return sources
  }
}

const runSources = () => import(pathToFileURL(sources).href)

const chosen = await entry()
try {
  // `require`, not `import()`: importing a CommonJS file first scans all of it for the names it exports.
  if (chosen === sources) await runSources()
  else createRequire(import.meta.url)(chosen)
} catch (error) {
  // A start built from other sources at the same moment may have just replaced the bundle: run the sources.
  if (chosen === sources || existsSync(chosen)) throw error
  process.stderr.write("start: the start-up bundle was replaced while starting; running the sources\n")
  await runSources()
}
