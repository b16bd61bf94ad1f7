/**
 * The test service of the http2 transport's tests on a real server: Unary
 * echoes, or hangs, throws or fails as its request says; Stream writes each
 * comma-separated part, or floods the client until it pushes back; Bidi
 * echoes each message. `withServer` runs a body against a fresh server.
 */
import { setTimeout as sleep } from "node:timers/promises"
import * as grpc from "@grpc/grpc-js"
import { assert } from "@effect/vitest"
import { Http2Server, type Http2ServerOptions } from "../../../../src/adapters/grpc/http2/Http2Server.ts"

const identity = (bytes: Buffer): Buffer => bytes

export const methodOf = (
  name: string,
  requestStream: boolean,
  responseStream: boolean
): grpc.MethodDefinition<Buffer, Buffer> => ({
  path: `/test.Echo/${name}`,
  requestStream,
  responseStream,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity
})

export const service = {
  Unary: methodOf("Unary", false, false),
  Stream: methodOf("Stream", false, true),
  Bidi: methodOf("Bidi", true, true)
} satisfies grpc.ServiceDefinition

/** What a test handler saw of its call, as the server's services see it. */
export type AnyCall = grpc.ServerUnaryCall<Buffer, Buffer> &
  grpc.ServerWritableStream<Buffer, Buffer> & { readonly events: Array<string> }

export const record = (calls: Array<AnyCall>, call: AnyCall): AnyCall => {
  const events: Array<string> = []
  Object.assign(call, { events })
  for (const event of ["cancelled", "close", "drain"]) call.on(event, () => events.push(event))
  calls.push(call)
  return call
}

/** How many 16 KiB messages a "flood" stream writes: 4 MiB, far more than the flow-control windows hold. */
export const floodMessages = 256

export const failureMetadata = () => {
  const metadata = new grpc.Metadata()
  metadata.set("x-detail", "one")
  metadata.set("x-blob-bin", Buffer.from([0, 1, 2, 255]))
  return metadata
}

/**
 * The test service: Unary echoes, or hangs, throws or fails as its request
 * says; Stream writes each comma-separated part, or floods the client until
 * it pushes back; Bidi echoes each message (ignoring push back, as the
 * reflection service does) and ends when the client does, or ends at once,
 * or throws from its "data" or "end" listener, as its messages say.
 */
export const handlers = (calls: Array<AnyCall>) => ({
  Unary: (raw: AnyCall, callback: grpc.sendUnaryData<Buffer>) => {
    const call = record(calls, raw)
    const text = call.request.toString()
    if (text === "hang") return
    if (text === "throw") throw new Error("boom")
    if (text === "fail") {
      callback({
        code: grpc.status.FAILED_PRECONDITION,
        details: "ünïcode 100%\nnext line",
        metadata: failureMetadata()
      })
      return
    }
    callback(null, call.request)
  },
  Stream: (raw: AnyCall) => {
    const call = record(calls, raw)
    const text = call.request.toString()
    if (text === "hang") return
    if (text === "fail after one") {
      call.write(Buffer.from("one"))
      call.emit("error", { code: grpc.status.ABORTED, details: "stop" })
      return
    }
    if (text === "flood") {
      const chunk = Buffer.alloc(16 * 1024, 7)
      let written = 0
      const pump = () => {
        while (written < floodMessages) {
          written++
          if (!call.write(chunk)) {
            call.once("drain", pump)
            return
          }
        }
        call.end()
      }
      Object.assign(call, { written: () => written })
      pump()
      return
    }
    if (text === "throw on drain") {
      while (call.write(Buffer.alloc(16 * 1024, 7))) {}
      call.once("drain", () => {
        throw new Error("boom")
      })
      return
    }
    for (const part of text === "" ? [] : text.split(",")) call.write(Buffer.from(part))
    call.end(failureMetadata())
  },
  Bidi: (raw: AnyCall) => {
    const call = record(calls, raw)
    let received = 0
    let throwAtEnd = false
    Object.assign(call, { received: () => received })
    call.on("data", (request: Buffer) => {
      received++
      const text = request.toString()
      if (text === "throw") throw new Error("boom")
      if (text === "end") {
        call.end()
        return
      }
      if (text === "throw at end") throwAtEnd = true
      call.write(request)
    })
    call.on("end", () => {
      if (throwAtEnd) throw new Error("boom at end")
      call.end()
    })
  }
})

export interface Running {
  readonly server: Http2Server
  readonly port: number
  readonly calls: Array<AnyCall>
}

/** Runs `body` against a server with the test service, then stops it at once. */
export const withServer = async (body: (running: Running) => Promise<void>, options: Http2ServerOptions = {}) => {
  const server = new Http2Server(options)
  const calls: Array<AnyCall> = []
  server.addService(service, handlers(calls) as unknown as grpc.UntypedServiceImplementation)
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", (error, port) => (error ? reject(error) : resolve(port)))
  )
  try {
    await body({ server, port, calls })
  } finally {
    server.forceShutdown()
  }
}

/** Waits (real time, up to 2 s) until `condition` holds. */
export const until = async (condition: () => boolean, what: string) => {
  for (let i = 0; i < 200 && !condition(); i++) await sleep(10)
  assert.isTrue(condition(), `timed out waiting until ${what}`)
}

/** `promise`, or a failure naming `what` once `millis` (real time) pass first. */
export const within = <A>(promise: Promise<A>, millis: number, what: string): Promise<A> =>
  Promise.race([
    promise,
    sleep(millis, undefined, { ref: false }).then(() => Promise.reject(new Error(`timed out waiting until ${what}`)))
  ])
