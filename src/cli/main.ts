#!/usr/bin/env node
/**
 * The `discovery-service` executable. SIGINT or SIGTERM stops it gracefully and
 * it exits 0; a second signal, or a graceful stop longer than 10 s, exits at
 * once.
 *
 * @since 0.1.0
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Cause, Effect, Exit, Runtime } from "effect"
import { Command } from "effect/cli"
import * as DiscoveryCommand from "./command.ts"
import { serve } from "./serve.ts"

const gracefulStopLimitMillis = 10_000

let signals = 0
const onSignal = () => {
  signals++
  if (signals === 1) setTimeout(() => process.exit(1), gracefulStopLimitMillis).unref()
  else process.exit(130)
}
process.on("SIGINT", onSignal)
process.on("SIGTERM", onSignal)

const teardown: Runtime.Teardown = (exit, onExit) =>
  Exit.isFailure(exit) && Cause.hasInterruptsOnly(exit.cause) ? onExit(0) : Runtime.defaultTeardown(exit, onExit)

Command.runWith(DiscoveryCommand.make(serve), { version: "0.1.0" })(
  DiscoveryCommand.normalizeArgs(process.argv.slice(2))
).pipe(Effect.provide(NodeServices.layer), NodeRuntime.runMain({ teardown }))
