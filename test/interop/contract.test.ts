/**
 * The contract suite against the original Go service (v1.1.0 from the module
 * proxy, GC every second): every case about original behaviour must pass there
 * too, which proves the suite itself; cases about our deliberate improvements
 * are registered as skipped with the reason. The Go service limits each client
 * IP to 15 requests per second, so this file takes a minute or two.
 */
import { afterAll, beforeAll } from "@effect/vitest"
import { clusterApiSuite } from "../contract/clusterApiSuite.ts"
import { externalTarget } from "../contract/externalTarget.ts"
import { buildGoBinaries } from "./support/goBuild.ts"
import { type ServerProcess, startGoServer } from "./support/processes.ts"

let server: ServerProcess | undefined

beforeAll(async () => {
  server = await startGoServer(buildGoBinaries().discoveryService, { gcInterval: "1s" })
}, 600_000)

afterAll(async () => {
  await server?.stop()
})

clusterApiSuite(
  externalTarget("the original Go server", () => {
    if (server === undefined) throw new Error("the Go server did not start")
    return server.address
  })
)
