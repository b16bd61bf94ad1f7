/**
 * The profile of the Redis backend for the core's property runners (see
 * `test/core/fixtures/stateModel.ts`): where it differs from memory by
 * design, and how to wait for the instances under test.
 */
import { Effect } from "effect"
import type { RedisStateBackend } from "../../../src/adapters/redis/RedisBackend.ts"
import { settle as settleFibers } from "../../core/fixtures/discovery.ts"
import type { StateProfile } from "../../core/fixtures/stateModel.ts"

/**
 * Changes reach watchers asynchronously (settling waits until every
 * instance handed on what Redis holds), a GC pass goes by due time, a
 * cluster keeps its revisions after it empties, and the removed-cluster
 * count of a GC report is this instance's view.
 */
export const redisProfile = (backends: ReadonlyArray<RedisStateBackend>): StateProfile => ({
  settle: Effect.andThen(Effect.orDie(Effect.all(backends.map((backend) => backend.drained))), settleFibers),
  refreshStats: Effect.orDie(Effect.all(backends.map((backend) => backend.refreshStats))),
  floodBatch: 1,
  gcOrder: "due",
  revisionsOutliveCluster: true,
  countsRemovedClusters: false
})
