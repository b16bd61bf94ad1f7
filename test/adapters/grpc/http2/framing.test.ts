import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { frame, MessageReader, type MessageSink } from "../../../../src/adapters/grpc/http2/framing.ts"

/** A sink that keeps each message as `flag:hex`, and the reservations asked of it (granted up to `room` bytes). */
const collect = (
  room = Number.POSITIVE_INFINITY
): MessageSink & { readonly messages: Array<string>; readonly reservations: Array<number> } => {
  const messages: Array<string> = []
  const reservations: Array<number> = []
  let left = room
  return {
    messages,
    reservations,
    onMessage: (flag, payload) => {
      messages.push(`${flag}:${payload.toString("hex")}`)
      return true
    },
    reserve: (bytes) => {
      reservations.push(bytes)
      if (bytes > left) return false
      left -= bytes
      return true
    }
  }
}

describe("framing", () => {
  it("frames a message with its flag byte and big-endian length", () => {
    assert.strictEqual(frame(Uint8Array.of(1, 2, 3)).toString("hex"), "0000000003010203")
    assert.strictEqual(frame(new Uint8Array(0)).toString("hex"), "0000000000")
  })

  it("reads the same messages however the bytes are cut into chunks", () => {
    const message = fc.record({ flag: fc.constantFrom(0, 1), payload: fc.uint8Array({ maxLength: 300 }) })
    fc.assert(
      fc.property(fc.array(message, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 20 }), (messages, cuts) => {
        const bytes = Buffer.concat(
          messages.map(({ flag, payload }) => {
            const framed = frame(payload)
            if (payload.length > 0) framed[0] = flag
            return framed
          })
        )
        const points = [...new Set(cuts.map((cut) => (bytes.length === 0 ? 0 : cut % bytes.length)))].sort(
          (a, b) => a - b
        )
        const reader = new MessageReader(-1)
        const sink = collect()
        let from = 0
        for (const to of [...points, bytes.length]) {
          assert.strictEqual(reader.read(bytes.subarray(from, to), sink), undefined)
          from = to
        }
        assert.isTrue(reader.idle)
        assert.deepStrictEqual(
          sink.messages,
          messages.map(
            ({ flag, payload }) => `${payload.length > 0 ? flag : 0}:${Buffer.from(payload).toString("hex")}`
          )
        )
      })
    )
  })

  it("gives the length of a message over the limit as soon as its prefix is read", () => {
    const reader = new MessageReader(4)
    const sink = collect()
    assert.strictEqual(
      reader.read(Buffer.concat([frame(Uint8Array.of(1, 2, 3, 4)), Buffer.from([0, 0, 0])]), sink),
      undefined
    )
    assert.deepStrictEqual(reader.read(Buffer.from([0, 5]), sink), { _tag: "TooLong", length: 5 })
    assert.deepStrictEqual(sink.messages, ["0:01020304"])
  })

  it("asks the sink to reserve a message split over chunks before gathering it, and stops when refused", () => {
    const length = 3000
    const framed = frame(new Uint8Array(length).fill(7))
    const granted = collect()
    const reader = new MessageReader(-1)
    assert.strictEqual(reader.read(framed.subarray(0, 3), granted), undefined)
    assert.deepStrictEqual(granted.reservations, [], "not before the prefix is whole")
    assert.strictEqual(reader.read(framed.subarray(3, 100), granted), undefined)
    assert.strictEqual(reader.read(framed.subarray(100), granted), undefined)
    assert.deepStrictEqual(granted.reservations, [length])
    assert.deepStrictEqual(granted.messages, [`0:${"07".repeat(length)}`])

    const refused = collect(length - 1)
    assert.deepStrictEqual(new MessageReader(-1).read(framed.subarray(0, 100), refused), {
      _tag: "OverBudget",
      length
    })
    assert.deepStrictEqual(refused.messages, [])
  })

  it("reserves nothing for messages that arrive whole, and hands them over as views of the chunk", () => {
    const sink = collect(0)
    const chunk = Buffer.concat([frame(new Uint8Array(20_000)), frame(Uint8Array.of(1, 2))])
    assert.strictEqual(new MessageReader(-1).read(chunk, sink), undefined)
    assert.deepStrictEqual(sink.reservations, [])
    assert.strictEqual(sink.messages.length, 2)
  })

  it("stops reading a chunk once the sink says the call is over, reserving nothing after", () => {
    const reservations: Array<number> = []
    let seen = 0
    const stopping: MessageSink = {
      onMessage: () => {
        seen++
        return false
      },
      reserve: (bytes) => {
        reservations.push(bytes)
        return true
      }
    }
    const chunk = Buffer.concat([frame(Uint8Array.of(1)), frame(Uint8Array.of(2)), frame(new Uint8Array(4 << 20))])
    assert.strictEqual(new MessageReader(-1).read(chunk.subarray(0, 20), stopping), undefined)
    assert.strictEqual(seen, 1)
    assert.deepStrictEqual(reservations, [])
  })

  it("is not idle in the middle of a message", () => {
    const reader = new MessageReader(-1)
    reader.read(frame(Uint8Array.of(1, 2)).subarray(0, 6), collect())
    assert.isFalse(reader.idle)
  })
})
