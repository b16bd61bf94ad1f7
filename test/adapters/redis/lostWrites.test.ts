/**
 * Redis that comes back without its last writes (killed and started from an
 * older RDB file, as after a crash with AOF `everysec`, a restore, or a
 * failover to a replica that lagged; or the same process, resynced from a
 * replica that lagged and promoted again) must never let a watcher resume
 * across the loss: the revisions issued after it belong to a new epoch, so a
 * watcher that saw the lost writes gets a fresh snapshot (issue 22, the first
 * scenario, through the backend and real `redis-server` processes).
 */
import { Effect } from "effect"
import { assert, describe, it } from "@effect/vitest"
import type { AffiliateView } from "../../../src/ports/ClusterApi.ts"
import {
  command,
  directConnection,
  eventually,
  instanceOn,
  killAndRestart,
  recordingSink,
  updateOf
} from "./fixtures/backendState.ts"
import { redisForTests, startRedis } from "./redisServer.ts"

const redis = redisForTests()

const ids = (affiliates: ReadonlyArray<AffiliateView>) => affiliates.map((affiliate) => affiliate.id).sort()

type State = Effect.Success<ReturnType<typeof instanceOn>>["state"]

/** A watcher of `clusterId` sees n3 and n4 added (revisions 4 and 5) and leaves; gives how its watch started. */
const watchNewNodes = (state: State, clusterId: string, watcher: ReturnType<typeof recordingSink>) =>
  Effect.scoped(
    Effect.gen(function* () {
      const start = yield* state.subscribe({ clusterId }, watcher.sink)
      for (const id of ["n3", "n4"]) yield* state.update(updateOf(clusterId, id))
      yield* eventually(() => watcher.deltas.length === 2, "the watcher saw n3 and n4")
      return start
    })
  )

/** Through the instance, once Redis takes writes again: n1 deleted, n5, n6 and n7 added; List shows just that. */
const changeAfterTheLoss = (state: State, clusterId: string) =>
  Effect.gen(function* () {
    yield* eventually(
      () =>
        Effect.runPromise(
          state.delete({ clusterId, affiliateId: "n1" }).pipe(
            Effect.as(true),
            Effect.orElseSucceed(() => false)
          )
        ),
      "a delete went through"
    )
    for (const id of ["n5", "n6", "n7"]) yield* state.update(updateOf(clusterId, id))
    assert.deepStrictEqual(ids(yield* state.list({ clusterId })), ["n0", "n2", "n5", "n6", "n7"])
  })

describe("Redis that lost its last writes", () => {
  it.live("a watcher that saw the lost writes is not resumed onto the revisions issued again", () =>
    Effect.gen(function* () {
      const { backend, state } = yield* instanceOn(redis.server.url)
      const clusterId = "lost-writes"
      for (const id of ["n0", "n1", "n2"]) yield* state.update(updateOf(clusterId, id))
      const probe = yield* directConnection(redis.server.url)
      yield* command(probe, "SAVE")

      const watcher = recordingSink()
      const seen = yield* watchNewNodes(state, clusterId, watcher)
      assert.strictEqual(seen._tag, "Snapshot")
      const resumePoint = { epoch: seen._tag === "Snapshot" ? seen.epoch! : "", revision: 5 }
      assert.strictEqual(watcher.deltas.at(-1)?.revision, 5)

      yield* killAndRestart(redis)
      yield* eventually(() => backend.available!(), "the backend reconnected", 10_000)
      yield* changeAfterTheLoss(state, clusterId)

      const comeback = recordingSink()
      const start = yield* Effect.scoped(state.subscribe({ clusterId, resume: resumePoint }, comeback.sink))
      assert.strictEqual(start._tag, "Snapshot", "no resume across the lost writes")
      if (start._tag !== "Snapshot") return
      assert.notStrictEqual(start.epoch, resumePoint.epoch, "the revisions after the loss are a new epoch")
      assert.deepStrictEqual(ids(start.affiliates), ["n0", "n2", "n5", "n6", "n7"])
    }).pipe(Effect.scoped)
  )

  it.live(
    "a primary that resynced from a replica missing its last writes, then was promoted again, starts a new epoch",
    () =>
      Effect.gen(function* () {
        // the same process all along: only its line of data (replication ID) tells what happened
        const other = yield* Effect.acquireRelease(
          Effect.promise(() => startRedis()),
          (server) => Effect.promise(() => server.cleanup())
        )
        const primary = yield* directConnection(redis.server.url)
        const replica = yield* directConnection(other.url)
        const linkUp = (connection: typeof primary) =>
          eventually(
            () =>
              Effect.runPromise(
                Effect.map(command(connection, "INFO", "replication"), (info) =>
                  String(info).includes("master_link_status:up")
                )
              ),
            "the replica synced",
            10_000
          )
        const { state } = yield* instanceOn(redis.server.url)
        const clusterId = "resynced"
        yield* command(replica, "REPLICAOF", "127.0.0.1", String(redis.server.port))
        yield* linkUp(replica)
        for (const id of ["n0", "n1", "n2"]) yield* state.update(updateOf(clusterId, id))
        yield* command(primary, "WAIT", "1", "2000")
        yield* command(replica, "REPLICAOF", "NO", "ONE")

        const seen = yield* watchNewNodes(state, clusterId, recordingSink())
        const resumePoint = { epoch: seen._tag === "Snapshot" ? seen.epoch! : "", revision: 5 }

        yield* command(primary, "REPLICAOF", "127.0.0.1", String(other.port))
        yield* linkUp(primary)
        yield* command(primary, "REPLICAOF", "NO", "ONE")
        yield* changeAfterTheLoss(state, clusterId)
        const start = yield* Effect.scoped(state.subscribe({ clusterId, resume: resumePoint }, recordingSink().sink))
        assert.strictEqual(start._tag, "Snapshot", "no resume across the lost writes")
        if (start._tag === "Snapshot") assert.notStrictEqual(start.epoch, resumePoint.epoch)
      }).pipe(Effect.scoped),
    30_000
  )
})
