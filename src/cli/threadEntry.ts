/**
 * What an I/O thread runs: the program's own file, as `node` was given it;
 * inside a single executable (`npm run build:exe`), which has no such file,
 * the program's code, embedded in the executable as an asset.
 *
 * @since 0.1.0
 */
import { dirname } from "node:path"
import * as sea from "node:sea"

/**
 * The name of the asset that holds the program's code in a single executable.
 *
 * @category models
 * @since 0.1.0
 */
export const programAsset = "program.cjs"

/**
 * The program's code run as a worker's `eval` script, with `__filename` and
 * `__dirname` those of the executable (a worker's `eval` script has none, and
 * libraries make a `require` from them).
 *
 * @category constructors
 * @since 0.1.0
 */
export const asThreadCode = (code: string, file: string): { readonly code: string } => ({
  code: `(function (__filename, __dirname) {\n${code}\n})(${JSON.stringify(file)}, ${JSON.stringify(dirname(file))})`
})

/**
 * The module each I/O thread runs, or its code inside a single executable.
 *
 * @category constructors
 * @since 0.1.0
 */
export const threadEntry = (): string | { readonly code: string } =>
  sea.isSea() ? asThreadCode(sea.getAsset(programAsset, "utf8"), process.execPath) : process.argv[1]!
