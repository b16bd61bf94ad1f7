/**
 * Builds the Go programs the interop tests run: the original discovery service
 * (`github.com/siderolabs/discovery-service/cmd/discovery-service`, version
 * pinned in test/interop/go/go.mod) and the `nodes` driver around the published
 * discovery client. Both come from the Go module proxy by module path and
 * version; Go's build cache makes repeated builds fast.
 */
import { execFileSync } from "node:child_process"
import { mkdirSync } from "node:fs"
import { resolve } from "node:path"

const root = resolve(import.meta.dirname, "../../..")
const moduleDir = resolve(root, "test/interop/go")
const binDir = resolve(root, ".go-cache/bin")

const build = (name: string, target: string): string => {
  const output = resolve(binDir, name)
  const started = Date.now()
  process.stderr.write(`[interop] go build ${target} -> ${output}\n`)
  execFileSync("go", ["build", "-o", output, target], { cwd: moduleDir, stdio: ["ignore", "inherit", "inherit"] })
  process.stderr.write(`[interop] built ${name} in ${Date.now() - started} ms\n`)
  return output
}

/** Paths of the built Go binaries. */
export interface GoBinaries {
  readonly discoveryService: string
  readonly nodes: string
}

/** Builds (or finds in Go's cache) both binaries. */
export const buildGoBinaries = (): GoBinaries => {
  mkdirSync(binDir, { recursive: true })
  return {
    discoveryService: build("discovery-service", "github.com/siderolabs/discovery-service/cmd/discovery-service"),
    nodes: build("nodes", "./nodes")
  }
}
