/**
 * The flags that say where a shared state lives in Redis, shared by the
 * `discovery-service` command and the `discovery-state` tool, with the
 * password lookup and the URL form that is safe to print.
 *
 * @since 0.1.0
 */
import { Flag } from "effect/cli"

/**
 * `--state-cluster`, `--state-password-env` and `--state-key-prefix`.
 *
 * @category flags
 * @since 0.1.0
 */
export const stateFlags = {
  stateCluster: Flag.Boolean("state-cluster").pipe(
    Flag.withDescription(
      "--state names seed nodes of a Redis Cluster, separated by commas (redis://host:port,host:port); each cluster's keys share one slot (default false)"
    ),
    Flag.withDefault(false)
  ),
  statePasswordEnv: Flag.String("state-password-env").pipe(
    Flag.withDescription(
      "name of an environment variable holding the Redis password, so it stays out of the command line; empty uses the URL's (default empty)"
    ),
    Flag.withDefault("")
  ),
  stateKeyPrefix: Flag.String("state-key-prefix").pipe(
    Flag.withDescription(
      "prefix of every Redis key, so several services can share one Redis; the same for every instance and tool on one state (default discovery:)"
    ),
    Flag.withDefault("discovery:")
  )
}

/**
 * The Redis password named by `--state-password-env` (`undefined`: the
 * URL's), or the error that the variable is not set.
 *
 * @category constructors
 * @since 0.1.0
 */
export const statePassword = (envName: string): string | undefined | Error => {
  if (envName === "") return undefined
  return process.env[envName] ?? new Error(`--state-password-env: ${envName} is not set`)
}

/**
 * A Redis URL without its password, for logs and messages.
 *
 * @category constructors
 * @since 0.1.0
 */
export const redactedUrl = (url: string): string => url.replace(/\/\/([^:@/]*):[^@/]*@/g, "//$1:***@")
