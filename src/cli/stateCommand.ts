#!/usr/bin/env node
/**
 * The `discovery-state` command: moves a state between a snapshot file (the
 * original's `state.binpb` format, also the memory backend's) and Redis.
 * `import` loads a file into Redis (clusters Redis already holds are left
 * alone and named); `export` writes Redis's state to a file, atomically.
 * Prints one line of JSON with what it did; any error is `error: …` with
 * exit status 1.
 *
 * @since 0.1.0
 */
import { readFile } from "node:fs/promises"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import { Clock, Effect } from "effect"
import { Command, Flag } from "effect/cli"
import { RedisConnection } from "../adapters/redis/RedisConnection.ts"
import { exportSnapshot, importSnapshot } from "../adapters/redis/stateTransfer.ts"
import * as FileSnapshotStore from "../adapters/storage/FileSnapshotStore.ts"
import { defaultCaps } from "../core/server/ClusterStore.ts"
import { SnapshotStore } from "../ports/SnapshotStore.ts"
import { normalizeArgs } from "./command.ts"
import { redactedUrl, statePassword, stateFlags } from "./stateFlags.ts"
import { serviceVersion } from "./version.ts"

const describe = (error: unknown): string => (error instanceof Error ? error.message : String(error))

const shared = {
  state: Flag.String("state").pipe(
    Flag.withDescription("the Redis holding the state: redis://[user:password@]host:port[/db] or rediss://")
  ),
  ...stateFlags,
  snapshotPath: Flag.String("snapshot-path").pipe(
    Flag.withDescription(`the snapshot file (default ${FileSnapshotStore.defaultPath()})`),
    Flag.withDefault(FileSnapshotStore.defaultPath())
  )
}

/** A connection to the Redis of the flags, for the scope's life. */
const connect = (state: string, cluster: boolean, passwordEnv: string) =>
  Effect.acquireRelease(
    Effect.flatMap(
      Effect.suspend(() => {
        const password = statePassword(passwordEnv)
        return password instanceof Error ? Effect.fail(password) : Effect.succeed(password)
      }),
      (password) =>
        Effect.tryPromise({
          try: async () => {
            const redis = new RedisConnection(
              { url: state, cluster, password, connectTimeoutMillis: 5000, reconnect: false },
              "discovery-state"
            )
            await redis.connect()
            return redis
          },
          catch: (error) => new Error(`cannot reach ${redactedUrl(state)}: ${describe(error)}`)
        })
    ),
    (redis) => Effect.sync(() => redis.close())
  )

const report = (fields: object) => Effect.sync(() => process.stdout.write(`${JSON.stringify(fields)}\n`))

const importCommand = Command.make("import", shared, (flags) =>
  Effect.scoped(
    Effect.gen(function* () {
      const redis = yield* connect(flags.state, flags.stateCluster, flags.statePasswordEnv)
      const bytes = yield* Effect.tryPromise({
        try: () => readFile(flags.snapshotPath),
        catch: (error) => new Error(describe(error))
      })
      const now = yield* Clock.currentTimeMillis
      const result = yield* Effect.tryPromise({
        try: () =>
          importSnapshot(redis, { keyPrefix: flags.stateKeyPrefix, maxClusters: defaultCaps.maxClusters }, bytes, now),
        catch: (error) => new Error(describe(error))
      })
      yield* report({ imported: flags.snapshotPath, ...result })
    })
  )
).pipe(Command.withDescription("Loads a snapshot file into Redis; clusters Redis already holds are left as they are."))

const exportCommand = Command.make("export", shared, (flags) =>
  Effect.scoped(
    Effect.gen(function* () {
      const redis = yield* connect(flags.state, flags.stateCluster, flags.statePasswordEnv)
      const now = yield* Clock.currentTimeMillis
      const encoded = yield* Effect.tryPromise({
        try: () => exportSnapshot(redis, flags.stateKeyPrefix, now),
        catch: (error) => new Error(describe(error))
      })
      const store = yield* SnapshotStore.pipe(Effect.provide(FileSnapshotStore.layer({ path: flags.snapshotPath })))
      yield* Effect.mapError(store.save(encoded.bytes), (error) => new Error(describe(error)))
      yield* report({
        exported: flags.snapshotPath,
        clusters: encoded.clusters,
        affiliates: encoded.affiliates,
        endpoints: encoded.endpoints,
        bytes: encoded.bytes.length
      })
    })
  )
).pipe(Command.withDescription("Writes the state held in Redis to a snapshot file (replaced atomically)."))

/**
 * The command with its two subcommands.
 *
 * @category constructors
 * @since 0.1.0
 */
export const command = Command.make("discovery-state").pipe(
  Command.withDescription(
    "Moves a discovery-service state between a snapshot file (state.binpb, the original's format) and Redis."
  ),
  Command.withSubcommands([importCommand, exportCommand])
)

if (import.meta.main) {
  Command.runWith(command, { version: serviceVersion })(normalizeArgs(process.argv.slice(2))).pipe(
    Effect.tapError((error) => Effect.sync(() => process.stderr.write(`error: ${describe(error)}\n`))),
    Effect.provide(NodeServices.layer),
    (program) => NodeRuntime.runMain(program, { disableErrorReporting: true })
  )
}
