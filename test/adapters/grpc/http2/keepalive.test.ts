import { assert, describe, it } from "@effect/vitest"
import { Connection } from "../../../../src/adapters/grpc/http2/Connection.ts"
import { recordPing } from "../../../../src/adapters/grpc/http2/keepalive.ts"
import { protocolOf } from "../../../../src/adapters/grpc/http2/protocolSniffer.ts"

const policy = { minTimeMillis: 10_000, maxStrikes: 2, watchPauseMillis: 1000 }

/**
 * Feeds pings at `instants` (ms) to a fresh connection. Before ping `i`, the server sends `dataBefore.get(i)`
 * bytes of data and the client `settingsBefore.get(i)` SETTINGS frames; each ping and SETTINGS frame is
 * acknowledged right after the ping that follows it is seen, as Node writes them. Gives the verdict of each.
 */
const verdicts = (
  instants: ReadonlyArray<number>,
  dataBefore: ReadonlyMap<number, number> = new Map(),
  settingsBefore: ReadonlyMap<number, number> = new Map()
) => {
  const connection = new Connection("1.2.3.4", 0)
  let written = 15 // the server's own SETTINGS
  let unacknowledged = 0
  return instants.map((now, i) => {
    const settings = settingsBefore.get(i) ?? 0
    connection.settings += settings
    written += unacknowledged + (dataBefore.get(i) ?? 0)
    const verdict = recordPing(connection, policy, now, written)
    unacknowledged = 17 + 9 * settings
    return verdict === "tooMany"
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
      [4, 14]
    ])
    assert.deepStrictEqual(verdicts([0, 1, 2, 3, 4, 5], data), [false, false, false, false, false, false])
  })

  it("tells a ping that follows data from one that does not", () => {
    const connection = new Connection("1.2.3.4", 0)
    assert.strictEqual(recordPing(connection, policy, 0, 200), "afterData")
    assert.strictEqual(recordPing(connection, policy, 1, 200 + 17), "counted")
    assert.strictEqual(recordPing(connection, policy, 2, 200 + 17 + 17 + 5), "afterData")
  })

  it("does not count the acknowledgements of pings and SETTINGS frames as data, however many SETTINGS come", () => {
    const settings = new Map([
      [1, 2],
      [2, 2],
      [3, 2]
    ])
    assert.deepStrictEqual(verdicts([0, 1, 2, 3], new Map(), settings), [false, false, false, true])
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
