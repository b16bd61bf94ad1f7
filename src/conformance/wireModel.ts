/**
 * The model-based property of the conformance kit, as it runs over the wire:
 * random sequences of updates, deletes, lists and watches that open and
 * disconnect, applied to a server and to a reference model of PROTOCOL.md
 * §2.5–§2.8 (data replaced only by non-empty data, endpoints appended when
 * new, deletes remove). After every step, List must equal the model, and
 * every open watch, replayed as a client does, must reach it. Steps are
 * plain data, so a failing sequence is printed, saved and replayed as is.
 *
 * @since 0.1.0
 */
import type { Scope } from "effect"
import { Duration, Effect, Fiber, Stream } from "effect"
import fc from "fast-check"
import type { AffiliateView, WatchEvent } from "../ports/ClusterApi.ts"
import { ClusterApi } from "../ports/ClusterApi.ts"
import { assert } from "./check.ts"
import { endpoint, newClusterId, realSleep, replay, type Shown, showAll } from "./fixtures.ts"

/**
 * One step, on the run's clusters (0, 1), affiliates (0–3) and endpoints
 * (0–5): the same values always make the same request.
 *
 * @category models
 * @since 0.1.0
 */
export type Step =
  | {
      readonly op: "update"
      readonly cluster: number
      readonly affiliate: number
      /** Absent: no data; 0: empty data (leaves it alone); otherwise a payload of that length. */
      readonly data?: number | undefined
      readonly endpoints: ReadonlyArray<number>
    }
  | { readonly op: "delete"; readonly cluster: number; readonly affiliate: number }
  | { readonly op: "list"; readonly cluster: number }
  | { readonly op: "watch"; readonly cluster: number }
  | { readonly op: "disconnect"; readonly watch: number }

/**
 * Random sequences of 1 to `maxSteps` steps.
 *
 * @category constructors
 * @since 0.1.0
 */
export const stepsArbitrary = (maxSteps = 25): fc.Arbitrary<ReadonlyArray<Step>> => {
  const cluster = fc.integer({ min: 0, max: 1 })
  const affiliate = fc.integer({ min: 0, max: 3 })
  const step: fc.Arbitrary<Step> = fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record(
        {
          op: fc.constant("update" as const),
          cluster,
          affiliate,
          data: fc.integer({ min: 0, max: 3 }),
          endpoints: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 3 })
        },
        { requiredKeys: ["op", "cluster", "affiliate", "endpoints"] }
      )
    },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("delete" as const), cluster, affiliate }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant("list" as const), cluster }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant("watch" as const), cluster }) },
    {
      weight: 1,
      arbitrary: fc.record({ op: fc.constant("disconnect" as const), watch: fc.integer({ min: 0, max: 3 }) })
    }
  )
  return fc.array(step, { minLength: 1, maxLength: maxSteps })
}

const payload = (length: number, affiliate: number): Uint8Array =>
  Uint8Array.from({ length }, (_, i) => (affiliate * 16 + i + length) & 0xff)

const affiliateId = (affiliate: number) => `node-${affiliate}`

/** The model: each cluster's affiliates by ID. */
type Model = Map<number, Map<string, AffiliateView>>

const applyToModel = (model: Model, step: Step): void => {
  if (step.op !== "update" && step.op !== "delete") return
  let cluster = model.get(step.cluster)
  if (cluster === undefined) {
    cluster = new Map()
    model.set(step.cluster, cluster)
  }
  const id = affiliateId(step.affiliate)
  if (step.op === "delete") {
    cluster.delete(id)
    return
  }
  const known = cluster.get(id) ?? { id, data: new Uint8Array(), endpoints: [] }
  const data = step.data !== undefined && step.data > 0 ? payload(step.data, step.affiliate) : known.data
  const endpoints = [...known.endpoints]
  for (const index of step.endpoints) {
    const blob = endpoint(index)
    if (!endpoints.some((held) => Buffer.from(held).equals(blob))) endpoints.push(blob)
  }
  cluster.set(id, { id, data, endpoints })
}

const modelOf = (model: Model, cluster: number): Array<Shown> => showAll([...(model.get(cluster)?.values() ?? [])])

/** A watch of the run: what it received so far, and the fiber reading it. */
interface OpenWatch {
  readonly cluster: number
  readonly events: Array<WatchEvent>
  readonly fiber: Fiber.Fiber<void, unknown>
  failure: unknown
}

/**
 * Runs `steps` against the server of the context and the model, checking
 * after each step; fails with the first disagreement (an `AssertionError`
 * naming the step). `settleMillis` bounds how long a watch may take to reach
 * the model after a step, in real time.
 *
 * @category constructors
 * @since 0.1.0
 */
export const runSteps = (
  steps: ReadonlyArray<Step>,
  settleMillis = 2000
): Effect.Effect<void, unknown, ClusterApi | Scope.Scope> =>
  Effect.gen(function* () {
    const api = yield* ClusterApi
    const prefix = newClusterId()
    const clusterId = (cluster: number) => `${prefix}-${cluster}`
    const model: Model = new Map()
    const watches: Array<OpenWatch> = []
    const list = (cluster: number) => Effect.map(api.list({ clusterId: clusterId(cluster) }), showAll)
    for (const [index, step] of steps.entries()) {
      const at = `step ${index + 1} ${JSON.stringify(step)}`
      switch (step.op) {
        case "update":
          yield* api.affiliateUpdate({
            clusterId: clusterId(step.cluster),
            affiliateId: affiliateId(step.affiliate),
            data: step.data === undefined ? undefined : payload(step.data, step.affiliate),
            endpoints: step.endpoints.map(endpoint),
            ttl: Duration.minutes(5)
          })
          break
        case "delete":
          yield* api.affiliateDelete({ clusterId: clusterId(step.cluster), affiliateId: affiliateId(step.affiliate) })
          break
        case "list":
          break
        case "watch": {
          if (watches.length >= 4) break
          const events: Array<WatchEvent> = []
          const open: OpenWatch = {
            cluster: step.cluster,
            events,
            failure: undefined,
            fiber: undefined as never
          }
          const fiber = yield* Stream.runForEach(api.watch({ clusterId: clusterId(step.cluster) }), (event) =>
            Effect.sync(() => events.push(event))
          ).pipe(
            Effect.catch((error) => Effect.sync(() => (open.failure = error))),
            Effect.forkScoped
          )
          watches.push(Object.assign(open, { fiber }))
          break
        }
        case "disconnect": {
          const gone = watches.splice(step.watch % Math.max(1, watches.length), 1)[0]
          if (gone !== undefined) yield* Fiber.interrupt(gone.fiber)
          break
        }
      }
      applyToModel(model, step)
      for (const cluster of [0, 1]) {
        assert.deepStrictEqual(yield* list(cluster), modelOf(model, cluster), `List of cluster ${cluster} after ${at}`)
      }
      for (const watch of watches) {
        const wanted = modelOf(model, watch.cluster)
        for (let waited = 0; ; waited += 10) {
          if (watch.failure !== undefined) {
            assert.fail(`a watch of cluster ${watch.cluster} ended after ${at}: ${String(watch.failure)}`)
          }
          const seen = watch.events.length === 0 ? undefined : replay(watch.events)
          if (seen !== undefined && JSON.stringify(seen) === JSON.stringify(wanted)) break
          if (waited >= settleMillis) {
            assert.deepStrictEqual(seen, wanted, `a watch of cluster ${watch.cluster}, replayed, after ${at}`)
            break
          }
          yield* realSleep(10)
        }
      }
    }
  })
