/**
 * `npm run build:exe [-- <folder>]`: one file that runs the service on a
 * Linux x64 host without Node or `node_modules` (Node's single executable
 * applications). The program and everything it imports are bundled into one
 * CommonJS file (`bundle.ts`), made into a blob with
 * `node --experimental-sea-config` (with the V8 flags of `launch.mjs` and
 * the program's code as an asset, which the I/O threads run: see
 * `src/cli/threadEntry.ts`), and injected with `postject` into a copy of the
 * Node that runs this script. Writes `<folder>/discovery-service` (default
 * folder `build`).
 *
 * @since 0.1.0
 */
import { execFileSync } from "node:child_process"
import { chmodSync, copyFileSync, mkdirSync, rmSync, statSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { join, resolve } from "node:path"
import { chartFiles, installedPath } from "../src/adapters/http/live/chartLibrary.ts"
import { build } from "./bundle.ts"
import { heapFlags, root } from "./launch.mjs"

/** The sentinel every Node build carries, which postject flips to say a blob is there. */
const fuse = "NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2"

/** Builds the executable into `folder` and gives its path. */
export const buildExecutable = async (folder: string): Promise<string> => {
  const work = join(folder, ".work")
  rmSync(work, { recursive: true, force: true })
  mkdirSync(work, { recursive: true })
  const program = join(work, "program.cjs")
  await build(program)
  const blob = join(work, "sea.blob")
  const config = join(work, "sea-config.json")
  writeFileSync(
    config,
    JSON.stringify({
      main: program,
      output: blob,
      disableExperimentalSEAWarning: true,
      useSnapshot: false,
      useCodeCache: false,
      execArgv: heapFlags,
      assets: {
        "program.cjs": program,
        // the live view's chart library, which the executable serves without node_modules
        ...Object.fromEntries(Object.values(chartFiles).map((name) => [name, installedPath(name)]))
      }
    })
  )
  execFileSync(process.execPath, ["--experimental-sea-config", config], { stdio: "inherit" })
  const executable = join(folder, "discovery-service")
  rmSync(executable, { force: true })
  copyFileSync(process.execPath, executable)
  chmodSync(executable, 0o755)
  const postject = createRequire(import.meta.url).resolve("postject/dist/cli.js")
  execFileSync(process.execPath, [postject, executable, "NODE_SEA_BLOB", blob, "--sentinel-fuse", fuse], {
    stdio: ["ignore", "ignore", "inherit"]
  })
  rmSync(work, { recursive: true, force: true })
  return executable
}

if (import.meta.main) {
  const started = performance.now()
  const executable = await buildExecutable(resolve(root, process.argv[2] ?? "build"))
  const megabytes = (statSync(executable).size / 1024 / 1024).toFixed(1)
  process.stdout.write(
    `${executable}: ${megabytes} MiB, built in ${((performance.now() - started) / 1000).toFixed(1)} s\n`
  )
}
