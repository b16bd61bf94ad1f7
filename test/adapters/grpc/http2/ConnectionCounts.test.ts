/**
 * The connection caps of several servers on one port, kept in one place:
 * exact across servers, each connection given back once, everything of a
 * server that is gone given back at once, and answers that come later
 * (from another thread) handled whichever comes first, the answer or the
 * close.
 */
import { EventEmitter } from "node:events"
import * as net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import type { ConnectionAdmission } from "../../../../src/adapters/grpc/http2/ConnectionCounts.ts"
import { ConnectionCounts } from "../../../../src/adapters/grpc/http2/ConnectionCounts.ts"
import { ConnectionGuard, defaultConnectionLimits } from "../../../../src/adapters/grpc/http2/ConnectionGuard.ts"
import { Http2Server } from "../../../../src/adapters/grpc/http2/Http2Server.ts"
import * as http2 from "node:http2"
import { setTimeout as sleep } from "node:timers/promises"
import * as grpc from "@grpc/grpc-js"
import { selfSigned } from "../certificates.ts"
import { service, until, within, withServer } from "./echoServer.ts"
import { message, send, statusOf } from "./rawClient.ts"
import { session } from "./fixtures/sessions.ts"

/** An accepted socket as the guard sees it: a remote address, "close" once destroyed. */
const fakeSocket = (remoteAddress: string) => {
  const socket = Object.assign(new EventEmitter(), {
    remoteAddress,
    destroyed: false,
    destroy() {
      if (socket.destroyed) return
      socket.destroyed = true
      socket.emit("close")
    }
  })
  return socket
}

const admit = (guard: ConnectionGuard, socket: ReturnType<typeof fakeSocket>) =>
  guard.admit(socket as unknown as net.Socket)

const guardOf = (admission: ConnectionAdmission) =>
  new ConnectionGuard({ ...defaultConnectionLimits, handshakeTimeoutMillis: 0, admission })

const listen = (server: Http2Server, address: string) =>
  new Promise<number>((resolve, reject) =>
    server.bindAsync(address, (error, port) => (error ? reject(error) : resolve(port)))
  )

describe("ConnectionCounts", () => {
  it("admits up to both caps, remembers who holds what, and gives a gone holder's connections back", () => {
    const counts = new ConnectionCounts(5, 2)
    assert.isTrue(counts.tryAcquire(0, "a"))
    assert.isTrue(counts.tryAcquire(1, "a"))
    assert.isFalse(counts.tryAcquire(1, "a"), "per address")
    assert.isTrue(counts.tryAcquire(0, "b"))
    assert.isTrue(counts.tryAcquire(1, "c"))
    assert.isTrue(counts.tryAcquire(1, "d"))
    assert.isFalse(counts.tryAcquire(0, "e"), "in total")
    counts.release(0, "c")
    assert.strictEqual(counts.total, 5, "a connection holder 0 does not hold is not given back")
    assert.strictEqual(counts.releaseAll(1), 3)
    assert.deepStrictEqual([counts.total, counts.countOf("a"), counts.countOf("c")], [2, 1, 0])
    assert.strictEqual(counts.releaseAll(1), 0)
    counts.release(0, "a")
    counts.release(0, "b")
    assert.strictEqual(counts.total, 0)
  })

  it("makes two guards refuse the third connection from one address, whichever gets it", () => {
    const counts = new ConnectionCounts(8, 2)
    const first = guardOf(counts.admission(0))
    const second = guardOf(counts.admission(1))
    const a = fakeSocket("127.0.0.1")
    assert.isDefined(admit(first, a))
    assert.isDefined(admit(second, fakeSocket("127.0.0.1")))
    for (const guard of [first, second]) {
      const third = fakeSocket("127.0.0.1")
      admit(guard, third)
      assert.isTrue(third.destroyed)
    }
    assert.deepStrictEqual([first.counts.refused, second.counts.refused], [1, 1])
    a.destroy()
    a.destroy()
    assert.strictEqual(counts.countOf("127.0.0.1"), 1, "a socket is counted out once")
    assert.isDefined(admit(second, fakeSocket("127.0.0.1")))
    assert.strictEqual(counts.total, 2)
  })

  it("closes a connection refused by a later answer, and gives back one that closed before it was admitted", () => {
    const counts = new ConnectionCounts(8, 1)
    const answers: Array<() => void> = []
    const later: ConnectionAdmission = {
      acquire: (address, answer) => answers.push(() => answer(counts.tryAcquire(0, address))),
      release: (address) => counts.release(0, address)
    }
    const guard = guardOf(later)
    const kept = fakeSocket("10.0.0.1")
    const refused = fakeSocket("10.0.0.1")
    admit(guard, kept)
    admit(guard, refused)
    assert.isFalse(refused.destroyed, "not closed before the answer")
    for (const answer of answers.splice(0)) answer()
    assert.isFalse(kept.destroyed)
    assert.isTrue(refused.destroyed)
    assert.strictEqual(guard.counts.refused, 1)
    kept.destroy()
    assert.strictEqual(counts.total, 0)

    const early = fakeSocket("10.0.0.2")
    admit(guard, early)
    early.destroy()
    for (const answer of answers.splice(0)) answer()
    assert.strictEqual(counts.total, 0, "admitted after it closed, then given back")
  })

  it("makes two servers on one port (reusePort) refuse the third connection from 127.0.0.1", async () => {
    const counts = new ConnectionCounts(8, 2)
    const servers = [0, 1].map(
      (holder) =>
        new Http2Server({
          reusePort: true,
          connections: { maxConnectionsPerAddress: 2, admission: counts.admission(holder) }
        })
    )
    try {
      const port = await listen(servers[0]!, "127.0.0.1:0")
      assert.strictEqual(await listen(servers[1]!, `127.0.0.1:${port}`), port)
      const first = await session(port)
      const second = await session(port)
      const third = net.connect({ port, host: "127.0.0.1" })
      third.on("error", () => {})
      await within(new Promise((resolve) => third.once("close", resolve)), 2000, "the third connection is closed")
      const stats = servers.map((server) => server.stats)
      assert.strictEqual((stats[0]?.refused ?? 0) + (stats[1]?.refused ?? 0), 1)
      assert.strictEqual(counts.countOf("127.0.0.1"), 2)
      first.session.close()
      second.session.close()
      await Promise.all([first.closed, second.closed])
      await until(() => counts.total === 0, "the servers count the closed connections out")
    } finally {
      for (const server of servers) server.forceShutdown()
    }
  })

  it("serves no call on a connection before the shared counts admit it, and none on one they refuse", async () => {
    const counts = new ConnectionCounts(3, 100)
    const answers: Array<() => void> = []
    const later: ConnectionAdmission = {
      acquire: (address, answer) => answers.push(() => answer(counts.tryAcquire(0, address))),
      release: (address) => counts.release(0, address)
    }
    await withServer(
      async ({ port, calls }) => {
        const clients = Array.from(
          { length: 8 },
          () =>
            new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
              "grpc.use_local_subchannel_pool": 1
            })
        )
        const outcomes = clients.map(
          (client) =>
            new Promise<string>((resolve) =>
              client.makeUnaryRequest(
                service.Unary.path,
                (bytes: Buffer) => bytes,
                (bytes: Buffer) => bytes,
                Buffer.from("echo"),
                { deadline: Date.now() + 3000 },
                (error) => resolve(error === null ? "served" : "not served")
              )
            )
        )
        try {
          await until(() => answers.length === 8, "every connection to be asked about")
          await new Promise((resolve) => setTimeout(resolve, 200))
          assert.strictEqual(calls.length, 0, "a call served before its connection was admitted")
          for (const answer of answers.splice(0)) answer()
          const served = await Promise.all(outcomes)
          assert.strictEqual(served.filter((outcome) => outcome === "served").length, 3)
          assert.isAtMost(calls.length, 3)
        } finally {
          for (const client of clients) client.close()
        }
      },
      { connections: { admission: later } }
    )
  })

  it("survives a client that resets its connection while the answer is on its way", async () => {
    const errors: Array<unknown> = []
    const onUncaught = (error: unknown) => errors.push(error)
    process.on("uncaughtException", onUncaught)
    const answers: Array<(admitted: boolean) => void> = []
    const later: ConnectionAdmission = { acquire: (_address, answer) => answers.push(answer), release: () => {} }
    try {
      await withServer(
        async ({ port }) => {
          const socket = net.connect({ port, host: "127.0.0.1" })
          socket.on("error", () => {})
          await new Promise((resolve) => socket.once("connect", resolve))
          socket.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
          await until(() => answers.length === 1, "the connection to be asked about")
          socket.resetAndDestroy()
          await new Promise((resolve) => setTimeout(resolve, 100))
          answers[0]!(true)
          await new Promise((resolve) => setTimeout(resolve, 50))
        },
        { connections: { admission: later } }
      )
    } finally {
      process.off("uncaughtException", onUncaught)
    }
    assert.deepStrictEqual(errors, [])
  })

  it("over TLS too: the handshake may run, but no call is served before the admission, none after a refusal", async () => {
    const pem = selfSigned("admission")
    const pair = { certificate: Buffer.from(pem.certificate), privateKey: Buffer.from(pem.privateKey) }
    const answers: Array<(admitted: boolean) => void> = []
    const later: ConnectionAdmission = { acquire: (_address, answer) => answers.push(answer), release: () => {} }
    await withServer(
      async ({ port, calls }) => {
        const sessions = [0, 1].map(() => {
          const session = http2.connect(`https://127.0.0.1:${port}`, { ca: pem.certificate })
          session.on("error", () => {})
          return session
        })
        try {
          const opened = sessions.map((session) => send(session, { path: "/test.Echo/Unary", body: [message("x")] }))
          await until(() => answers.length === 2, "both connections to be asked about")
          await sleep(200)
          assert.strictEqual(calls.length, 0, "a call served before its connection was admitted")
          answers[0]!(true)
          answers[1]!(false)
          assert.strictEqual(statusOf(await opened[0]!.response).code, grpc.status.OK)
          await opened[1]!.response
          assert.strictEqual(calls.length, 1)
        } finally {
          for (const session of sessions) session.destroy()
        }
      },
      { keyPair: { current: pair, subscribe: () => () => {} }, connections: { admission: later } }
    )
  })
})
