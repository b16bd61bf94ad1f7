/**
 * Helpers for the client tests: keys, in-process services on TestClock,
 * clients with their own scopes, a ClusterApi wrapper that fails on demand
 * and records calls, and polling under TestClock.
 */
import { assert } from "@effect/vitest"
import type { Scope } from "effect"
import { Clock, Context, Deferred, Duration, Effect, Exit, Layer, Ref, Scope as ScopeM, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as TestDiscovery from "../../src/adapters/testing/TestDiscovery.ts"
import { ClusterConnector } from "../../src/core/client/ClusterConnector.ts"
import * as DiscoveryClient from "../../src/core/client/DiscoveryClient.ts"
import type { DiscoveredAffiliate } from "../../src/core/client/reconcile.ts"
import { ClusterState } from "../../src/core/server/ClusterState.ts"
import type { ServerOptions } from "../../src/core/server/DiscoveryServer.ts"
import type { HelloRequest, HelloResponse, ResumePoint, WatchEvent } from "../../src/ports/ClusterApi.ts"
import { ClusterApi } from "../../src/ports/ClusterApi.ts"
import type { DiscoveryError } from "../../src/ports/DiscoveryError.ts"
import { Unavailable } from "../../src/ports/DiscoveryError.ts"

export type Api = ClusterApi["Service"]
export type Client = DiscoveryClient.DiscoveryClient["Service"]

/** A 32-byte key 00 01 … 1f (the vectors' AES-256 key). */
export const key32 = Uint8Array.from({ length: 32 }, (_, i) => i)

/** Bytes from hex. */
export const hex = (text: string): Uint8Array => Uint8Array.from(Buffer.from(text, "hex"))

/** Hex of bytes. */
export const toHex = (bytes: Uint8Array): string => Buffer.from(bytes).toString("hex")

/** An in-process service on TestClock (GC only through `runGc`), alive for the test's scope. */
export const server = (
  options: ServerOptions = {}
): Effect.Effect<{ readonly api: Api; readonly state: ClusterState["Service"] }, never, Scope.Scope> =>
  Effect.map(Layer.build(TestDiscovery.layer(options)), (context) => ({
    api: Context.get(context, ClusterApi),
    state: Context.get(context, ClusterState)
  }))

/** A client in a scope of its own, so a test can stop it. */
export interface RunningClient {
  readonly client: Client
  readonly stop: Effect.Effect<void>
}

/** Options with defaults: cluster "c1", TTL 1 minute, endpoint "srv1". */
export const clientOptions = (
  affiliateId: string,
  options: Partial<DiscoveryClient.ClientOptions> = {}
): DiscoveryClient.ClientOptions => ({
  key: key32,
  endpoint: "srv1",
  clusterId: "c1",
  affiliateId,
  ttl: "1 minute",
  ...options
})

/** Starts a client over `connect`; `stop` closes its scope (no delete is sent). */
export const startClient = (
  options: DiscoveryClient.ClientOptions,
  connect: (endpoint: string) => Effect.Effect<Api, DiscoveryError, Scope.Scope>
): Effect.Effect<RunningClient, DiscoveryClient.InvalidClientOptions> =>
  Effect.gen(function* () {
    const scope = yield* ScopeM.make()
    const client = yield* DiscoveryClient.make(options).pipe(
      ScopeM.provide(scope),
      Effect.provideService(ClusterConnector, ClusterConnector.of({ connect }))
    )
    return { client, stop: ScopeM.close(scope, Exit.void) }
  })

/** Connects every endpoint to `api`. */
export const only = (api: Api) => (): Effect.Effect<Api> => Effect.succeed(api)

/** Connects by name; other endpoints are Unavailable. */
export const byName =
  (apis: Readonly<Record<string, Api>>) =>
  (endpoint: string): Effect.Effect<Api, DiscoveryError> => {
    const api = apis[endpoint]
    return api === undefined ? Effect.fail(new Unavailable({ message: `no ${endpoint}` })) : Effect.succeed(api)
  }

/**
 * Advances TestClock in `step`s until `check` passes, at most `within`;
 * fails the test otherwise. Returns the time it took.
 */
export const eventually = <A>(
  read: Effect.Effect<A>,
  check: (value: A) => boolean,
  options: { readonly step?: Duration.Input; readonly within?: Duration.Input; readonly what?: string } = {}
): Effect.Effect<A> =>
  Effect.gen(function* () {
    const step = Duration.toMillis(Duration.fromInputUnsafe(options.step ?? "100 millis"))
    const within = Duration.toMillis(Duration.fromInputUnsafe(options.within ?? "2 seconds"))
    for (let waited = 0; ; waited += step) {
      yield* settle
      const value = yield* read
      if (check(value)) return value
      if (waited >= within) {
        assert.fail(`${options.what ?? "condition"} not met within ${within} ms: ${JSON.stringify(value, replacer)}`)
      }
      yield* TestClock.adjust(step)
    }
  })

const replacer = (_: string, value: unknown) => (value instanceof Uint8Array ? toHex(value) : value)

/** Lets forked fibers run without moving time. */
export const settle: Effect.Effect<void> = Effect.repeat(Effect.yieldNow, { times: 50 })

/** The IDs a client currently sees, sorted. */
export const seenIds = (client: Client): Effect.Effect<Array<string>> =>
  Effect.map(client.affiliates, (list) => list.map((a) => a.id).sort())

/** Endpoints of one discovered affiliate as "ip-hex:port", sorted. */
export const endpointsOf = (affiliate: DiscoveredAffiliate | undefined): Array<string> =>
  (affiliate?.endpoints ?? []).map((e) => `${toHex(e.ip)}:${e.port}`).sort()

/** Calls seen by an instrumented ClusterApi, with the TestClock time of each. */
export interface Call {
  readonly method: "hello" | "affiliateUpdate" | "affiliateDelete" | "watch"
  readonly at: number
  readonly affiliateId?: string | undefined
  /** Where a watch asked to resume. */
  readonly resume?: ResumePoint | undefined
  readonly failed: boolean
}

/** An instrumented ClusterApi and its controls. */
export interface Instrumented {
  readonly api: Api
  /** Every call so far, in order. */
  readonly calls: Effect.Effect<ReadonlyArray<Call>>
  /** Ends every open watch with Unavailable, as a server restart would. */
  readonly killWatches: Effect.Effect<void>
}

/** The times of the calls of one method. */
export const timesOf = (calls: ReadonlyArray<Call>, method: Call["method"]): Array<number> =>
  calls.filter((call) => call.method === method).map((call) => call.at)

/**
 * Wraps `api`: records every call with its time, fails a call with
 * Unavailable while `failures(method, n)` says so (`n` counts calls of that
 * method, from 1), and lets `hello` answer differently through `hello`.
 */
export const instrument = (
  api: Api,
  options: {
    readonly failures?: (method: Call["method"], n: number) => boolean
    readonly hello?: (request: HelloRequest) => HelloResponse | undefined
    /** Whether an event of the n-th watch (from 1) is lost on the way, as a faulty service would lose it. */
    readonly drop?: (watch: number, event: WatchEvent) => boolean
  } = {}
): Effect.Effect<Instrumented> =>
  Effect.gen(function* () {
    const calls = yield* Ref.make<ReadonlyArray<Call>>([])
    const counts = new Map<string, number>()
    let kill = Deferred.makeUnsafe<void>()
    const record = <A, E>(
      method: Call["method"],
      affiliateId: string | undefined,
      run: Effect.Effect<A, E>,
      resume?: ResumePoint
    ): Effect.Effect<A, E | Unavailable> =>
      Effect.gen(function* () {
        const n = (counts.get(method) ?? 0) + 1
        counts.set(method, n)
        const failed = options.failures?.(method, n) ?? false
        const at = yield* Clock.currentTimeMillis
        yield* Ref.update(calls, (list) => [...list, { method, at, affiliateId, resume, failed }])
        if (failed) return yield* new Unavailable({ message: `injected failure of ${method} #${n}` })
        return yield* run
      })
    const wrapped: Api = {
      hello: (request) =>
        record(
          "hello",
          undefined,
          Effect.suspend(() => {
            const answer = options.hello?.(request)
            return answer === undefined ? api.hello(request) : Effect.succeed(answer)
          })
        ),
      affiliateUpdate: (request) => record("affiliateUpdate", request.affiliateId, api.affiliateUpdate(request)),
      affiliateDelete: (request) => record("affiliateDelete", request.affiliateId, api.affiliateDelete(request)),
      list: api.list,
      watch: (request) =>
        Stream.unwrap(
          record(
            "watch",
            undefined,
            Effect.sync(() => {
              const killed = Deferred.await(kill).pipe(
                Effect.andThen(Effect.fail(new Unavailable({ message: "restarting" })))
              )
              const watch = counts.get("watch") ?? 0
              return api.watch(request).pipe(
                Stream.filter((event) => !(options.drop?.(watch, event) ?? false)),
                Stream.interruptWhen(killed)
              )
            }),
            request.resume
          )
        )
    }
    const killWatches = Effect.suspend(() => {
      const current = kill
      kill = Deferred.makeUnsafe<void>()
      return Deferred.succeed(current, undefined)
    })
    return { api: wrapped, calls: Ref.get(calls), killWatches: Effect.asVoid(killWatches) }
  })
