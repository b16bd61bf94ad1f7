/**
 * The change feed's reader of a cluster's log, over a connection the test
 * drives: a wake-up (an announcement, a catch-up) that comes while a read is
 * finishing is never lost, at whatever point of the read's last steps it
 * comes (issue 22: `reading` was cleared a few steps after the read's last
 * check, and a wake-up in between waited for the next change).
 */
import { assert, describe, it } from "@effect/vitest"
import { ChangeFeed } from "../../../src/adapters/redis/ChangeFeed.ts"
import { keyspace } from "../../../src/adapters/redis/keys.ts"
import type { RedisConnection, Reply } from "../../../src/adapters/redis/RedisConnection.ts"
import type { WatchSink } from "../../../src/ports/ClusterApi.ts"

/** A connection whose log reads wait until the test answers them. */
const drivenConnection = () => {
  const reads: Array<(reply: Reply) => void> = []
  const connection = {
    cluster: false,
    onConnectionLost: () => undefined,
    onChannelLost: () => undefined,
    subscribe: async () => undefined,
    unsubscribe: async () => undefined,
    nodeOf: () => undefined,
    run: () => new Promise<Reply>((resolve) => reads.push(resolve)),
    send: async () => null
  }
  return { connection: connection as unknown as RedisConnection, reads }
}

const sink: WatchSink = { offer: () => true, end: () => undefined }

const ticks = async (count: number) => {
  for (let i = 0; i < count; i++) await Promise.resolve()
}

describe("ChangeFeed", () => {
  it("a wake-up at any step of a finishing read starts another read", async () => {
    for (let depth = 0; depth < 12; depth++) {
      const { connection, reads } = drivenConnection()
      const feed = new ChangeFeed({
        redis: connection,
        load: async () => ({ revision: 0, epoch: "e", affiliates: new Map() }),
        keysOf: keyspace("t:").cluster
      })
      assert.isTrue(feed.reserveWatch(10))
      await feed.subscribe("c", sink, new AbortController().signal)
      await ticks(5)
      assert.strictEqual(reads.length, 1, "the mirror reads its log once loaded")
      reads[0]!([Buffer.from("e"), []])
      await ticks(depth)
      feed.catchUp()
      await ticks(20)
      assert.strictEqual(reads.length, 2, `a wake-up ${depth} steps after the read's answer started a read`)
    }
  })
})
