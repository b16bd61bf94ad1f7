import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import { encodeMessage, trailers, trailersOnly } from "../../../../src/adapters/grpc/http2/responseHeaders.ts"

describe("responseHeaders", () => {
  it("percent-encodes what is not printable ASCII, and the percent sign, byte by byte", () => {
    assert.strictEqual(encodeMessage("plain text: ok!"), "plain text: ok!")
    assert.strictEqual(encodeMessage("100% ü\n\t~"), "100%25 %C3%BC%0A%09~")
    assert.strictEqual(encodeMessage("😀"), "%F0%9F%98%80")
    for (const message of ["a%b", "naïve — “quoted”", "\u0000\u007f"]) {
      assert.strictEqual(decodeURIComponent(encodeMessage(message)), message)
    }
  })

  it("puts the status, the message when there is one, and the metadata in the trailers", () => {
    assert.deepStrictEqual(trailers({ code: 0, details: "" }), { "grpc-status": "0" })
    const metadata = new grpc.Metadata()
    metadata.set("x-a", "1")
    metadata.set("x-b-bin", Buffer.from([255]))
    assert.deepStrictEqual(trailers({ code: 5, details: "not here", metadata }), {
      "grpc-status": "5",
      "grpc-message": "not here",
      "x-a": "1",
      "x-b-bin": "/w=="
    })
  })

  it("adds the HTTP status and content type to a Trailers-Only block", () => {
    assert.deepStrictEqual(trailersOnly({ code: 12, details: "no" }, 415), {
      "grpc-status": "12",
      "grpc-message": "no",
      ":status": 415,
      "content-type": "application/grpc"
    })
  })
})
