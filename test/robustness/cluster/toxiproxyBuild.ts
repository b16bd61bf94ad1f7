/**
 * Builds toxiproxy's server (a TCP proxy that injects network faults,
 * driven over HTTP) from the Go module proxy, pinned to one version, into
 * `.go-cache/bin/toxiproxy-<version>/`. A binary already there is reused;
 * otherwise `go install` takes about 20 s the first time.
 */
import { spawn } from "node:child_process"
import { existsSync, mkdirSync } from "node:fs"
import { join, resolve } from "node:path"

/** The toxiproxy version the runs use. */
export const toxiproxyVersion = "v2.5.0"

const modulePath = "github.com/Shopify/toxiproxy/v2/cmd/server"
const root = resolve(import.meta.dirname, "../../..")

/** Builds the server if needed and returns the path of its binary. */
export const buildToxiproxy = async (): Promise<string> => {
  const binDir = join(root, ".go-cache/bin", `toxiproxy-${toxiproxyVersion}`)
  const binary = join(binDir, "server")
  if (existsSync(binary)) return binary
  mkdirSync(binDir, { recursive: true })
  const started = Date.now()
  process.stderr.write(`[robustness] go install ${modulePath}@${toxiproxyVersion} -> ${binDir}\n`)
  const go = spawn("go", ["install", `${modulePath}@${toxiproxyVersion}`], {
    env: { ...process.env, GOBIN: binDir },
    stdio: ["ignore", "inherit", "inherit"]
  })
  const code = await new Promise<number | null>((done, fail) => {
    go.once("error", fail)
    go.once("exit", done)
  })
  if (code !== 0 || !existsSync(binary)) throw new Error(`go install of toxiproxy failed (exit code ${code})`)
  process.stderr.write(`[robustness] built toxiproxy in ${Date.now() - started} ms\n`)
  return binary
}
