import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import type { TrustOptions } from "../../../src/adapters/grpc/clientAddress.ts"
import {
  callClientAddress,
  clientAddress,
  formatIp,
  limiterKey,
  parseIp,
  parsePeer
} from "../../../src/adapters/grpc/clientAddress.ts"

const hex = (bytes: Uint8Array | undefined): string | undefined =>
  bytes === undefined ? undefined : Buffer.from(bytes).toString("hex")

const metadataOf = (headers: Record<string, string>): grpc.Metadata => {
  const metadata = new grpc.Metadata()
  for (const [key, value] of Object.entries(headers)) metadata.add(key, value)
  return metadata
}

const trustBoth: TrustOptions = { trustXRealIp: true, trustXForwardedFor: true }

interface Case {
  readonly name: string
  readonly peer: string
  readonly headers?: Record<string, string>
  readonly trust?: TrustOptions
  readonly expected: string | undefined
}

const cases: ReadonlyArray<Case> = [
  { name: "T40: IPv4 loopback peer", peer: "127.0.0.1:51234", expected: "7f000001" },
  {
    name: "T41: trusted X-Real-IP",
    peer: "127.0.0.1:51234",
    headers: { "x-real-ip": "1.2.3.4" },
    trust: trustBoth,
    expected: "01020304"
  },
  {
    name: "T42: trusted first X-Forwarded-For entry",
    peer: "127.0.0.1:51234",
    headers: { "x-forwarded-for": "5.6.7.8,192.168.0.0.1" },
    trust: trustBoth,
    expected: "05060708"
  },
  {
    name: "a private IPv4 peer",
    peer: "10.0.0.7:443",
    expected: "0a000007"
  },
  {
    name: "headers are ignored by default",
    peer: "127.0.0.1:1",
    headers: { "x-real-ip": "1.2.3.4", "x-forwarded-for": "5.6.7.8" },
    expected: "7f000001"
  },
  {
    name: "X-Real-IP wins over X-Forwarded-For",
    peer: "127.0.0.1:1",
    headers: { "x-real-ip": "1.2.3.4", "x-forwarded-for": "5.6.7.8" },
    trust: trustBoth,
    expected: "01020304"
  },
  {
    name: "only X-Forwarded-For trusted",
    peer: "127.0.0.1:1",
    headers: { "x-real-ip": "1.2.3.4", "x-forwarded-for": "5.6.7.8" },
    trust: { trustXForwardedFor: true },
    expected: "05060708"
  },
  {
    name: "an invalid X-Real-IP falls through to X-Forwarded-For",
    peer: "127.0.0.1:1",
    headers: { "x-real-ip": "1.2.3.4:80", "x-forwarded-for": "5.6.7.8" },
    trust: trustBoth,
    expected: "05060708"
  },
  {
    name: "X-Real-IP is not trimmed",
    peer: "127.0.0.1:1",
    headers: { "x-real-ip": " 1.2.3.4" },
    trust: trustBoth,
    expected: "7f000001"
  },
  {
    name: "X-Forwarded-For entry is trimmed",
    peer: "127.0.0.1:1",
    headers: { "x-forwarded-for": "  9.8.7.6 , 1.1.1.1" },
    trust: trustBoth,
    expected: "09080706"
  },
  {
    name: "an invalid X-Forwarded-For falls through to the peer",
    peer: "127.0.0.1:1",
    headers: { "x-forwarded-for": "unknown, 1.1.1.1" },
    trust: trustBoth,
    expected: "7f000001"
  },
  {
    name: "a mapped IPv4 in X-Real-IP stays 16 bytes",
    peer: "127.0.0.1:1",
    headers: { "x-real-ip": "::ffff:1.2.3.4" },
    trust: trustBoth,
    expected: "00000000000000000000ffff01020304"
  },
  {
    name: "an IPv6 zone in X-Real-IP is appended",
    peer: "127.0.0.1:1",
    headers: { "x-real-ip": "fe80::1%eth0" },
    trust: trustBoth,
    expected: `fe800000000000000000000000000001${Buffer.from("eth0").toString("hex")}`
  },
  {
    name: "a mapped IPv4 peer from a dual-stack socket gives 4 bytes",
    peer: "::ffff:127.0.0.1:40000",
    expected: "7f000001"
  },
  { name: "an IPv6 peer as grpc-js prints it", peer: "::1:40000", expected: "00000000000000000000000000000001" },
  { name: "a bracketed IPv6 peer", peer: "[2001:db8::5]:40000", expected: "20010db8000000000000000000000005" },
  {
    name: "an IPv6 peer with a zone",
    peer: "fe80::2%lo:40000",
    expected: `fe800000000000000000000000000002${Buffer.from("lo").toString("hex")}`
  },
  { name: "an unknown peer gives no address", peer: "unknown", expected: undefined },
  { name: "a peer without a port gives no address", peer: "127.0.0.1", expected: undefined }
]

describe("clientAddress", () => {
  for (const c of cases) {
    it(c.name, () => {
      assert.strictEqual(hex(clientAddress(c.peer, metadataOf(c.headers ?? {}), c.trust)), c.expected)
    })
  }

  it("takes the first value of a repeated header", () => {
    const metadata = metadataOf({ "x-real-ip": "1.2.3.4" })
    metadata.add("x-real-ip", "5.6.7.8")
    assert.strictEqual(hex(clientAddress("127.0.0.1:1", metadata, trustBoth)), "01020304")
  })

  it("parses the transport peer of every IPv4 and IPv6 address", () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.nat({ max: 65535 }), (ip, port) => {
        assert.strictEqual(hex(parsePeer(`${ip}:${port}`)), Buffer.from(ip.split(".").map(Number)).toString("hex"))
      })
    )
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), fc.nat({ max: 65535 }), (bytes, port) => {
        const groups: Array<string> = []
        for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16))
        const mapped = bytes.subarray(0, 12).every((b, i) => (i < 10 ? b === 0 : b === 0xff))
        const expected = mapped ? bytes.subarray(12) : bytes
        assert.strictEqual(hex(parsePeer(`${groups.join(":")}:${port}`)), Buffer.from(expected).toString("hex"))
      })
    )
  })
})

describe("callClientAddress", () => {
  /** A call whose metadata getter counts its reads, as the http2 transport's calls build theirs when first read. */
  const callOf = (peer: string, headers: Record<string, string>) => {
    const call = {
      reads: 0,
      get metadata() {
        call.reads++
        return metadataOf(headers)
      },
      getPeer: () => peer
    }
    return call
  }

  for (const c of cases) {
    it(c.name, () => {
      assert.strictEqual(hex(callClientAddress(callOf(c.peer, c.headers ?? {}), c.trust)), c.expected)
    })
  }

  it("never reads the metadata when no header is trusted", () => {
    const call = callOf("127.0.0.1:1", { "x-real-ip": "1.2.3.4" })
    assert.strictEqual(hex(callClientAddress(call)), "7f000001")
    assert.strictEqual(hex(callClientAddress(call, { trustXRealIp: false, trustXForwardedFor: false })), "7f000001")
    assert.strictEqual(call.reads, 0)
    assert.strictEqual(hex(callClientAddress(call, { trustXRealIp: true })), "01020304")
    assert.strictEqual(call.reads, 1)
  })
})

describe("parseIp", () => {
  const valid: ReadonlyArray<readonly [string, string]> = [
    ["0.0.0.0", "00000000"],
    ["255.255.255.255", "ffffffff"],
    ["::", "00000000000000000000000000000000"],
    ["::1", "00000000000000000000000000000001"],
    ["1::", "00010000000000000000000000000000"],
    ["1:2:3:4:5:6:7:8", "00010002000300040005000600070008"],
    ["1:2:3:4:5:6:7::", "00010002000300040005000600070000"],
    ["2001:DB8::abcd", "20010db800000000000000000000abcd"],
    ["::1.2.3.4", "00000000000000000000000001020304"],
    ["1:2:3:4:5:6:1.2.3.4", "00010002000300040005000601020304"]
  ]
  for (const [text, expected] of valid) {
    it(`parses ${text}`, () => assert.strictEqual(hex(parseIp(text)), expected))
  }

  const invalid = [
    "",
    "1.2.3",
    "1.2.3.4.5",
    "01.2.3.4",
    "256.1.1.1",
    "1.2.3.-4",
    "1.2.3.4%eth0",
    "1.2.3.4:80",
    "[::1]",
    ":::",
    "1::2::3",
    "1:2:3:4:5:6:7:8:9",
    "::1:2:3:4:5:6:7:8",
    "1:2:3:4:5:6:7",
    "12345::",
    "fe80::1%",
    "1:2:3:4:5:1.2.3.4",
    "::1.2.3",
    "g::1",
    "1:",
    ":1"
  ]
  for (const text of invalid) {
    it(`rejects ${JSON.stringify(text)}`, () => assert.strictEqual(parseIp(text), undefined))
  }
})

describe("formatIp", () => {
  const cases: ReadonlyArray<readonly [string, string]> = [
    ["1.2.3.4", "1.2.3.4"],
    ["0.0.0.0", "0.0.0.0"],
    ["::", "::"],
    ["::1", "::1"],
    ["1::", "1::"],
    ["2001:DB8::1", "2001:db8::1"],
    ["2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"],
    ["2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"],
    ["1:0:0:2:0:0:0:3", "1:0:0:2::3"],
    ["0:0:1:0:0:0:0:2", "0:0:1::2"],
    ["fe80::1%eth0", "fe80::1%eth0"],
    ["::ffff:1.2.3.4", "::ffff:1.2.3.4"],
    ["::ffff:1.2.3.4%z", "::ffff:1.2.3.4%z"],
    ["0001:0002:0003:0004:0005:0006:0007:0008", "1:2:3:4:5:6:7:8"]
  ]
  for (const [text, expected] of cases) {
    it(`formats ${text} as Go does`, () => assert.strictEqual(formatIp(parseIp(text)), expected))
  }

  it("round-trips through parseIp", () =>
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 16, maxLength: 16 }), (bytes) => {
        assert.deepStrictEqual(parseIp(formatIp(bytes)), bytes)
      })
    ))

  it("shows a missing or malformed address as Go's invalid IP", () => {
    assert.strictEqual(formatIp(undefined), "invalid IP")
    assert.strictEqual(formatIp(new Uint8Array(5)), "invalid IP")
  })
})

describe("limiterKey", () => {
  it("counts an IPv4-mapped IPv6 address as its IPv4 address (Q10), and keeps zones apart", () => {
    assert.strictEqual(limiterKey(parseIp("::ffff:1.2.3.4")!), "1.2.3.4")
    assert.strictEqual(limiterKey(parseIp("::ffff:1.2.3.4%eth0")!), "1.2.3.4")
    assert.strictEqual(limiterKey(parseIp("1.2.3.4")!), "1.2.3.4")
    assert.strictEqual(limiterKey(parseIp("fe80::1%eth0")!), "fe80::1%eth0")
    assert.notStrictEqual(limiterKey(parseIp("fe80::1%eth0")!), limiterKey(parseIp("fe80::1%eth1")!))
  })
})
