#!/usr/bin/env node
/**
 * The `discovery-service` executable.
 *
 * @since 0.1.0
 */
import { NodeRuntime, NodeServices } from "@effect/platform-node"
import { Effect } from "effect"
import { Command } from "effect/cli"
import * as DiscoveryCommand from "./command.ts"
import { serve } from "./serve.ts"

const command = DiscoveryCommand.make(serve)

Command.runWith(command, { version: "0.1.0" })(DiscoveryCommand.normalizeArgs(process.argv.slice(2))).pipe(
  Effect.provide(NodeServices.layer),
  NodeRuntime.runMain
)
