/**
 * The Redis (or Valkey) state backend, for several instances sharing one
 * state.
 *
 * @since 0.1.0
 */
export * as RedisBackend from "./RedisBackend.ts"
export * as RedisInstanceDirectory from "./RedisInstanceDirectory.ts"
