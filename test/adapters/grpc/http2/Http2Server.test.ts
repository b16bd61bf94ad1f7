import * as http2 from "node:http2"
import * as net from "node:net"
import { setTimeout as sleep } from "node:timers/promises"
import * as tls from "node:tls"
import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import { Http2Server } from "../../../../src/adapters/grpc/http2/Http2Server.ts"
import { selfSigned } from "../certificates.ts"
import { type AnyCall, floodMessages, handlers, methodOf, service, until, withServer, within } from "./echoServer.ts"
import { call, connect, message, type RawResponse, send, statusOf } from "./rawClient.ts"

const isTrailersOnly = (response: RawResponse) => {
  assert.strictEqual(response.headerBlocks, 1)
  assert.isUndefined(response.trailers)
  assert.deepStrictEqual(response.messages, [])
}

/** Writes `chunk` on `stream` every 5 ms until the stream closes; gives the bytes written so far. */
const keepSending = (stream: http2.ClientHttp2Stream, chunk: Buffer): (() => number) => {
  let sent = 0
  const timer = setInterval(() => {
    if (stream.destroyed) return
    stream.write(chunk)
    sent += chunk.length
  }, 5)
  stream.once("close", () => clearInterval(timer))
  return () => sent
}

/** Request `i` of the backpressure tests: 1 KiB that starts with its index. */
const numbered = (i: number): Buffer => {
  const payload = Buffer.alloc(1024, 1)
  payload.writeUInt32BE(i)
  return message(payload)
}

/** True once `stream` drains, false when `millis` pass first. */
const drainedWithin = (stream: http2.ClientHttp2Stream, millis: number): Promise<boolean> =>
  new Promise((resolve) => {
    const onDrain = () => {
      clearTimeout(timer)
      resolve(true)
    }
    const timer = setTimeout(() => {
      stream.off("drain", onDrain)
      resolve(false)
    }, millis)
    stream.once("drain", onDrain)
  })

/**
 * Writes the numbered requests from `first` up to `count`, waiting for
 * "drain" when pushed back, and stops at a wait longer than `stallMillis`;
 * gives the index of the next request.
 */
const pump = async (stream: http2.ClientHttp2Stream, first: number, count: number, stallMillis: number) => {
  let next = first
  while (next < count) {
    const ready = stream.write(numbered(next++))
    if (!ready && !(await drainedWithin(stream, stallMillis))) break
  }
  return next
}

type BidiCall = AnyCall & { readonly received: () => number }

describe("Http2Server", () => {
  it("answers a unary call with headers, its message, then OK trailers", () =>
    withServer(async ({ port }) => {
      const response = await call(port, { path: "/test.Echo/Unary", body: [message("hello")] })
      assert.strictEqual(response.headers[":status"], 200)
      assert.strictEqual(response.headers["content-type"], "application/grpc")
      assert.deepStrictEqual(
        response.messages.map((m) => m.toString()),
        ["hello"]
      )
      assert.strictEqual(response.headerBlocks, 2)
      assert.deepStrictEqual(statusOf(response), { code: grpc.status.OK, message: undefined })
    }))

  it("reads a message split over DATA frames, its prefix included, and one of zero bytes", () =>
    withServer(async ({ port }) => {
      const framed = message("split across frames")
      const response = await call(port, {
        path: "/test.Echo/Unary",
        body: [framed.subarray(0, 2), framed.subarray(2, 7), framed.subarray(7, 12), framed.subarray(12)]
      })
      assert.deepStrictEqual(
        response.messages.map((m) => m.toString()),
        ["split across frames"]
      )
      const empty = await call(port, { path: "/test.Echo/Unary", body: [message("")] })
      assert.deepStrictEqual(
        [empty.messages.length, empty.messages[0]?.length, statusOf(empty).code],
        [1, 0, grpc.status.OK]
      )
    }))

  it("reads several messages from one DATA frame", () =>
    withServer(async ({ port }) => {
      const response = await call(port, {
        path: "/test.Echo/Bidi",
        body: [Buffer.concat([message("a"), message("bb"), message("")]), message("ccc")]
      })
      assert.deepStrictEqual(
        response.messages.map((m) => m.toString()),
        ["a", "bb", "", "ccc"]
      )
      assert.strictEqual(statusOf(response).code, grpc.status.OK)
    }))

  it("answers a unary or server-streaming request without exactly one message with UNIMPLEMENTED", () =>
    withServer(async ({ port, calls }) => {
      for (const path of ["/test.Echo/Unary", "/test.Echo/Stream"]) {
        const none = await call(port, { path, body: [] })
        isTrailersOnly(none)
        assert.deepStrictEqual(statusOf(none), {
          code: grpc.status.UNIMPLEMENTED,
          message: `received no request message for the non-client-streaming method ${path}`
        })
        const two = await call(port, { path, body: [Buffer.concat([message("a"), message("b")])] })
        assert.deepStrictEqual(statusOf(two), {
          code: grpc.status.UNIMPLEMENTED,
          message: `received a second request message for the non-client-streaming method ${path}`
        })
      }
      assert.strictEqual(calls.length, 0)
    }))

  it("answers a request that ends inside a message with INTERNAL", () =>
    withServer(async ({ port }) => {
      const response = await call(port, { path: "/test.Echo/Unary", body: [message("truncated").subarray(0, 8)] })
      assert.deepStrictEqual(statusOf(response), { code: grpc.status.INTERNAL, message: "unexpected EOF" })
    }))

  it("refuses a message over 4 MiB with RESOURCE_EXHAUSTED as soon as its prefix arrives, and takes one of 4 MiB", () =>
    withServer(async ({ port }) => {
      const max = 4 * 1024 * 1024
      const prefix = Buffer.from([0, 0, 0, 0, 0])
      prefix.writeUInt32BE(max + 1, 1)
      const over = await call(port, { path: "/test.Echo/Unary", body: [prefix, Buffer.alloc(100)] })
      isTrailersOnly(over)
      assert.deepStrictEqual(statusOf(over), {
        code: grpc.status.RESOURCE_EXHAUSTED,
        message: `grpc: received message larger than max (${max + 1} vs. ${max})`
      })
      const whole = await call(port, { path: "/test.Echo/Unary", body: [message(Buffer.alloc(max, 1))] })
      assert.deepStrictEqual([statusOf(whole).code, whole.messages[0]?.length], [grpc.status.OK, max])
    }))

  it("applies its own receive limit", () =>
    withServer(
      async ({ port }) => {
        const response = await call(port, { path: "/test.Echo/Unary", body: [message("eleven byte")] })
        assert.deepStrictEqual(statusOf(response), {
          code: grpc.status.RESOURCE_EXHAUSTED,
          message: "grpc: received message larger than max (11 vs. 10)"
        })
      },
      { maxReceiveMessageLength: 10 }
    ))

  it("answers other content types with HTTP 415 and other methods than POST with HTTP 405", () =>
    withServer(async ({ port }) => {
      for (const contentType of ["application/json", "application/grpc-web", undefined]) {
        const response = await call(port, {
          path: "/test.Echo/Unary",
          headers: { "content-type": contentType },
          body: [message("x")]
        })
        assert.strictEqual(response.headers[":status"], 415)
        assert.deepStrictEqual(statusOf(response), {
          code: grpc.status.INVALID_ARGUMENT,
          message: `invalid gRPC request content-type ${JSON.stringify(contentType ?? "")}`
        })
      }
      for (const contentType of ["application/grpc+proto", "application/grpc;charset=utf-8", "Application/GRPC"]) {
        const response = await call(port, {
          path: "/test.Echo/Unary",
          headers: { "content-type": contentType },
          body: [message("x")]
        })
        assert.strictEqual(statusOf(response).code, grpc.status.OK, contentType)
      }
      const get = await call(port, { path: "/test.Echo/Unary", headers: { ":method": "GET" }, end: true })
      assert.strictEqual(get.headers[":status"], 405)
      assert.deepStrictEqual(statusOf(get), {
        code: grpc.status.INTERNAL,
        message: 'Received a HEADERS frame with :method "GET" which should be POST'
      })
    }))

  it("answers compressed messages: INTERNAL without an encoding, UNIMPLEMENTED for any encoding (it decodes none)", () =>
    withServer(async ({ port }) => {
      const plain = await call(port, {
        path: "/test.Echo/Unary",
        headers: { "grpc-encoding": "gzip" },
        body: [message("not compressed")]
      })
      assert.strictEqual(statusOf(plain).code, grpc.status.OK)
      const noEncoding = await call(port, { path: "/test.Echo/Unary", body: [message("x", 1)] })
      assert.deepStrictEqual(statusOf(noEncoding), {
        code: grpc.status.INTERNAL,
        message: "grpc: compressed flag set with identity or empty encoding"
      })
      const gzip = await call(port, {
        path: "/test.Echo/Unary",
        headers: { "grpc-encoding": "gzip" },
        body: [message("x", 1)]
      })
      assert.deepStrictEqual(statusOf(gzip), {
        code: grpc.status.UNIMPLEMENTED,
        message: 'grpc: Decompressor is not installed for grpc-encoding "gzip"'
      })
      assert.strictEqual(gzip.headers["grpc-accept-encoding"], "identity")
      const flag = await call(port, { path: "/test.Echo/Unary", body: [message("x", 2)] })
      assert.deepStrictEqual(statusOf(flag), {
        code: grpc.status.INTERNAL,
        message: "grpc: received unexpected payload format 2"
      })
    }))

  it("answers an unknown method with UNIMPLEMENTED in a Trailers-Only response", () =>
    withServer(async ({ port }) => {
      const response = await call(port, { path: "/test.Echo/Missing", body: [message("x")] })
      isTrailersOnly(response)
      assert.strictEqual(response.headers[":status"], 200)
      assert.strictEqual(response.headers["content-type"], "application/grpc")
      assert.deepStrictEqual(statusOf(response), {
        code: grpc.status.UNIMPLEMENTED,
        message: "The server does not implement the method /test.Echo/Missing"
      })
    }))

  it("sends a handler's error as Trailers-Only with the percent-encoded message and metadata, -bin in base64", () =>
    withServer(async ({ port }) => {
      const response = await call(port, { path: "/test.Echo/Unary", body: [message("fail")] })
      isTrailersOnly(response)
      assert.strictEqual(response.headers["grpc-message"], "%C3%BCn%C3%AFcode 100%25%0Anext line")
      assert.deepStrictEqual(statusOf(response), {
        code: grpc.status.FAILED_PRECONDITION,
        message: "ünïcode 100%\nnext line"
      })
      assert.strictEqual(response.headers["x-detail"], "one")
      assert.strictEqual(response.headers["x-blob-bin"], Buffer.from([0, 1, 2, 255]).toString("base64"))
      const threw = await call(port, { path: "/test.Echo/Unary", body: [message("throw")] })
      assert.deepStrictEqual(statusOf(threw), { code: grpc.status.UNKNOWN, message: "Unknown error" })
    }))

  it("streams messages, then trailers with the status and metadata; a stream error after a message comes as trailers", () =>
    withServer(async ({ port }) => {
      const response = await call(port, { path: "/test.Echo/Stream", body: [message("a,b,c")] })
      assert.deepStrictEqual(
        response.messages.map((m) => m.toString()),
        ["a", "b", "c"]
      )
      assert.deepStrictEqual(statusOf(response).code, grpc.status.OK)
      assert.strictEqual(response.trailers?.["x-detail"], "one")
      const empty = await call(port, { path: "/test.Echo/Stream", body: [message("")] })
      isTrailersOnly(empty)
      assert.strictEqual(statusOf(empty).code, grpc.status.OK)
      const failed = await call(port, { path: "/test.Echo/Stream", body: [message("fail after one")] })
      assert.deepStrictEqual(
        failed.messages.map((m) => m.toString()),
        ["one"]
      )
      assert.deepStrictEqual(statusOf(failed), { code: grpc.status.ABORTED, message: "stop" })
    }))

  describe("grpc-timeout", () => {
    it("ends a call at its deadline with DEADLINE_EXCEEDED and tells the handler it is cancelled", () =>
      withServer(async ({ port, calls }) => {
        const started = performance.now()
        const response = await call(port, {
          path: "/test.Echo/Unary",
          headers: { "grpc-timeout": "150m" },
          body: [message("hang")]
        })
        const elapsed = performance.now() - started
        assert.deepStrictEqual(statusOf(response), {
          code: grpc.status.DEADLINE_EXCEEDED,
          message: "Deadline exceeded"
        })
        assert.isTrue(elapsed >= 140 && elapsed < 1000, `ended after ${elapsed} ms`)
        const [handled] = calls
        assert.isTrue(handled!.cancelled)
        assert.deepStrictEqual(handled!.events, ["cancelled"])
      }))

    it("reads every unit, answers a malformed value with INTERNAL and a zero timeout with DEADLINE_EXCEEDED", () =>
      withServer(async ({ port, calls }) => {
        const session = await connect(port)
        try {
          const expected: Record<string, number> = {
            "1H": 3_600_000,
            "2M": 120_000,
            "3S": 3000,
            "400m": 400,
            "5000000u": 5000,
            "60000000n": 60
          }
          for (const [value, millis] of Object.entries(expected)) {
            const before = Date.now()
            const open = send(session, {
              path: "/test.Echo/Unary",
              headers: { "grpc-timeout": value },
              body: [message("hang")]
            })
            await until(() => calls.length === Object.keys(expected).indexOf(value) + 1, `${value} reaches the handler`)
            const deadline = Number(calls.at(-1)!.getDeadline())
            assert.isTrue(deadline >= before + millis && deadline <= Date.now() + millis, value)
            open.stream.close(http2.constants.NGHTTP2_CANCEL)
            await open.response
          }
          for (const value of ["1x", "S", "123456789S", "-1S", "1.5S", "1 S"]) {
            const response = await send(session, {
              path: "/test.Echo/Unary",
              headers: { "grpc-timeout": value },
              body: [message("x")]
            }).response
            assert.deepStrictEqual(
              statusOf(response),
              { code: grpc.status.INTERNAL, message: `malformed grpc-timeout: ${JSON.stringify(value)}` },
              value
            )
          }
          const zero = await send(session, {
            path: "/test.Echo/Unary",
            headers: { "grpc-timeout": "0S" },
            body: [message("x")]
          }).response
          assert.strictEqual(statusOf(zero).code, grpc.status.DEADLINE_EXCEEDED)
          const none = await send(session, { path: "/test.Echo/Unary", body: [message("x")] }).response
          assert.strictEqual(statusOf(none).code, grpc.status.OK)
          assert.strictEqual(calls.at(-1)!.getDeadline(), Number.POSITIVE_INFINITY)
        } finally {
          session.close()
        }
      }))
  })

  it("tells the handler of a client's cancel (RST_STREAM): unary calls are cancelled, streams cancelled and closed", () =>
    withServer(async ({ port, calls }) => {
      const session = await connect(port)
      try {
        for (const path of ["/test.Echo/Unary", "/test.Echo/Stream"]) {
          const open = send(session, { path, body: [message("hang")] })
          await until(() => calls.length > 0 && calls.at(-1)!.getPath() === path, `${path} reaches the handler`)
          const handled = calls.at(-1)!
          assert.isFalse(handled.cancelled)
          open.stream.close(http2.constants.NGHTTP2_CANCEL)
          await until(() => handled.cancelled, "the handler sees the cancel")
          const streaming = path.endsWith("Stream")
          assert.deepStrictEqual(handled.events, streaming ? ["cancelled", "close"] : ["cancelled"])
          if (streaming) assert.isTrue(handled.destroyed)
          assert.strictEqual((await open.response).rstCode, http2.constants.NGHTTP2_CANCEL)
        }
      } finally {
        session.close()
      }
    }))

  it("pushes back on a client that does not read, then drains once it does", () =>
    withServer(async ({ port, calls }) => {
      const session = await connect(port)
      try {
        const open = send(session, { path: "/test.Echo/Stream", body: [message("flood")] })
        open.stream.pause()
        await until(() => calls.length === 1, "the handler runs")
        const handled = calls[0]! as AnyCall & { readonly written: () => number }
        await sleep(200)
        const blockedAt = handled.written()
        await sleep(100)
        assert.strictEqual(handled.written(), blockedAt)
        assert.isTrue(blockedAt < floodMessages / 2, `wrote ${blockedAt} messages before the push back`)
        assert.isFalse(handled.writableEnded)
        open.stream.resume()
        const response = await open.response
        assert.include(handled.events, "drain")
        assert.strictEqual(response.messages.length, floodMessages)
        assert.strictEqual(statusOf(response).code, grpc.status.OK)
      } finally {
        session.close()
      }
    }))

  it("gives handlers the metadata without gRPC's own headers, binary values decoded, and the peer as grpc-js prints it", () =>
    withServer(async ({ port, calls }) => {
      const session = await connect(port)
      try {
        await send(session, {
          path: "/test.Echo/Unary",
          headers: {
            "grpc-timeout": "10S",
            "x-real-ip": "1.2.3.4",
            "x-blob-bin": Buffer.from([9, 8, 7]).toString("base64")
          },
          body: [message("x")]
        }).response
        const [handled] = calls
        const metadata = handled!.metadata.getMap()
        assert.strictEqual(metadata["x-real-ip"], "1.2.3.4")
        assert.deepStrictEqual(metadata["x-blob-bin"], Buffer.from([9, 8, 7]))
        for (const reserved of ["grpc-timeout", "content-type", "te", ":path"]) assert.notProperty(metadata, reserved)
        const local = (session.socket as { localPort?: number }).localPort
        assert.strictEqual(handled!.getPeer(), `127.0.0.1:${local}`)
        assert.strictEqual(handled!.getHost(), `127.0.0.1:${port}`)
      } finally {
        session.close()
      }
    }))

  it("stops gracefully: GOAWAY, the open call finishes, then the callback", () =>
    withServer(async ({ server, port, calls }) => {
      const session = await connect(port)
      const goaway = new Promise<number>((resolve) => session.once("goaway", (code) => resolve(code)))
      const open = send(session, { path: "/test.Echo/Stream", body: [message("hang")] })
      await until(() => calls.length === 1, "the call is open")
      let stopped = false
      server.tryShutdown(() => {
        stopped = true
      })
      assert.strictEqual(await goaway, http2.constants.NGHTTP2_NO_ERROR)
      await sleep(50)
      assert.isFalse(stopped)
      calls[0]!.write(Buffer.from("late"))
      calls[0]!.end()
      const response = await open.response
      assert.deepStrictEqual(
        [response.messages.map((m) => m.toString()), statusOf(response).code],
        [["late"], grpc.status.OK]
      )
      await until(() => stopped, "the server stops")
    }))

  it("sends a share of its sessions without an open call away (GOAWAY), and never one with a call open", () =>
    withServer(async ({ server, port, calls }) => {
      const sessions = await Promise.all(Array.from({ length: 5 }, () => connect(port)))
      const sentAway = sessions.map(
        (session) => new Promise<boolean>((resolve) => session.once("goaway", () => resolve(true)))
      )
      const open = send(sessions[0]!, { path: "/test.Echo/Stream", body: [message("hang")] })
      await until(() => calls.length === 1, "the call is open")
      await sleep(20)
      assert.strictEqual(server.shed(0.5), 2, "half of the four idle ones")
      assert.strictEqual(server.shed(1), 2, "the two idle ones left")
      assert.strictEqual(server.shed(1), 0)
      const away = await Promise.all(sentAway.map((goaway) => Promise.race([goaway, sleep(200).then(() => false)])))
      assert.deepStrictEqual(away, [false, true, true, true, true])
      calls[0]!.end()
      await open.response
      for (const session of sessions) session.close()
    }))

  it("stops at once when forced, cancelling open calls", () =>
    withServer(async ({ server, port, calls }) => {
      const session = await connect(port)
      session.on("error", () => {})
      const open = send(session, { path: "/test.Echo/Unary", body: [message("hang")] })
      await until(() => calls.length === 1, "the call is open")
      server.forceShutdown()
      await open.response
      await until(() => calls[0]!.cancelled, "the call is cancelled")
    }))

  it("registers and removes services as grpc-js does", () =>
    withServer(async ({ server, port }) => {
      assert.throws(
        () => server.addService(service, handlers([]) as unknown as grpc.UntypedServiceImplementation),
        "Method handler for /test.Echo/Unary already provided."
      )
      assert.throws(
        () => server.addService({ Up: methodOf("Up", true, false) }, { Up: () => {} }),
        /Client-streaming method \/test.Echo\/Up is not supported/
      )
      server.removeService(service)
      const response = await call(port, { path: "/test.Echo/Unary", body: [message("x")] })
      assert.strictEqual(statusOf(response).code, grpc.status.UNIMPLEMENTED)
      server.addService(
        { Renamed: { ...service.Unary, originalName: "unary" } },
        {
          unary: handlers([]).Unary as unknown as grpc.handleUnaryCall<Buffer, Buffer>
        }
      )
      assert.strictEqual(statusOf(await call(port, { path: "/test.Echo/Unary", body: [message("x")] })).code, 0)
    }))

  describe("bidirectional calls", () => {
    it("stop reading requests while the client does not read the responses, then deliver them all in order", () =>
      withServer(async ({ port, calls }) => {
        const session = await connect(port)
        try {
          const total = 4096
          const open = send(session, { path: "/test.Echo/Bidi", end: false })
          open.stream.pause()
          const stalledAt = await pump(open.stream, 0, total, 300)
          const handled = calls[0] as BidiCall
          assert.isBelow(stalledAt, total, "the client was never pushed back")
          assert.isBelow(handled.received(), 512, `the handler got ${handled.received()} of ${stalledAt} requests`)
          open.stream.resume()
          assert.strictEqual(await pump(open.stream, stalledAt, total, 5000), total)
          open.stream.end()
          const response = await open.response
          assert.strictEqual(statusOf(response).code, grpc.status.OK)
          assert.strictEqual(response.messages.length, total)
          assert.isTrue(response.messages.every((m, i) => m.readUInt32BE(0) === i && m.length === 1024))
          assert.strictEqual(handled.received(), total)
        } finally {
          session.close()
        }
      }))

    it("drop the requests held back when the call ends, and free the stream", () =>
      withServer(async ({ server, port, calls }) => {
        const session = await connect(port)
        const open = send(session, { path: "/test.Echo/Bidi", end: false })
        open.stream.pause()
        const stalledAt = await pump(open.stream, 0, 4096, 300)
        const handled = calls[0] as BidiCall
        assert.isBelow(handled.received(), stalledAt)
        handled.end()
        open.stream.resume()
        const response = await within(open.response, 2000, "the call ends")
        assert.strictEqual(statusOf(response).code, grpc.status.OK)
        assert.strictEqual(response.messages.length, handled.received())
        let stopped = false
        server.tryShutdown(() => {
          stopped = true
        })
        await until(() => stopped, "the server stops")
      }))

    it("end with UNKNOWN when a data or end listener throws, and the server goes on", () =>
      withServer(async ({ port }) => {
        const data = await call(port, { path: "/test.Echo/Bidi", body: [message("a"), message("throw"), message("c")] })
        assert.deepStrictEqual(
          data.messages.map((m) => m.toString()),
          ["a"]
        )
        assert.deepStrictEqual(statusOf(data), { code: grpc.status.UNKNOWN, message: "Unknown error" })
        const end = await call(port, { path: "/test.Echo/Bidi", body: [message("throw at end")] })
        assert.deepStrictEqual(
          end.messages.map((m) => m.toString()),
          ["throw at end"]
        )
        assert.deepStrictEqual(statusOf(end), { code: grpc.status.UNKNOWN, message: "Unknown error" })
        const fine = await call(port, { path: "/test.Echo/Bidi", body: [message("b")] })
        assert.deepStrictEqual(statusOf(fine).code, grpc.status.OK)
      }))
  })

  it("ends a streaming call whose drain listener throws with UNKNOWN", () =>
    withServer(async ({ port, calls }) => {
      const session = await connect(port)
      try {
        const open = send(session, { path: "/test.Echo/Stream", body: [message("throw on drain")] })
        open.stream.pause()
        await until(() => calls.length === 1, "the handler runs")
        open.stream.resume()
        const response = await within(open.response, 2000, "the call ends")
        assert.deepStrictEqual(statusOf(response), { code: grpc.status.UNKNOWN, message: "Unknown error" })
      } finally {
        session.close()
      }
    }))

  describe("a status sent while the client is still sending", () => {
    it("closes a rejected request (RST_STREAM NO_ERROR), takes no more of it and keeps the connection usable", () =>
      withServer(async ({ server, port }) => {
        const session = await connect(port)
        const open = send(session, { path: "/test.Echo/Missing", body: [message("x")], end: false })
        const sent = keepSending(open.stream, Buffer.alloc(16 * 1024))
        const response = await within(open.response, 2000, "the rejected stream closes")
        assert.strictEqual(statusOf(response).code, grpc.status.UNIMPLEMENTED)
        assert.strictEqual(response.rstCode, http2.constants.NGHTTP2_NO_ERROR)
        assert.isBelow(sent(), 1024 * 1024)
        const next = await send(session, { path: "/test.Echo/Unary", body: [message("after")] }).response
        assert.strictEqual(statusOf(next).code, grpc.status.OK)
        let stopped = false
        server.tryShutdown(() => {
          stopped = true
        })
        await until(() => stopped, "the server stops")
      }))

    it("follows the status with RST_STREAM NO_ERROR, as Trailers-Only or after trailers, as grpc-go does", () =>
      withServer(async ({ port }) => {
        const session = await connect(port)
        try {
          const prefix = Buffer.from([0, 0, 0x50, 0, 0])
          const tooLarge = send(session, { path: "/test.Echo/Unary", body: [prefix], end: false })
          const uploaded = keepSending(tooLarge.stream, Buffer.alloc(64 * 1024))
          const refused = await within(tooLarge.response, 2000, "the upload is stopped")
          isTrailersOnly(refused)
          assert.strictEqual(statusOf(refused).code, grpc.status.RESOURCE_EXHAUSTED)
          assert.strictEqual(refused.rstCode, http2.constants.NGHTTP2_NO_ERROR)
          assert.isBelow(uploaded(), 1024 * 1024)

          const late = send(session, {
            path: "/test.Echo/Bidi",
            headers: { "grpc-timeout": "200m" },
            body: [message("first")],
            end: false
          })
          keepSending(late.stream, message("more"))
          const expired = await within(late.response, 2000, "the deadline stops the upload")
          assert.strictEqual(expired.messages[0]?.toString(), "first")
          assert.deepStrictEqual(statusOf(expired), {
            code: grpc.status.DEADLINE_EXCEEDED,
            message: "Deadline exceeded"
          })
          assert.strictEqual(expired.headerBlocks, 2)
          assert.strictEqual(expired.rstCode, http2.constants.NGHTTP2_NO_ERROR)

          const ended = send(session, { path: "/test.Echo/Bidi", body: [message("first"), message("end")], end: false })
          keepSending(ended.stream, message("more"))
          const done = await within(ended.response, 2000, "the handler's end stops the upload")
          assert.deepStrictEqual(
            [done.messages.map((m) => m.toString()), statusOf(done).code, done.headerBlocks, done.rstCode],
            [["first"], grpc.status.OK, 2, http2.constants.NGHTTP2_NO_ERROR]
          )
        } finally {
          session.close()
        }
      }))
  })

  it("turns on TCP keepalive, after 15 s idle, on the connections it accepts, plaintext and TLS", async () => {
    const probe = net.createServer()
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve))
    const tcp = Object.getPrototypeOf((probe as unknown as { readonly _handle: object })._handle) as {
      setKeepAlive: (enable: boolean, delaySeconds: number) => number
    }
    probe.close()
    const original = tcp.setKeepAlive
    const seen: Array<[boolean, number]> = []
    tcp.setKeepAlive = function (this: unknown, enable: boolean, delaySeconds: number) {
      seen.push([enable, delaySeconds])
      return original.call(this, enable, delaySeconds)
    }
    try {
      await withServer(async ({ port }) => {
        assert.strictEqual(statusOf(await call(port, { path: "/test.Echo/Unary", body: [message("x")] })).code, 0)
      })
      assert.deepStrictEqual(seen, [[true, 15]])
      const pem = selfSigned("keepalive")
      const pair = { certificate: Buffer.from(pem.certificate), privateKey: Buffer.from(pem.privateKey) }
      await withServer(
        async ({ port }) => {
          const session = http2.connect(`https://127.0.0.1:${port}`, { ca: pem.certificate })
          try {
            const response = await send(session, { path: "/test.Echo/Unary", body: [message("x")] }).response
            assert.strictEqual(statusOf(response).code, grpc.status.OK)
          } finally {
            session.close()
          }
        },
        { keyPair: { current: pair, subscribe: () => () => {} } }
      )
      assert.deepStrictEqual(seen, [
        [true, 15],
        [true, 15]
      ])
    } finally {
      tcp.setKeepAlive = original
    }
  })

  it("closes a connection still in its TLS handshake when a graceful stop begins, serving nothing on it", async () => {
    const pem = selfSigned("late")
    const pair = { certificate: Buffer.from(pem.certificate), privateKey: Buffer.from(pem.privateKey) }
    await withServer(
      async ({ server, port, calls }) => {
        const raw = net.connect(port, "127.0.0.1")
        await new Promise((resolve) => raw.once("connect", resolve))
        await sleep(100) // the server has accepted the connection; its TLS handshake has not begun
        let stopped = false
        server.tryShutdown(() => {
          stopped = true
        })
        const secure = tls.connect({ socket: raw, ALPNProtocols: ["h2"], ca: pem.certificate, host: "127.0.0.1" })
        const session = http2.connect(`https://127.0.0.1:${port}`, { createConnection: () => secure })
        session.on("error", () => {})
        try {
          const closed = new Promise<void>((resolve) => session.once("close", () => resolve()))
          const open = send(session, { path: "/test.Echo/Unary", body: [message("late")] })
          await within(closed, 2000, "the connection is closed")
          const response = await open.response
          assert.isUndefined(response.headers["grpc-status"])
          assert.strictEqual(calls.length, 0)
          await until(() => stopped, "the server stops")
        } finally {
          session.destroy()
        }
      },
      { keyPair: { current: pair, subscribe: () => () => {} } }
    )
  })

  it("fails to bind an address in use or malformed", async () => {
    await withServer(async ({ port }) => {
      const other = new Http2Server()
      const bind = (address: string) =>
        new Promise<Error | null>((resolve) => other.bindAsync(address, (error) => resolve(error)))
      assert.match(String(await bind(`127.0.0.1:${port}`)), /EADDRINUSE/)
      assert.match(String(await bind("no port")), /invalid address/)
      other.forceShutdown()
    })
  })
})
