import { EventEmitter } from "node:events"
import { setImmediate as nextTurn } from "node:timers/promises"
import { assert, describe, it } from "@effect/vitest"
import { CallSink, FanOut, type WritableCall, waitingMax } from "../../../src/adapters/grpc/watchSink.ts"
import type { WatchDelta } from "../../../src/ports/ClusterApi.ts"
import { lostUpdateMessage, SubscriptionLost } from "../../../src/ports/DiscoveryError.ts"

/** A call that takes `room` writes before it pushes back, and drains when told. */
class FakeCall extends EventEmitter implements WritableCall {
  destroyed = false
  writableEnded = false
  readonly written: Array<number> = []
  room: number
  constructor(room = Number.POSITIVE_INFINITY) {
    super()
    this.room = room
  }
  write(bytes: Uint8Array): boolean {
    this.written.push(bytes[0]!)
    return --this.room > 0
  }
  drain(room: number): void {
    this.room = room
    this.emit("drain")
  }
}

const delta = (revision: number): WatchDelta => ({ _tag: "Deleted", revision, affiliateId: `a${revision}` })
const encode = (d: WatchDelta) => Uint8Array.of(d.revision)
const lost = new SubscriptionLost({ message: lostUpdateMessage })

const sinkOn = (call: FakeCall, fanOut = new FanOut(), capacity = 4) => {
  const counts: Array<number> = []
  const sink = new CallSink(call, fanOut, encode, (n) => counts.push(n), capacity)
  return { sink, counts }
}

describe("CallSink", () => {
  it("writes the snapshot first, then the deltas offered before and after start, in order", async () => {
    const call = new FakeCall()
    const { sink, counts } = sinkOn(call)
    assert.isTrue(sink.offer(delta(2)))
    sink.start([Uint8Array.of(1)])
    assert.isTrue(sink.offer(delta(3)))
    assert.deepStrictEqual(call.written, [1])
    await nextTurn()
    assert.deepStrictEqual(call.written, [1, 2, 3])
    assert.deepStrictEqual(counts, [1, 2])
  })

  it("holds at most `capacity` unwritten deltas while the call pushes back, then resumes on drain", async () => {
    const call = new FakeCall(1)
    const { sink } = sinkOn(call, new FanOut(), 2)
    sink.start([Uint8Array.of(0)])
    await nextTurn()
    // Still pushed back a turn later: the client is behind.
    assert.isTrue(sink.offer(delta(1)))
    assert.isTrue(sink.offer(delta(2)))
    assert.isFalse(sink.offer(delta(3)), "a third unwritten delta does not fit")
    await nextTurn()
    assert.deepStrictEqual(call.written, [0])
    call.drain(10)
    await nextTurn()
    assert.deepStrictEqual(call.written, [0, 1, 2])
  })

  it("adds one drain listener however many snapshot messages the call refuses", () => {
    const call = new FakeCall(1)
    const { sink } = sinkOn(call)
    sink.start(Array.from({ length: 20 }, (_, i) => Uint8Array.of(i)))
    assert.strictEqual(call.written.length, 20, "the whole snapshot is handed to the call")
    assert.strictEqual(call.listenerCount("drain"), 1)
  })

  it("does not count deltas offered in the turn its call pushed back in against the cut-off", async () => {
    // A gRPC call's buffer cannot drain before the event loop turns, so a burst of changes handled in one turn
    // fills it whatever the client does; the cut-off is for clients still behind a turn later.
    const call = new FakeCall(16)
    const { sink } = sinkOn(call, new FanOut(), 4)
    sink.start([])
    const results = await new Promise<Array<boolean>>((resolve) => {
      const taken: Array<boolean> = []
      for (let i = 1; i <= 40; i++) {
        setImmediate(() => {
          taken.push(sink.offer(delta(i)))
          if (i === 40) resolve(taken)
        })
      }
    })
    assert.isTrue(results.every(Boolean), `refused at offer ${results.indexOf(false) + 1}`)
    await nextTurn()
    for (let i = 0; i < 4; i++) sink.offer(delta(100 + i))
    assert.isFalse(sink.offer(delta(200)), "a turn later, with the call still pushing back, the cut-off applies")
  })

  it("does not count deltas that only wait for the fan-out's turn against the cut-off", () => {
    const call = new FakeCall()
    const { sink } = sinkOn(call, new FanOut(), 2)
    sink.start([])
    for (let i = 0; i < 100; i++) assert.isTrue(sink.offer(delta(i)), `delta ${i} while not pushed back`)
    const full = sinkOn(new FakeCall(), new FanOut(), 2).sink
    full.start([])
    for (let i = 0; i < waitingMax; i++) full.offer(delta(i))
    assert.isFalse(full.offer(delta(0)), "but a sink never holds more than waitingMax")
  })

  it("reports its end only after the deltas offered before it are written", async () => {
    const call = new FakeCall(1)
    const { sink } = sinkOn(call)
    const ended: Array<unknown> = []
    sink.start([Uint8Array.of(0)])
    sink.offer(delta(1))
    sink.end(lost)
    sink.whenEnded((error) => ended.push(error))
    await nextTurn()
    assert.deepStrictEqual(ended, [])
    call.drain(10)
    await nextTurn()
    assert.deepStrictEqual(call.written, [0, 1])
    assert.deepStrictEqual(ended, [lost])
    const late: Array<unknown> = []
    sink.whenEnded((error) => late.push(error))
    assert.deepStrictEqual(late, [lost], "a listener added after the end hears of it at once")
  })

  it("writes nothing more once closed or once the call is gone", async () => {
    const closed = new FakeCall()
    const gone = new FakeCall()
    const a = sinkOn(closed).sink
    const b = sinkOn(gone).sink
    a.start([])
    b.start([])
    a.offer(delta(1))
    b.offer(delta(1))
    a.close()
    gone.destroyed = true
    await nextTurn()
    assert.deepStrictEqual(closed.written, [])
    assert.deepStrictEqual(gone.written, [])
    assert.isTrue(a.offer(delta(2)), "a closed sink swallows offers instead of being cut off again")
  })
})

describe("FanOut", () => {
  it("writes a batch of sinks per turn of the event loop, in the order they became ready", async () => {
    const fanOut = new FanOut(2, 2)
    const calls = Array.from({ length: 5 }, () => new FakeCall())
    const sinks = calls.map((call) => sinkOn(call, fanOut).sink)
    for (const sink of sinks) sink.start([])
    for (const sink of sinks) sink.offer(delta(7))
    const writtenAfter: Array<number> = []
    for (let turn = 0; turn < 3; turn++) {
      await nextTurn()
      writtenAfter.push(calls.filter((call) => call.written.length > 0).length)
    }
    assert.deepStrictEqual(writtenAfter, [2, 4, 5])
  })

  it("keeps 1000 watchers that read everything under an update every turn, holding a bounded queue", async () => {
    const fanOut = new FanOut()
    const calls = Array.from({ length: 1000 }, () => new FakeCall())
    const sinks = calls.map((call) => sinkOn(call, fanOut, 32).sink)
    for (const sink of sinks) sink.start([])
    let refused = 0
    let mostSlots = 0
    for (let turn = 0; turn < 300; turn++) {
      for (let n = 0; n < 3; n++) for (const sink of sinks) if (!sink.offer(delta(turn))) refused++
      await nextTurn()
      mostSlots = Math.max(mostSlots, fanOut.slots)
    }
    assert.strictEqual(refused, 0, "no watcher that keeps up is cut off")
    assert.isBelow(mostSlots, 1024 + 2 * sinks.length, "run slots are dropped while the queue never empties")
    for (let turn = 0; turn < 100 && fanOut.waiting > 0; turn++) await nextTurn()
    assert.strictEqual(fanOut.waiting, 0)
    assert.isTrue(calls.every((call) => call.written.length === 900))
  })

  it("writes a burst's first batch once the code that offered it returns, before the event loop turns", async () => {
    const fanOut = new FanOut(8, 2)
    const calls = Array.from({ length: 3 }, () => new FakeCall())
    const sinks = calls.map((call) => sinkOn(call, fanOut).sink)
    for (const sink of sinks) sink.start([])
    for (const sink of sinks) sink.offer(delta(1))
    assert.isTrue(
      calls.every((call) => call.written.length === 0),
      "nothing is written while the change is still being made"
    )
    await Promise.resolve()
    assert.deepStrictEqual(
      calls.map((call) => call.written.length),
      [1, 1, 0]
    )
  })

  it("starts a burst with a small batch and doubles it each turn up to the most", async () => {
    const fanOut = new FanOut(8, 2)
    const burst = async (count: number, turns: number) => {
      const calls = Array.from({ length: count }, () => new FakeCall())
      const sinks = calls.map((call) => sinkOn(call, fanOut).sink)
      for (const sink of sinks) sink.start([])
      for (const sink of sinks) sink.offer(delta(1))
      const writtenAfter: Array<number> = []
      for (let turn = 0; turn < turns; turn++) {
        await nextTurn()
        writtenAfter.push(calls.filter((call) => call.written.length > 0).length)
      }
      return writtenAfter
    }
    assert.deepStrictEqual(await burst(30, 5), [2, 6, 14, 22, 30])
    assert.deepStrictEqual(await burst(3, 2), [2, 3], "the next burst starts small again")
  })
})
