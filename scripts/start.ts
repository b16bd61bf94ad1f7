/**
 * `npm start`: runs the service from the start-up bundle (see `bundle.ts`),
 * building it first when there is none for the sources as they are (about
 * 1.5 s, once after each change). Without rolldown, or when the build fails, it runs
 * the sources instead, which start slower but behave the same. Node's compile
 * cache is on either way (in the OS temp directory; `NODE_DISABLE_COMPILE_CACHE=1`
 * turns it off).
 *
 * Flags go to the service: `npm start -- --addr=:3000 --debug`.
 *
 * @since 0.1.0
 */
import { enableCompileCache } from "node:module"
import { existsSync } from "node:fs"
import { resolve } from "node:path"
import { pathToFileURL } from "node:url"
import { tuneHeap } from "../src/cli/heapTuning.ts"
import { ensureBundle, root } from "./bundle.ts"

tuneHeap()
enableCompileCache()

const sources = resolve(root, "src/cli/program.ts")

const entry = async (): Promise<string> => {
  try {
    return await ensureBundle()
  } catch (error) {
    const reason = error instanceof Error ? error.message.split("\n")[0] : String(error)
    process.stderr.write(`start: no start-up bundle (${reason}); running the sources\n`)
    return sources
  }
}

const chosen = await entry()
try {
  await import(pathToFileURL(chosen).href)
} catch (error) {
  // A start built from other sources at the same moment may have just replaced the bundle: run the sources.
  if (chosen === sources || existsSync(chosen)) throw error
  process.stderr.write("start: the start-up bundle was replaced while starting; running the sources\n")
  await import(pathToFileURL(sources).href)
}
