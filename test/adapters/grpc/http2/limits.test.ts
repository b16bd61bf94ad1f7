import * as http from "node:http"
import * as http2 from "node:http2"
import * as https from "node:https"
import * as net from "node:net"
import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import type { FallbackListener } from "../../../../src/adapters/grpc/http2/Http2Server.ts"
import { selfSigned } from "../certificates.ts"
import { until, withServer, within } from "./echoServer.ts"
import { call, connect, message, send, statusOf } from "./rawClient.ts"
import { session } from "./fixtures/sessions.ts"

const unary = "/test.Echo/Unary"
const stream = "/test.Echo/Stream"

/** A raw TCP connection to the server, and a promise of its close. */
const tcp = async (port: number, localAddress = "127.0.0.1") => {
  const socket = net.connect({ port, host: "127.0.0.1", localAddress })
  socket.on("error", () => {})
  socket.resume()
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()))
  await new Promise<void>((resolve, reject) => {
    socket.once("connect", resolve)
    socket.once("close", () => reject(new Error("closed before it connected")))
  })
  return { socket, closed }
}

const goawayOf = (opened: http2.ClientHttp2Session) =>
  new Promise<{ readonly code: number; readonly data: string }>((resolve) =>
    opened.once("goaway", (code, _last, data) => resolve({ code, data: data?.toString() ?? "" }))
  )

/** A large message sent whole but for its last bytes, so the server holds what came. */
const unfinished = (length: number) => message(Buffer.alloc(length, 3)).subarray(0, 5 + length - 10)

describe("Http2Server limits", () => {
  it("advertises 100 concurrent streams per connection by default, or the number it is given", async () => {
    for (const [options, expected] of [
      [{}, 100],
      [{ maxConcurrentStreams: 7 }, 7]
    ] as const) {
      await withServer(async ({ port }) => {
        const opened = http2.connect(`http://127.0.0.1:${port}`)
        try {
          const settings = await new Promise<http2.Settings>((resolve) => opened.once("remoteSettings", resolve))
          assert.strictEqual(settings.maxConcurrentStreams, expected)
        } finally {
          opened.close()
        }
      }, options)
    }
  })

  describe("the request budget", () => {
    it("holds a large unfinished message in the budget and refuses the next one with UNAVAILABLE, serving small calls", () =>
      withServer(
        async ({ server, port }) => {
          const { session: opened } = await session(port)
          try {
            const first = send(opened, { path: unary, body: [unfinished(60_000)], end: false })
            await until(() => server.stats.reservedBytes === 60_000, "the first message is reserved")
            const second = await send(opened, { path: unary, body: [unfinished(60_000)], end: false }).response
            assert.deepStrictEqual(statusOf(second), {
              code: grpc.status.UNAVAILABLE,
              message: "server busy: no room for a request message of 60000 bytes now, retry later"
            })
            assert.strictEqual(server.stats.overBudget, 1)
            const small = await send(opened, { path: unary, body: [message("small")] }).response
            assert.deepStrictEqual(
              small.messages.map((m) => m.toString()),
              ["small"]
            )
            first.stream.close(http2.constants.NGHTTP2_CANCEL)
            await first.response
            await until(() => server.stats.reservedBytes === 0, "a cancelled call gives its bytes back")
            const whole = message(Buffer.alloc(60_000, 3))
            const third = await send(opened, { path: unary, body: [whole.subarray(0, 1000), whole.subarray(1000)] })
              .response
            assert.strictEqual(statusOf(third).code, grpc.status.OK)
            assert.strictEqual(third.messages[0]?.length, 60_000)
            assert.strictEqual(server.stats.reservedBytes, 0, "a finished call gives its bytes back")
          } finally {
            opened.close()
          }
        },
        { requestBudgetBytes: 100_000 }
      ))
  })

  describe("the request budget, for unfinished requests of any size", () => {
    it("holds a whole message whose client does not end its request, and refuses the next past the budget", () =>
      withServer(
        async ({ server, port }) => {
          const { session: opened } = await session(port)
          try {
            const first = send(opened, { path: unary, body: [message(Buffer.alloc(3000, 1))], end: false })
            await until(() => server.stats.reservedBytes === 3000, "the waiting message is paid for")
            const second = await send(opened, { path: unary, body: [message(Buffer.alloc(3000, 2))], end: false })
              .response
            assert.strictEqual(statusOf(second).code, grpc.status.UNAVAILABLE)
            first.stream.end()
            const answered = await first.response
            assert.strictEqual(answered.messages[0]?.length, 3000)
            await until(() => server.stats.reservedBytes === 0, "the answered call gives its bytes back")
          } finally {
            opened.close()
          }
        },
        { requestBudgetBytes: 4000 }
      ))

    it("reserves nothing once a call is over, though its last chunk announces another large message", () =>
      withServer(
        async ({ server, port }) => {
          const { session: opened } = await session(port)
          try {
            const prefix = Buffer.from([0, 0, 0x40, 0, 0]) // announces 4 MiB
            for (let i = 0; i < 3; i++) {
              const chunk = Buffer.concat([message("a"), message("b"), prefix])
              const response = await send(opened, { path: unary, body: [chunk], end: false }).response
              assert.strictEqual(statusOf(response).code, grpc.status.UNIMPLEMENTED, "a second request message")
            }
            await until(() => server.stats.reservedBytes === 0, "nothing is held")
            assert.strictEqual(server.stats.overBudget, 0)
          } finally {
            opened.close()
          }
        },
        { requestBudgetBytes: 5 * 1024 * 1024 }
      ))
  })

  describe("connections", () => {
    it("closes connections over the cap per address and in total as soon as they are accepted", () =>
      withServer(
        async ({ server, port }) => {
          const first = await session(port)
          const second = await session(port)
          const third = await tcp(port)
          await within(third.closed, 2000, "the third connection from 127.0.0.1 is closed")
          const other = await session(port, "127.0.0.2")
          assert.strictEqual(
            statusOf(await send(other.session, { path: unary, body: [message("x")] }).response).code,
            0
          )
          const fourth = await tcp(port, "127.0.0.3")
          await within(fourth.closed, 2000, "the fourth connection is closed")
          assert.strictEqual(server.stats.refused, 2)
          first.session.close()
          await first.closed
          await until(() => server.stats.connections === 2, "the server counts the closed connection out")
          const again = await session(port)
          assert.strictEqual(
            statusOf(await send(again.session, { path: unary, body: [message("y")] }).response).code,
            0
          )
          for (const opened of [second, other, again]) opened.session.close()
        },
        { connections: { maxConnectionsPerAddress: 2, maxConnections: 3 } }
      ))

    it("closes a connection that does not finish its handshake in time: silent, half a preface, or no TLS hello", async () => {
      await withServer(
        async ({ server, port }) => {
          const served = await session(port)
          assert.strictEqual(
            statusOf(await send(served.session, { path: unary, body: [message("x")] }).response).code,
            0
          )
          const silent = await tcp(port)
          const half = await tcp(port)
          half.socket.write("PRI * HTTP/2.0\r\n")
          await within(Promise.all([silent.closed, half.closed]), 5000, "both are closed")
          assert.strictEqual(server.stats.handshakeTimeouts, 2)
          assert.strictEqual(
            statusOf(await send(served.session, { path: unary, body: [message("x")] }).response).code,
            0
          )
          served.session.close()
        },
        { connections: { handshakeTimeoutMillis: 2000 } }
      )
      const pem = selfSigned("handshake")
      const pair = { certificate: Buffer.from(pem.certificate), privateKey: Buffer.from(pem.privateKey) }
      await withServer(
        async ({ server, port }) => {
          const silent = await tcp(port)
          await within(silent.closed, 5000, "the TLS connection without a hello is closed")
          assert.strictEqual(server.stats.handshakeTimeouts, 1)
        },
        { connections: { handshakeTimeoutMillis: 1000 }, keyPair: { current: pair, subscribe: () => () => {} } }
      )
    })

    it("closes connections still being told apart or in their handshake when it stops", () =>
      withServer(
        async ({ server, port }) => {
          const sniffing = await tcp(port)
          sniffing.socket.write("PR")
          const silent = await tcp(port)
          await until(() => server.stats.connections === 2, "both are accepted")
          server.forceShutdown()
          await within(Promise.all([sniffing.closed, silent.closed]), 2000, "both are closed")
        },
        { fallback: () => {}, connections: { handshakeTimeoutMillis: 0 } }
      ))

    it("sends a graceful GOAWAY to a session idle for longer than the limit, but not while a call is open", () =>
      withServer(
        async ({ server, port }) => {
          const idle = await session(port)
          const busy = await session(port)
          const idleGoaway = goawayOf(idle.session)
          const busyGoaway = goawayOf(busy.session)
          assert.strictEqual(statusOf(await send(idle.session, { path: unary, body: [message("x")] }).response).code, 0)
          const open = send(busy.session, { path: stream, body: [message("hang")] })
          assert.strictEqual(
            (await within(idleGoaway, 5000, "the idle session is sent away")).code,
            http2.constants.NGHTTP2_NO_ERROR
          )
          await within(idle.closed, 5000, "the idle session closes")
          assert.isFalse(busy.session.closed, "a session with an open call stays")
          open.stream.close(http2.constants.NGHTTP2_CANCEL)
          await open.response
          await within(busyGoaway, 5000, "the session is sent away once its call ended and it idled")
          assert.strictEqual(server.stats.idleClosed, 2)
        },
        { connections: { idleTimeoutMillis: 300 } }
      ))
  })

  describe("keepalive enforcement", () => {
    const ping = (opened: http2.ClientHttp2Session) =>
      new Promise<void>((resolve, reject) => opened.ping((error) => (error ? reject(error) : resolve())))

    it("ends a session whose client pings too often with GOAWAY ENHANCE_YOUR_CALM too_many_pings", () =>
      withServer(
        async ({ server, port }) => {
          const { session: opened, closed } = await session(port)
          const goaway = goawayOf(opened)
          for (let i = 0; i < 3; i++) await ping(opened)
          assert.isFalse(opened.closed, "two strikes are tolerated")
          opened.ping(() => {})
          assert.deepStrictEqual(await within(goaway, 2000, "the session is sent away"), {
            code: http2.constants.NGHTTP2_ENHANCE_YOUR_CALM,
            data: "too_many_pings"
          })
          await within(closed, 2000, "the session closes")
          assert.strictEqual(server.stats.pingViolations, 1)
        },
        { connections: { keepalive: { minTimeMillis: 60_000, maxStrikes: 2, watchPauseMillis: 200 } } }
      ))

    it("looks at pings again after its pause following data, so pings flooded after a call are still sent away", () =>
      withServer(
        async ({ server, port }) => {
          const { session: opened, closed } = await session(port)
          const goaway = goawayOf(opened)
          assert.strictEqual(statusOf(await send(opened, { path: unary, body: [message("x")] }).response).code, 0)
          await ping(opened)
          const pausing = Date.now() + 100
          while (Date.now() < pausing) await ping(opened)
          assert.isFalse(opened.closed, "pings during the pause are answered without a look")
          await new Promise((resolve) => setTimeout(resolve, 600))
          for (let i = 0; i < 4 && !opened.closed; i++) opened.ping(() => {})
          assert.strictEqual((await within(goaway, 2000, "the session is sent away")).data, "too_many_pings")
          await within(closed, 2000, "the session closes")
          assert.strictEqual(server.stats.pingViolations, 1)
        },
        { connections: { keepalive: { minTimeMillis: 60_000, maxStrikes: 2, watchPauseMillis: 500 } } }
      ))

    it("counts no strike for a ping that follows data the server sent, and answers every ping when turned off", async () => {
      await withServer(
        async ({ server, port }) => {
          const { session: opened } = await session(port)
          for (let i = 0; i < 8; i++) {
            await ping(opened)
            assert.strictEqual(statusOf(await send(opened, { path: unary, body: [message("x")] }).response).code, 0)
          }
          assert.isFalse(opened.closed)
          assert.strictEqual(server.stats.pingViolations, 0)
          opened.close()
        },
        { connections: { keepalive: { minTimeMillis: 60_000, maxStrikes: 2, watchPauseMillis: 200 } } }
      )
      await withServer(
        async ({ server, port }) => {
          const { session: opened } = await session(port)
          for (let i = 0; i < 20; i++) await ping(opened)
          assert.isFalse(opened.closed)
          assert.strictEqual(server.stats.pingViolations, 0)
          opened.close()
        },
        { connections: { keepalive: false } }
      )
    })
  })

  it("acknowledges a burst of SETTINGS, and ends the session past nghttp2's flood limit of 1000 unsent ACKs", () =>
    withServer(async ({ port }) => {
      const framesOf = async (count: number) => {
        const { socket, closed } = await tcp(port)
        const settings = Buffer.from([0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100])
        socket.write(Buffer.concat([Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), ...Array(count).fill(settings)]))
        let received = Buffer.alloc(0)
        socket.on("data", (chunk: Buffer) => {
          received = Buffer.concat([received, chunk])
        })
        const acks = () => {
          let at = 0
          const seen = { acks: 0, goaway: undefined as number | undefined }
          while (at + 9 <= received.length) {
            const length = received.readUIntBE(at, 3)
            if (received[at + 3] === 4 && (received[at + 4]! & 1) === 1) seen.acks++
            if (received[at + 3] === 7) seen.goaway = received.readUInt32BE(at + 13)
            at += 9 + length
          }
          return seen
        }
        await Promise.race([closed, until(() => acks().acks === count, `${count} ACKs arrive`).catch(() => {})])
        socket.destroy()
        return acks()
      }
      assert.deepStrictEqual(await framesOf(100), { acks: 100, goaway: undefined })
      assert.deepStrictEqual(await framesOf(1001), { acks: 0, goaway: http2.constants.NGHTTP2_INTERNAL_ERROR })
    }))

  describe("requests that are not gRPC", () => {
    const site: FallbackListener = (request, response) => {
      response.setHeader("content-type", "text/plain")
      response.end(`site ${request.method} ${request.url} over ${request.httpVersion}`)
    }
    const body = (response: http.IncomingMessage) =>
      new Promise<string>((resolve) => {
        let text = ""
        response.on("data", (chunk) => {
          text += chunk
        })
        response.on("end", () => resolve(text))
      })

    it("go to the fallback over HTTP/1.1 and HTTP/2, while gRPC is served on the same port", () =>
      withServer(
        async ({ port }) => {
          const agent = new http.Agent({ keepAlive: true })
          for (const path of ["/stats", "/"]) {
            const response = await new Promise<http.IncomingMessage>((resolve) =>
              http.get({ host: "127.0.0.1", port, path, agent }, resolve)
            )
            assert.strictEqual(await body(response), `site GET ${path} over 1.1`)
          }
          agent.destroy()
          const opened = await connect(port)
          try {
            const page = opened.request({ ":path": "/inspect?clusterID=x" })
            let text = ""
            page.on("data", (chunk) => {
              text += chunk
            })
            await new Promise((resolve) => page.on("end", resolve))
            assert.strictEqual(text, "site GET /inspect?clusterID=x over 2.0")
            const echoed = await send(opened, { path: unary, body: [message("grpc")] }).response
            assert.deepStrictEqual(
              echoed.messages.map((m) => m.toString()),
              ["grpc"]
            )
          } finally {
            opened.close()
          }
        },
        { fallback: site }
      ))

    it("go to the fallback once a body they carry is read and dropped; a body over 64 KiB gets 413", () =>
      withServer(
        async ({ port }) => {
          const opened = await connect(port)
          try {
            const post = (bytes: number) =>
              new Promise<{ readonly status: number | undefined; readonly text: string }>((resolve) => {
                const page = opened.request({ ":method": "POST", ":path": "/stats", "content-type": "text/plain" })
                let status: number | undefined
                let text = ""
                page.on("response", (headers) => {
                  status = headers[":status"]
                })
                page.on("data", (chunk) => {
                  text += chunk
                })
                page.on("error", () => {})
                page.on("close", () => resolve({ status, text }))
                page.end(Buffer.alloc(bytes, 1))
              })
            assert.deepStrictEqual(await post(1000), { status: 200, text: "site POST /stats over 2.0" })
            assert.deepStrictEqual(await post(100_000), { status: 413, text: "" })
            const echoed = await send(opened, { path: unary, body: [message("after")] }).response
            assert.strictEqual(statusOf(echoed).code, grpc.status.OK)
          } finally {
            opened.close()
          }
        },
        { fallback: site }
      ))

    it("go to the fallback over TLS when the client asks for HTTP/1.1 by ALPN", () => {
      const pem = selfSigned("fallback")
      const pair = { certificate: Buffer.from(pem.certificate), privateKey: Buffer.from(pem.privateKey) }
      return withServer(
        async ({ port }) => {
          const response = await new Promise<http.IncomingMessage>((resolve) =>
            https.get(
              {
                host: "127.0.0.1",
                port,
                path: "/stats",
                ca: pem.certificate,
                ALPNProtocols: ["http/1.1"]
              } as https.RequestOptions,
              resolve
            )
          )
          assert.strictEqual(await body(response), "site GET /stats over 1.1")
          const opened = http2.connect(`https://127.0.0.1:${port}`, { ca: pem.certificate })
          try {
            const echoed = await send(opened, { path: unary, body: [message("tls")] }).response
            assert.strictEqual(statusOf(echoed).code, grpc.status.OK)
          } finally {
            opened.close()
          }
        },
        { fallback: site, keyPair: { current: pair, subscribe: () => () => {} } }
      )
    })

    it("close an HTTP/1.1 connection that does not bring its request's headers in time, and idle ones at a stop", () =>
      withServer(
        async ({ server, port }) => {
          const slow = await tcp(port)
          slow.socket.write("GET / HTTP/1.1\r\nHost: x\r\n")
          await within(slow.closed, 5000, "the slow client is cut off")
          const agent = new http.Agent({ keepAlive: true })
          const response = await new Promise<http.IncomingMessage>((resolve) =>
            http.get({ host: "127.0.0.1", port, path: "/stats", agent }, resolve)
          )
          assert.strictEqual(await body(response), "site GET /stats over 1.1")
          let stopped = false
          server.tryShutdown(() => {
            stopped = true
          })
          await until(() => stopped, "the stop completes though a keep-alive connection was open")
          agent.destroy()
        },
        { fallback: site, connections: { handshakeTimeoutMillis: 500 } }
      ))

    it("keep an HTTPS connection that chose HTTP/1.1 past the handshake deadline while it is used", () => {
      const pem = selfSigned("https-keepalive")
      const pair = { certificate: Buffer.from(pem.certificate), privateKey: Buffer.from(pem.privateKey) }
      return withServer(
        async ({ server, port }) => {
          const agent = new https.Agent({ keepAlive: true, maxSockets: 1 })
          const sockets = new Set<unknown>()
          for (let i = 0; i < 5; i++) {
            const response = await new Promise<http.IncomingMessage>((resolve) =>
              https.get(
                {
                  host: "127.0.0.1",
                  port,
                  path: "/stats",
                  ca: pem.certificate,
                  ALPNProtocols: ["http/1.1"],
                  agent
                } as https.RequestOptions,
                resolve
              )
            )
            sockets.add(response.socket)
            assert.strictEqual(await body(response), "site GET /stats over 1.1")
            await new Promise((resolve) => setTimeout(resolve, 150))
          }
          assert.strictEqual(sockets.size, 1, "one connection served every request")
          assert.strictEqual(server.stats.handshakeTimeouts, 0)
          agent.destroy()
        },
        {
          fallback: site,
          connections: { handshakeTimeoutMillis: 300 },
          keyPair: { current: pair, subscribe: () => () => {} }
        }
      )
    })

    it("get 415 without a fallback, and a gRPC request that is not a POST gets 405 either way", () =>
      withServer(
        async ({ port }) => {
          const response = await call(port, { path: unary, headers: { ":method": "GET" }, body: [] })
          assert.strictEqual(response.headers[":status"], 405)
        },
        { fallback: site }
      ))
  })
})
