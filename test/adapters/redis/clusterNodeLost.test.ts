/**
 * Under Redis Cluster, a node that fails ends the watches of the clusters
 * it holds with UNAVAILABLE (their clients watch again, on whatever node
 * then holds the slot), while watches of clusters on the other nodes go on:
 * node-redis reports a node's failure as `node-error`, which the backend
 * listens to (issue 22: nothing did, and such watches stayed open, silent).
 * Real Redis Cluster of 3 primaries without replicas.
 */
import { execFileSync } from "node:child_process"
import { randomUUID } from "node:crypto"
import { Effect } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { keyspace } from "../../../src/adapters/redis/keys.ts"
import { eventually, instanceOn, pause, recordingSink, updateOf } from "./fixtures/backendState.ts"
import { redisClusterForTests } from "./redisServer.ts"

const redis = redisClusterForTests(3)

describe("a Redis Cluster node that fails", () => {
  it.live(
    "ends the watches of the clusters it held with UNAVAILABLE, and only those",
    () =>
      Effect.gen(function* () {
        const keyPrefix = `node-lost-${randomUUID()}:`
        const { state } = yield* instanceOn(redis.cluster.url, { keyPrefix, cluster: true })
        const nodes = redis.cluster.nodes
        const cli = (...args: ReadonlyArray<string>) =>
          execFileSync("redis-cli", ["-p", String(nodes[0]!.port), ...args])
            .toString()
            .trim()
        /** The port of the node that holds a discovery cluster's keys (asked of Redis itself). */
        const nodeOf = (clusterId: string): string => {
          const slot = Number(cli("CLUSTER", "KEYSLOT", keyspace(keyPrefix).cluster(clusterId).meta))
          for (const line of cli("CLUSTER", "NODES").split("\n")) {
            const [, address = "", flags = "", , , , , , ...ranges] = line.split(" ")
            if (!flags.includes("master")) continue
            for (const range of ranges) {
              const [from, to = from] = range.split("-").map(Number)
              if (from! <= slot && slot <= to!) return address.split("@")[0]!.split(":")[1]!
            }
          }
          throw new Error(`no node holds slot ${slot}`)
        }
        // one cluster on each node, found by name
        const byNode = new Map<string, string>()
        for (let i = 0; byNode.size < 3; i++) {
          const clusterId = `c${i}`
          if (!byNode.has(nodeOf(clusterId))) byNode.set(nodeOf(clusterId), clusterId)
        }
        const watchers = new Map<string, ReturnType<typeof recordingSink>>()
        for (const clusterId of byNode.values()) {
          yield* state.update(updateOf(clusterId, "a"))
          const watcher = recordingSink()
          yield* state.subscribe({ clusterId }, watcher.sink)
          watchers.set(clusterId, watcher)
        }
        const [victimAddress, victimCluster] = [...byNode][0]!
        const victim = nodes.find((node) => String(node.port) === victimAddress)!
        yield* Effect.promise(() => victim.stop(true))

        yield* eventually(() => watchers.get(victimCluster)!.ended.length > 0, "the watch on the failed node ended")
        assert.include(watchers.get(victimCluster)!.ended[0]!, "Unavailable")
        yield* pause(500)
        for (const [clusterId, watcher] of watchers) {
          if (clusterId !== victimCluster) assert.deepStrictEqual(watcher.ended, [], `${clusterId} goes on`)
        }
      }).pipe(Effect.scoped),
    30_000
  )
})
