/**
 * The `discovery-service` program, loaded by `main.ts` once the compile cache
 * is on; each of its I/O threads runs it too. SIGINT or SIGTERM stops it gracefully and
 * it exits 0; a second signal, or a graceful stop longer than 10 s, kills it at
 * once (SIGKILL, which even a hung disk write cannot hold up).
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Cause, Effect, Exit, Runtime } from "effect"
import { Command } from "effect/cli"
import { isIoThread } from "./IoThread.ts"
import * as DiscoveryCommand from "./command.ts"
import { loggerLayer, serve } from "./serve.ts"
import { serveThread } from "./sharedPort.ts"
import { serviceVersion } from "./version.ts"

const gracefulStopLimitMillis = 10_000

// `process.exit` waits for libuv's worker threads, so a write stuck in the kernel (a hung disk) would hold it
// forever; the hard stop is SIGKILL to ourselves, which nothing can hold.
const hardStop = () => process.kill(process.pid, "SIGKILL")

let signals = 0
const onSignal = () => {
  signals++
  if (signals === 1) setTimeout(hardStop, gracefulStopLimitMillis).unref()
  else hardStop()
}
if (!isIoThread()) {
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)
}

// the service stopped by a signal did its job; a check stopped by one did not (a CI job killed on timeout must not pass)
const serviceTeardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)
const checkTeardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(130) : Runtime.defaultTeardown(exit, onExit)

const args = process.argv.slice(2)

// `conformance` checks another server; its module loads only then, so a start of the service never pays for it
const conformance = Effect.flatMap(
  Effect.promise(() => import("./conformanceCommand.ts")),
  (conformanceCommand) =>
    Command.runWith(conformanceCommand.command, { version: serviceVersion })(
      DiscoveryCommand.normalizeArgs(args.slice(1))
    )
)

// An I/O thread (`--io-threads`) runs this same program with the same arguments, and serves its share of the port.
const service = Command.runWith(
  DiscoveryCommand.make(isIoThread() ? (config) => Effect.provide(serveThread(config), loggerLayer(config)) : serve),
  { version: serviceVersion }
)(DiscoveryCommand.normalizeArgs(args))

const checking = args[0] === "conformance" && !isIoThread()
;(checking ? conformance : service).pipe(
  Effect.provide(NodeServices.layer),
  NodeRuntime.runMain({ teardown: checking ? checkTeardown : serviceTeardown })
)
