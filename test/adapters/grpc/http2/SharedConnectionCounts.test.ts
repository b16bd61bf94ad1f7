import { EventEmitter } from "node:events"
import * as net from "node:net"
import { Worker } from "node:worker_threads"
import { assert, describe, it } from "@effect/vitest"
import { ConnectionGuard, defaultConnectionLimits } from "../../../../src/adapters/grpc/http2/ConnectionGuard.ts"
import { Http2Server } from "../../../../src/adapters/grpc/http2/Http2Server.ts"
import { SharedConnectionCounts } from "../../../../src/adapters/grpc/http2/SharedConnectionCounts.ts"
import { until, within } from "./echoServer.ts"
import type { HammerInput, HammerOutput } from "./fixtures/hammerCounts.ts"
import { session } from "./fixtures/sessions.ts"

/** An accepted socket as the guard sees it: a remote address, "close" once destroyed. */
const fakeSocket = (remoteAddress: string) => {
  const socket = Object.assign(new EventEmitter(), {
    remoteAddress,
    destroyed: false,
    destroy() {
      socket.destroyed = true
      socket.emit("close")
    }
  })
  return socket
}

const admit = (guard: ConnectionGuard, socket: ReturnType<typeof fakeSocket>) =>
  guard.admit(socket as unknown as net.Socket)

const hammer = (input: HammerInput): Promise<HammerOutput> =>
  new Promise((resolve, reject) => {
    const worker = new Worker(new URL("./fixtures/hammerCounts.ts", import.meta.url), { workerData: input })
    worker.once("message", resolve)
    worker.once("error", reject)
    worker.once("exit", (code) => reject(new Error(`the worker exited with ${code} before it reported`)))
  })

const listen = (server: Http2Server, address: string) =>
  new Promise<number>((resolve, reject) =>
    server.bindAsync(address, (error, port) => (error ? reject(error) : resolve(port)))
  )

describe("SharedConnectionCounts", () => {
  it("admits up to the total and the per-address caps, and a release makes room again", () => {
    const counts = SharedConnectionCounts.make(16)
    assert.isTrue(counts.tryAcquire("127.0.0.1", 3, 2))
    assert.isTrue(counts.tryAcquire("127.0.0.1", 3, 2))
    assert.isFalse(counts.tryAcquire("127.0.0.1", 3, 2), "the per-address cap")
    assert.isTrue(counts.tryAcquire("::1", 3, 2))
    assert.isFalse(counts.tryAcquire("10.0.0.1", 3, 2), "the total cap")
    assert.strictEqual(counts.total, 3)
    assert.strictEqual(counts.countOf("127.0.0.1"), 2)
    assert.strictEqual(counts.countOf("::1"), 1)
    assert.strictEqual(counts.countOf("10.0.0.1"), 0)
    counts.release("127.0.0.1")
    assert.isTrue(counts.tryAcquire("10.0.0.1", 3, 2))
    assert.isFalse(counts.tryAcquire("127.0.0.1", 3, 2))
    counts.release("::1")
    assert.isTrue(counts.tryAcquire("127.0.0.1", 3, 2))
    for (const address of ["127.0.0.1", "127.0.0.1", "10.0.0.1"]) counts.release(address)
    assert.strictEqual(counts.total, 0)
    assert.strictEqual(counts.countOf("127.0.0.1"), 0)
  })

  it("keeps many addresses apart, and finds each after others left (slots reused)", () => {
    const counts = SharedConnectionCounts.make(20_000)
    const addresses = Array.from({ length: 20_000 }, (_, i) => `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`)
    for (const [i, address] of addresses.entries()) {
      for (let k = 0; k <= i % 3; k++) assert.isTrue(counts.tryAcquire(address, 1e9, 3))
    }
    for (const [i, address] of addresses.entries()) assert.strictEqual(counts.countOf(address), (i % 3) + 1)
    for (const [i, address] of addresses.entries()) {
      if (i % 2 === 0) for (let k = 0; k <= i % 3; k++) counts.release(address)
    }
    for (const [i, address] of addresses.entries()) {
      assert.strictEqual(counts.countOf(address), i % 2 === 0 ? 0 : (i % 3) + 1)
    }
    const again = addresses.map((address) => `fd00::${address}`)
    for (const address of again.slice(0, 10_000)) assert.isTrue(counts.tryAcquire(address, 1e9, 3))
    for (const [i, address] of addresses.entries()) {
      assert.strictEqual(counts.countOf(address), i % 2 === 0 ? 0 : (i % 3) + 1)
    }
    for (const address of again.slice(0, 10_000)) assert.strictEqual(counts.countOf(address), 1)
    for (const address of again.slice(0, 10_000)) counts.release(address)
    for (const [i, address] of addresses.entries()) {
      if (i % 2 === 1) for (let k = 0; k <= i % 3; k++) counts.release(address)
    }
    assert.strictEqual(counts.total, 0)
    for (const address of addresses) assert.strictEqual(counts.countOf(address), 0)
  })

  it("refuses a new address when the table is full, but not one it holds, and takes new ones after a release", () => {
    const counts = SharedConnectionCounts.make(1)
    let admitted = 0
    while (counts.tryAcquire(`10.0.${admitted >> 8}.${admitted & 255}`, 1e9, 5)) admitted++
    assert.strictEqual(admitted, 768, "three quarters of the 1024 slots")
    assert.isFalse(counts.tryAcquire("::1", 1e9, 5))
    assert.isTrue(counts.tryAcquire("10.0.0.0", 1e9, 5))
    counts.release("10.0.0.7")
    assert.isTrue(counts.tryAcquire("::1", 1e9, 5))
    assert.strictEqual(counts.total, 769)
  })

  it("sizes its table from the capacity, and takes back only a buffer it made", () => {
    assert.strictEqual(SharedConnectionCounts.make(1).buffer.byteLength, (4 + 1024 * 3) * 4)
    assert.strictEqual(SharedConnectionCounts.make(3000).buffer.byteLength, (4 + 8192 * 3) * 4)
    assert.strictEqual(SharedConnectionCounts.make(1e9).buffer.byteLength, (4 + 2 ** 20 * 3) * 4)
    const counts = SharedConnectionCounts.make(10)
    const attached = SharedConnectionCounts.attach(counts.buffer)
    assert.isTrue(attached.tryAcquire("::1", 10, 10))
    assert.strictEqual(counts.countOf("::1"), 1)
    assert.throws(() => SharedConnectionCounts.attach(new SharedArrayBuffer(64)), RangeError)
  })

  it("holds the caps exactly across worker threads hammering the same counts", async () => {
    const counts = SharedConnectionCounts.make(8)
    const gate = new SharedArrayBuffer(4)
    const input = {
      buffer: counts.buffer,
      gate,
      addresses: ["127.0.0.1", "::1", "10.0.0.1"],
      maxTotal: 5,
      maxPerAddress: 2,
      rounds: 400_000
    }
    const reports = Array.from({ length: 4 }, () => hammer(input))
    Atomics.store(new Int32Array(gate), 0, 1)
    Atomics.notify(new Int32Array(gate), 0)
    const outputs = await within(Promise.all(reports), 30_000, "the workers report")
    for (const output of outputs) {
      assert.isAtMost(output.maxTotal, 5)
      assert.isAtMost(output.maxPerAddress, 2)
      assert.isAbove(output.acquired, 0)
    }
    assert.isAbove(
      outputs.reduce((refused, output) => refused + output.refused, 0),
      0,
      "the threads ran into the caps"
    )
    assert.strictEqual(counts.total, 0)
    for (const address of input.addresses) assert.strictEqual(counts.countOf(address), 0)
  })

  it("makes two guards sharing counts refuse the third connection from one address, whichever gets it", () => {
    const shared = SharedConnectionCounts.make(8)
    const limits = { ...defaultConnectionLimits, maxConnectionsPerAddress: 2, handshakeTimeoutMillis: 0, shared }
    const first = new ConnectionGuard(limits)
    const second = new ConnectionGuard(limits)
    const a = fakeSocket("127.0.0.1")
    const b = fakeSocket("127.0.0.1")
    assert.isDefined(admit(first, a))
    assert.isDefined(admit(second, b))
    for (const guard of [first, second]) {
      const third = fakeSocket("127.0.0.1")
      assert.isUndefined(admit(guard, third))
      assert.isTrue(third.destroyed)
    }
    assert.isDefined(admit(second, fakeSocket("::ffff:127.0.0.2")))
    assert.deepStrictEqual([first.counts.refused, second.counts.refused, first.open, second.open], [1, 1, 1, 2])
    assert.strictEqual(shared.total, 3)
    a.destroy()
    a.destroy()
    assert.strictEqual(shared.countOf("127.0.0.1"), 1, "a socket is counted out once")
    assert.isDefined(admit(second, fakeSocket("127.0.0.1")))
    assert.strictEqual(shared.total, 3)
  })

  it("makes two servers on one port (reusePort) refuse the third connection from 127.0.0.1", async () => {
    const shared = SharedConnectionCounts.make(8)
    const options = { reusePort: true, connections: { maxConnectionsPerAddress: 2, shared } }
    const servers = [new Http2Server(options), new Http2Server(options)] as const
    try {
      const port = await listen(servers[0], "127.0.0.1:0")
      assert.strictEqual(await listen(servers[1], `127.0.0.1:${port}`), port)
      const first = await session(port)
      const second = await session(port)
      const third = net.connect({ port, host: "127.0.0.1" })
      third.on("error", () => {})
      await within(new Promise((resolve) => third.once("close", resolve)), 2000, "the third connection is closed")
      const stats = servers.map((server) => server.stats)
      assert.strictEqual((stats[0]?.refused ?? 0) + (stats[1]?.refused ?? 0), 1)
      assert.strictEqual((stats[0]?.connections ?? 0) + (stats[1]?.connections ?? 0), 2)
      assert.strictEqual(shared.countOf("127.0.0.1"), 2)
      first.session.close()
      second.session.close()
      await Promise.all([first.closed, second.closed])
      await until(() => shared.total === 0, "the servers count the closed connections out")
    } finally {
      for (const server of servers) server.forceShutdown()
    }
  })
})
