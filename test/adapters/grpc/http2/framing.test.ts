import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { frame, MessageReader, type MessageSink } from "../../../../src/adapters/grpc/http2/framing.ts"

/** A sink that keeps each message as `flag:hex`. */
const collect = (): MessageSink & { readonly messages: Array<string> } => {
  const messages: Array<string> = []
  return { messages, onMessage: (flag, payload) => messages.push(`${flag}:${payload.toString("hex")}`) }
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
          assert.strictEqual(reader.read(bytes.subarray(from, to), sink), -1)
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
    assert.strictEqual(reader.read(Buffer.concat([frame(Uint8Array.of(1, 2, 3, 4)), Buffer.from([0, 0, 0])]), sink), -1)
    assert.strictEqual(reader.read(Buffer.from([0, 5]), sink), 5)
    assert.deepStrictEqual(sink.messages, ["0:01020304"])
  })

  it("is not idle in the middle of a message", () => {
    const reader = new MessageReader(-1)
    reader.read(frame(Uint8Array.of(1, 2)).subarray(0, 6), collect())
    assert.isFalse(reader.idle)
  })
})
