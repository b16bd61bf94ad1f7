/**
 * Bytes cross the port in buffers of their own: structured cloning copies
 * the whole buffer under a view, so a view is copied out first and nothing
 * else is touched.
 */
import { MessageChannel } from "node:worker_threads"
import { Duration } from "effect"
import { assert, describe, it } from "@effect/vitest"
import { fromWireUpdate, ownAffiliate, ownBytes, toWireUpdate } from "../../../src/adapters/message-port/compact.ts"

/** What the other side of a port receives for `value`. */
const crossed = <A>(value: A): Promise<A> =>
  new Promise((resolve) => {
    const { port1, port2 } = new MessageChannel()
    port2.once("message", (message: A) => {
      port1.close()
      resolve(message)
    })
    port1.postMessage(value)
  })

describe("compact", () => {
  it("copies a view out of its larger buffer, and leaves bytes that own theirs", async () => {
    const big = new Uint8Array(1 << 16).fill(7)
    const view = big.subarray(100, 110)
    assert.strictEqual((await crossed(view)).buffer.byteLength, 1 << 16)
    const own = ownBytes(view)
    assert.deepStrictEqual(own, view)
    assert.strictEqual((await crossed(own)).buffer.byteLength, 10)
    const whole = new Uint8Array(4)
    assert.strictEqual(ownBytes(whole), whole)
  })

  it("sends an AffiliateUpdate and an affiliate with only their own bytes", async () => {
    const read = new Uint8Array(1 << 16)
    const request = {
      clusterId: "c\uD800",
      affiliateId: "a",
      data: read.subarray(0, 300),
      endpoints: [read.subarray(300, 332), read.subarray(332, 348)],
      ttl: Duration.seconds(90)
    }
    const back = fromWireUpdate(await crossed(toWireUpdate(request)))
    assert.deepStrictEqual(back, {
      ...request,
      data: request.data.slice(),
      endpoints: request.endpoints.map((e) => e.slice())
    })
    assert.strictEqual(back.data!.buffer.byteLength, 300)
    const affiliate = await crossed(ownAffiliate({ id: "a", data: request.data, endpoints: request.endpoints }))
    assert.deepStrictEqual(
      affiliate.endpoints.map((endpoint) => endpoint.buffer.byteLength),
      [32, 16]
    )
    assert.isUndefined(fromWireUpdate(toWireUpdate({ ...request, data: undefined })).data)
  })
})
