import { assert, describe, it } from "@effect/vitest"
import { parseListenAddress } from "../../../src/adapters/http/listener.ts"
import { parseQuery } from "../../../src/adapters/http/LandingServer.ts"
import { escapeHtml, toHex } from "../../../src/adapters/http/pages.ts"

describe("listener", () => {
  it("reads Go-style listen addresses", () => {
    assert.deepStrictEqual(parseListenAddress(":3001"), { port: 3001 })
    assert.deepStrictEqual(parseListenAddress("127.0.0.1:0"), { host: "127.0.0.1", port: 0 })
    assert.deepStrictEqual(parseListenAddress("[::1]:2122"), { host: "::1", port: 2122 })
    assert.deepStrictEqual(parseListenAddress("localhost:80"), { host: "localhost", port: 80 })
  })

  it("refuses addresses without a valid port", () => {
    for (const address of ["", "3001", ":", ":http", ":65536", "::1:80", "host:-1"]) {
      assert.isUndefined(parseListenAddress(address), address)
    }
  })
})

describe("parseQuery", () => {
  it("decodes like Go's url.ParseQuery and keeps the first value of a key", () => {
    const parsed = parseQuery("clusterID=a+b%2Fc&clusterID=second&flag&=x")
    assert.strictEqual(parsed._tag, "Ok")
    if (parsed._tag === "Ok") {
      assert.strictEqual(parsed.values.get("clusterID"), "a b/c")
      assert.strictEqual(parsed.values.get("flag"), "")
    }
  })

  it("reports bad escapes, semicolons and bytes that are not UTF-8", () => {
    assert.deepStrictEqual(parseQuery("a=%zz"), { _tag: "Malformed", message: 'invalid URL escape "%zz"' })
    assert.deepStrictEqual(parseQuery("a=%4"), { _tag: "Malformed", message: 'invalid URL escape "%4"' })
    assert.deepStrictEqual(parseQuery("a=1;b=2"), {
      _tag: "Malformed",
      message: "invalid semicolon separator in query"
    })
    assert.deepStrictEqual(parseQuery("a=%ff"), { _tag: "Malformed", message: "invalid UTF-8 in query" })
  })
})

describe("pages", () => {
  it("escapes the five HTML-special characters", () => {
    assert.strictEqual(escapeHtml(`<a href="x">'&'</a>`), "&lt;a href=&#34;x&#34;&gt;&#39;&amp;&#39;&lt;/a&gt;")
  })

  it("writes bytes as lowercase hex, honouring views into larger buffers", () => {
    const backing = new Uint8Array([1, 0xab, 0xcd, 2])
    assert.strictEqual(toHex(backing.subarray(1, 3)), "abcd")
    assert.strictEqual(toHex(new Uint8Array()), "")
  })
})
