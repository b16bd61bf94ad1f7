/**
 * Helpers for the gRPC end-to-end tests: our server on a free loopback port
 * over the in-process core on `TestClock`, clients of it, a step-by-step
 * reader of watch streams, and raw grpc-js calls for bytes the typed client
 * cannot send.
 */
import * as grpc from "@grpc/grpc-js"
import type { Scope } from "effect"
import { Cause, Effect, Exit, Layer, Logger, Stream } from "effect"
import { assert } from "@effect/vitest"
import * as GrpcClient from "../../../src/adapters/grpc/GrpcClient.ts"
import * as GrpcServer from "../../../src/adapters/grpc/GrpcServer.ts"
import { TestDiscovery } from "../../../src/adapters/testing/index.ts"
import type { ClusterState } from "../../../src/core/server/ClusterState.ts"
import type { ServerOptions as CoreOptions } from "../../../src/core/server/DiscoveryServer.ts"
import type { ClusterApi, WatchEvent } from "../../../src/ports/ClusterApi.ts"
import type { DiscoveryError } from "../../../src/ports/DiscoveryError.ts"

/** The standalone server's transports: the tests of the server run over each. */
export const transports: ReadonlyArray<GrpcServer.Transport> = ["http2", "grpc-js"]

let defaultTransport: GrpcServer.Transport = "http2"

/**
 * Makes `serverLayer` run on `transport` when its options name none, so a
 * suite written for the default runs over another transport as it is.
 */
export const useTransport = (transport: GrpcServer.Transport): void => {
  defaultTransport = transport
}

/** Our gRPC server on 127.0.0.1:0 over the in-process core, which stays reachable as `ClusterApi`. */
export const serverLayer = (
  core: CoreOptions = {},
  server: GrpcServer.ServerOptions = {}
): Layer.Layer<GrpcServer.GrpcServer | ClusterApi | ClusterState, GrpcServer.BindError | GrpcServer.TlsError> =>
  GrpcServer.layer({ address: "127.0.0.1:0", transport: defaultTransport, ...server }).pipe(
    Layer.provideMerge(TestDiscovery.layer(core))
  )

/** The loopback target of the running server. */
export const endpoint: Effect.Effect<string, never, GrpcServer.GrpcServer> = Effect.map(
  GrpcServer.GrpcServer,
  ({ port }) => `127.0.0.1:${port}`
)

/** A plaintext client of the running server, on a connection of its own. */
export const connect = (
  options: Partial<GrpcClient.ClientOptions> = {}
): Effect.Effect<ClusterApi["Service"], never, GrpcServer.GrpcServer | Scope.Scope> =>
  Effect.flatMap(endpoint, (target) =>
    GrpcClient.make({
      endpoint: target,
      tls: false,
      ...options,
      channelOptions: { "grpc.use_local_subchannel_pool": 1, ...options.channelOptions }
    })
  )

/** Reads a watch one event at a time; nothing is read between calls. */
export interface Watcher {
  readonly next: Effect.Effect<WatchEvent, DiscoveryError | Cause.Done>
  readonly take: (n: number) => Effect.Effect<Array<WatchEvent>, DiscoveryError | Cause.Done>
}

/** Starts a watch stream in the current scope without consuming it. */
export const watcher = (
  stream: Stream.Stream<WatchEvent, DiscoveryError>
): Effect.Effect<Watcher, never, Scope.Scope> =>
  Effect.map(Stream.toPull(stream), (pull) => {
    const pending: Array<WatchEvent> = []
    const next: Watcher["next"] = Effect.suspend(() =>
      pending.length > 0
        ? Effect.succeed(pending.shift()!)
        : Effect.map(pull, (chunk) => {
            pending.push(...chunk)
            return pending.shift()!
          })
    )
    return {
      next,
      take: (n) => Effect.forEach(Array.from({ length: n }), () => next)
    }
  })

/** The status a raw call ended with. */
export interface RawStatus {
  readonly code: grpc.status
  readonly details: string
}

const identity = (bytes: Buffer): Buffer => bytes

/**
 * A unary call with hand-built request bytes and a deadline (5 s unless
 * given); succeeds with the response bytes or fails with the status.
 * Interrupting it cancels the call.
 */
export const rawUnary = (
  target: string,
  method: string,
  request: Uint8Array,
  metadata: grpc.Metadata = new grpc.Metadata(),
  deadlineMillis = 5000
): Effect.Effect<Buffer, RawStatus> =>
  Effect.callback<Buffer, RawStatus>((resume) => {
    const client = new grpc.Client(target, grpc.credentials.createInsecure())
    const call = client.makeUnaryRequest(
      method,
      identity,
      identity,
      Buffer.from(request),
      metadata,
      { deadline: Date.now() + deadlineMillis },
      (error, response) => {
        client.close()
        resume(
          error
            ? Effect.fail({ code: error.code, details: error.details })
            : Effect.succeed(response ?? Buffer.alloc(0))
        )
      }
    )
    return Effect.sync(() => {
      call.cancel()
      client.close()
    })
  })

/** Metadata with the given headers. */
export const headers = (entries: Record<string, string>): grpc.Metadata => {
  const metadata = new grpc.Metadata()
  for (const [key, value] of Object.entries(entries)) metadata.add(key, value)
  return metadata
}

/** One log line as `Logger.formatJson` renders it, parsed back. */
export interface JsonLogLine {
  readonly message: unknown
  readonly level: string
  readonly annotations: Record<string, unknown>
}

/** A logger layer that keeps every line as JSON (what `Logger.consoleJson` prints), and the lines it kept. */
export const captureLogs = (): { readonly lines: Array<JsonLogLine>; readonly layer: Layer.Layer<never> } => {
  const lines: Array<JsonLogLine> = []
  const layer = Logger.layer([Logger.map(Logger.formatJson, (line) => lines.push(JSON.parse(line) as JsonLogLine))])
  return { lines, layer }
}

/** Sleeps on the real clock, whatever clock the fiber has. */
export const realSleep = (millis: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

/** Retries `effect` every 20 ms of real time until it succeeds, at most `attempts` times; then fails as it did. */
export const eventually = <A, E, R>(effect: Effect.Effect<A, E, R>, attempts = 150): Effect.Effect<A, E, R> =>
  Effect.catch(effect, (error) =>
    attempts <= 1 ? Effect.fail(error) : Effect.andThen(realSleep(20), eventually(effect, attempts - 1))
  )

/** Waits (real time, up to 3 s) until `condition` holds, then fails the test if it never did. */
export const waitUntil = (condition: () => boolean, what: string): Effect.Effect<void> =>
  eventually(Effect.suspend(() => (condition() ? Effect.void : Effect.fail(what)))).pipe(
    Effect.catch((reason) => Effect.sync(() => assert.fail(`timed out waiting until ${reason}`)))
  )

/** A server-streaming call with hand-built request bytes; gives the messages received and the final status. */
export const rawStream = (
  target: string,
  method: string,
  request: Uint8Array
): Effect.Effect<{ readonly messages: Array<Buffer>; readonly status: RawStatus }> =>
  Effect.callback((resume) => {
    const client = new grpc.Client(target, grpc.credentials.createInsecure())
    const call = client.makeServerStreamRequest(method, identity, identity, Buffer.from(request), new grpc.Metadata())
    const messages: Array<Buffer> = []
    call.on("data", (message: Buffer) => messages.push(message))
    call.on("error", () => {})
    call.on("status", (status: grpc.StatusObject) => {
      client.close()
      resume(Effect.succeed({ messages, status: { code: status.code, details: status.details } }))
    })
  })

/** A blob of `length` bytes filled with `fill`. */
export const blob = (length: number, fill: number): Uint8Array => new Uint8Array(length).fill(fill)

/** The typed error an exit failed with; fails the test on success, a defect or the end of a stream. */
export const failureOf = <A, E>(exit: Exit.Exit<A, E>): Exclude<E, Cause.Done> => {
  if (Exit.isSuccess(exit)) return assert.fail("expected a failure")
  const error = Cause.findErrorOption(exit.cause)
  if (error._tag === "None") return assert.fail(`expected a typed failure, got ${Cause.pretty(exit.cause)}`)
  if (Cause.isDone(error.value)) return assert.fail("expected a failure, the stream ended")
  return error.value as Exclude<E, Cause.Done>
}
