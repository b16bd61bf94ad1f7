/**
 * The cluster side of the robustness runs: the shapes (memory, one Redis,
 * a Redis Cluster), the processes they are made of, and the handles the
 * faults act through. Import from here; each concept lives in its own file.
 */
export { faketimeEnv, libfaketimePath } from "./faketime.ts"
export type { Instance, InstanceOptions, StartRecord } from "./instance.ts"
export { startInstance } from "./instance.ts"
export { keySlot, slotCount } from "./keySlot.ts"
export { reservePort } from "./ports.ts"
export type { TrackedProcess } from "./processes.ts"
export { between, pick } from "./random.ts"
export { killAllTracked, spawnTracked } from "./processes.ts"
export type {
  ClusterNode,
  ClusterView,
  NodeView,
  RedisCluster,
  RedisClusterOptions,
  SlotMigration
} from "./redisCluster.ts"
export { createRedisCluster } from "./redisCluster.ts"
export type { Checkpoint, RedisPersistence, RedisServer, RedisServerOptions } from "./redisServer.ts"
export { redisPersistenceModes, startRedisServer } from "./redisServer.ts"
export type { RespValue } from "./resp.ts"
export { answersPing, infoFields, RespError, redisCommand, redisText, replyText } from "./resp.ts"
export type {
  Backend,
  MemoryRunCluster,
  RedisClusterRunCluster,
  RedisRunCluster,
  RunCluster,
  RunClusterBase
} from "./runCluster.ts"
export type { RedisClusterShapeOptions, RedisShapeOptions, ShapeOptions } from "./shapes.ts"
export { startMemory, startRedis, startRedisCluster } from "./shapes.ts"
export type { NetworkProxy, Toxic, ToxicType, Toxiproxy } from "./toxiproxy.ts"
export { startToxiproxy } from "./toxiproxy.ts"
export { buildToxiproxy, toxiproxyVersion } from "./toxiproxyBuild.ts"
export { sleep, waitFor } from "./wait.ts"
