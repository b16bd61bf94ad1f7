import { assert, describe, it } from "@effect/vitest"
import { Connection } from "../../../../src/adapters/grpc/http2/Connection.ts"
import { recordPing } from "../../../../src/adapters/grpc/http2/keepalive.ts"
import { protocolOf } from "../../../../src/adapters/grpc/http2/protocolSniffer.ts"

const policy = { minTimeMillis: 10_000, maxStrikes: 2 }

/** Feeds pings at `instants` (ms) to a fresh connection; gives the verdict of each. */
/**
 * Feeds pings at `instants` (ms) to a fresh connection that sends `sentBefore.get(i)` bytes (17, a ping's
 * acknowledgement, by default) before ping `i`; gives the verdict of each.
 */
const verdicts = (instants: ReadonlyArray<number>, sentBefore: ReadonlyMap<number, number> = new Map()) => {
  const connection = new Connection("1.2.3.4", 0)
  let bytes = 0
  return instants.map((now, i) => {
    bytes += sentBefore.get(i) ?? 17
    return recordPing(connection, policy, now, bytes)
  })
}

describe("keepalive policy", () => {
  it("welcomes pings at least the minimum interval apart, such as the Go client's every 10 s", () => {
    assert.deepStrictEqual(verdicts(Array.from({ length: 50 }, (_, i) => i * 10_000)), Array(50).fill(false))
  })

  it("tolerates two early pings and ends the connection at the third, as grpc-go counts", () => {
    assert.deepStrictEqual(verdicts([0, 1000, 2000, 3000]), [false, false, false, true])
    assert.deepStrictEqual(verdicts([0, 9_999, 19_998, 29_997]), [false, false, false, true])
  })

  it("keeps counting strikes across a well-spaced ping, and starts afresh after the server sent data", () => {
    assert.deepStrictEqual(verdicts([0, 1000, 20_000, 21_000, 22_000]), [false, false, false, false, true])
    const data = new Map([
      [2, 200],
      [4, 44]
    ])
    assert.deepStrictEqual(verdicts([0, 1, 2, 3, 4, 5], data), [false, false, false, false, false, false])
  })

  it("does not count the acknowledgements of a ping and a SETTINGS frame as data", () => {
    const control = new Map([
      [1, 17 + 9],
      [2, 26],
      [3, 17]
    ])
    assert.deepStrictEqual(verdicts([0, 1, 2, 3], control), [false, false, false, true])
  })
})

describe("protocol sniffing", () => {
  it("tells the HTTP/2 preface from HTTP/1.1 methods, waiting while the bytes are a start of PRI", () => {
    const of = (text: string) => protocolOf(Buffer.from(text, "latin1"))
    assert.strictEqual(of("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), "http2")
    assert.strictEqual(of("PRI "), "http2")
    for (const partial of ["", "P", "PR", "PRI"]) assert.isUndefined(of(partial))
    for (const request of ["GET / HTTP/1.1\r\n", "POST /x HTTP/1.1", "PUT", "PATCH", "PRX", "\x16\x03\x01"]) {
      assert.strictEqual(of(request), "http1", request)
    }
  })
})
