/**
 * The `discovery-service` program, loaded by `main.ts` once the compile cache
 * is on. SIGINT or SIGTERM stops it gracefully and
 * it exits 0; a second signal, or a graceful stop longer than 10 s, kills it at
 * once (SIGKILL, which even a hung disk write cannot hold up).
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Cause, Effect, Exit, Runtime } from "effect"
import { Command } from "effect/cli"
import * as DiscoveryCommand from "./command.ts"
import { serve } from "./serve.ts"

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
process.on("SIGINT", onSignal)
process.on("SIGTERM", onSignal)

const teardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)

Command.runWith(DiscoveryCommand.make(serve), { version: "0.1.0" })(
  DiscoveryCommand.normalizeArgs(process.argv.slice(2))
).pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain({ teardown }))
