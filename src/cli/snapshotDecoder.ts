#!/usr/bin/env node
/**
 * The `snapshot-decoder` command: prints a state snapshot file as protobuf
 * JSON (the original's `cmd/snapshot-decoder`). Any error is reported as
 * `error: …` with exit status 1.
 *
 * @since 0.1.0
 */
import { readFile } from "node:fs/promises"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { defaultPath } from "../adapters/storage/FileSnapshotStore.ts"
import { toJson } from "../adapters/storage/SnapshotJson.ts"
import { normalizeArgs } from "./command.ts"
import { serviceVersion } from "./version.ts"

const describe = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/**
 * Reads the snapshot at `path` and writes its JSON form to stdout.
 *
 * @category constructors
 * @since 0.1.0
 */
export const decodeFile = (path: string): Effect.Effect<void, Error> =>
  Effect.tryPromise({
    try: async () => toJson(await readFile(path)),
    catch: (error) => new Error(describe(error))
  }).pipe(
    Effect.flatMap((json) => Effect.sync(() => process.stdout.write(json))),
    Effect.tapError((error) => Effect.sync(() => process.stderr.write(`error: ${error.message}\n`)))
  )

/**
 * The command and its one flag.
 *
 * @category constructors
 * @since 0.1.0
 */
export const command = Command.make(
  "snapshot-decoder",
  {
    snapshotPath: Flag.String("snapshot-path").pipe(
      Flag.withDescription(`the snapshot file to print (default ${defaultPath()})`),
      Flag.withDefault(defaultPath())
    )
  },
  ({ snapshotPath }) => decodeFile(snapshotPath)
).pipe(Command.withDescription("Prints a discovery-service state snapshot as protobuf JSON."))

if (import.meta.main) {
  Command.runWith(command, { version: serviceVersion })(normalizeArgs(process.argv.slice(2))).pipe(
    Effect.provide(NodeServices.layer),
    (program) => NodeRuntime.runMain(program, { disableErrorReporting: true })
  )
}
