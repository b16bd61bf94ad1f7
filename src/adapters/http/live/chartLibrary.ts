/**
 * The chart library of the live view (uPlot, MIT), served by the service
 * itself: read from the installed `uplot` package, or from the assets of the
 * single executable, which carries no `node_modules`. Read once, on the first
 * request that needs it.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import { createRequire } from "node:module"
import * as sea from "node:sea"

/**
 * The files served, by the name the executable's assets give them.
 *
 * @category models
 * @since 0.1.0
 */
export const chartFiles = { script: "dist/uPlot.iife.min.js", style: "dist/uPlot.min.css", license: "LICENSE" } as const

/**
 * Where a chart file is in the installed package (for the executable's build).
 *
 * @category constructors
 * @since 0.1.0
 */
export const installedPath = (name: string): string =>
  // the CommonJS bundle has no `import.meta.url` (see scripts/bundle.ts)
  createRequire(typeof import.meta.url === "string" ? import.meta.url : __filename).resolve(`uplot/${name}`)

const loaded = new Map<string, string>()

/**
 * The text of a chart file; the script carries the library's licence, as
 * its MIT licence asks of every copy.
 *
 * @category constructors
 * @since 0.1.0
 */
export const chartFile = (name: (typeof chartFiles)[keyof typeof chartFiles]): string => {
  let text = loaded.get(name)
  if (text === undefined) {
    const read = (file: string) =>
      sea.isSea() ? sea.getAsset(file, "utf8") : readFileSync(installedPath(file), "utf8")
    text = read(name)
    if (name === chartFiles.script) text = `/*! uPlot, ${read(chartFiles.license).replaceAll("*/", "* /")}*/\n${text}`
    loaded.set(name, text)
  }
  return text
}
