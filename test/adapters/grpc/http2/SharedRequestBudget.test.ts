/**
 * One request budget for the servers of several threads: what one server
 * reserves leaves less for the others, each gives back its own, and the
 * bytes of a server whose thread died are given back at once, whatever it
 * was doing when it was terminated.
 */
import { Worker } from "node:worker_threads"
import { assert, describe, it } from "@effect/vitest"
import { RequestBudget, SharedRequestBudget } from "../../../../src/adapters/grpc/http2/RequestBudget.ts"

describe("SharedRequestBudget", () => {
  it("bounds the servers together, and gives back a gone server's bytes", () => {
    const shared = SharedRequestBudget.make(10_000, 3)
    const again = SharedRequestBudget.attach(shared.buffer)
    const main = new RequestBudget(1, { budget: shared, holder: 0 })
    const worker = new RequestBudget(1, { budget: again, holder: 1 })
    assert.strictEqual(worker.capacity, 10_000, "the capacity is the shared budget's, not the server's own")
    assert.isTrue(main.tryReserve(6000))
    assert.isFalse(worker.tryReserve(5000))
    assert.isTrue(worker.tryReserve(4000))
    assert.isFalse(main.tryReserve(1))
    assert.deepStrictEqual([main.refused, worker.refused, shared.reserved], [1, 1, 10_000])
    main.release(6000)
    assert.strictEqual(again.reserved, 4000)
    assert.strictEqual(shared.reclaim(1), 4000)
    assert.strictEqual(shared.reserved, 0)
    assert.strictEqual(shared.reclaim(1), 0)
    assert.isTrue(main.tryReserve(10_000))
  })

  it("holds budgets larger than 2 GiB", () => {
    const shared = SharedRequestBudget.make(5 * 1024 ** 3, 1)
    const server = new RequestBudget(0, { budget: shared, holder: 0 })
    assert.isTrue(server.tryReserve(3 * 1024 ** 3))
    assert.isTrue(server.tryReserve(2 * 1024 ** 3))
    assert.isFalse(server.tryReserve(1))
  })

  it("stays exact when the thread of a server is terminated in the middle of reserving or giving back", async () => {
    const shared = SharedRequestBudget.make(1000, 2)
    const main = new RequestBudget(1, { budget: shared, holder: 0 })
    for (let round = 0; round < 30; round++) {
      const worker = new Worker(new URL("./fixtures/budgetHammer.ts", import.meta.url), { workerData: shared.buffer })
      await new Promise((resolve) => worker.once("message", resolve))
      await new Promise((resolve) => setTimeout(resolve, 1 + (round % 7)))
      await worker.terminate()
      shared.reclaim(1)
      assert.strictEqual(shared.reserved, 0, `round ${round}`)
    }
    assert.isTrue(main.tryReserve(1000))
  })
})
