/**
 * The crossing between an I/O thread and the main thread alone: a no-op
 * call (`list` of a `ClusterApi` that answers an empty list at once) made
 * by a worker thread through `ClusterApiClient` and answered by
 * `ClusterApiHost` on the main thread, as every AffiliateUpdate of a worker
 * thread crosses. With 1 call in flight each crossing wakes both threads;
 * with 16, one turn carries several. Prints one JSON object: for each
 * number in flight, calls/s and the process's CPU per call (both threads),
 * and the floor under any crossing (`bench/crossingFloor.ts`) in the same run.
 *
 * Run: `node bench/crossing.ts [--duration 3]`.
 */
import { MessageChannel, isMainThread, parentPort, Worker, workerData } from "node:worker_threads"
import { Effect, Stream } from "effect"
import { ClusterApiClient, ClusterApiHost } from "../src/adapters/message-port/index.ts"
import { ClusterApi } from "../src/ports/ClusterApi.ts"
import { measureFloor } from "./crossingFloor.ts"

/** What the worker reports for one number of calls in flight. */
interface Crossing {
  readonly inFlight: number
  readonly calls: number
  readonly seconds: number
}

const noOp = ClusterApi.of({
  hello: () => Effect.succeed({}),
  affiliateUpdate: () => Effect.void,
  affiliateDelete: () => Effect.void,
  list: () => Effect.succeed([]),
  watch: () => Stream.empty,
  subscribe: () => Effect.die(new Error("no watches here"))
})

/** The worker: `inFlight` callers, each calling again as soon as its answer comes, for `seconds`. */
const drive = (port: MessageChannel["port2"], seconds: number) =>
  Effect.scoped(
    Effect.gen(function* () {
      const api = (yield* ClusterApiClient.connect(port)).api
      const results: Array<Crossing> = []
      for (const inFlight of [1, 16]) {
        for (const measured of [false, true]) {
          const started = performance.now()
          const until = started + seconds * 1000
          let calls = 0
          yield* Effect.forEach(
            Array.from({ length: inFlight }),
            () =>
              Effect.whileLoop({
                while: () => performance.now() < until,
                body: () => api.list({ clusterId: "c" }),
                step: () => {
                  calls++
                }
              }),
            { concurrency: "unbounded", discard: true }
          )
          if (measured) results.push({ inFlight, calls, seconds: (performance.now() - started) / 1000 })
          parentPort!.postMessage({ phase: measured ? "measured" : "warmed", inFlight })
        }
      }
      return results
    })
  )

if (isMainThread) {
  const index = process.argv.indexOf("--duration")
  const seconds = index === -1 ? 3 : Number(process.argv[index + 1])
  const channel = new MessageChannel()
  const cpu: Record<string, number> = {}
  await Effect.runPromise(
    Effect.scoped(
      Effect.gen(function* () {
        yield* ClusterApiHost.serve(noOp, channel.port1)
        const worker = new Worker(new URL(import.meta.url), {
          workerData: { port: channel.port2, seconds },
          transferList: [channel.port2]
        })
        let phaseStart = process.cpuUsage()
        const results = yield* Effect.callback<ReadonlyArray<Crossing>>((resume) => {
          worker.on("message", (message: { phase?: string; inFlight?: number; results?: ReadonlyArray<Crossing> }) => {
            if (message.results !== undefined) resume(Effect.succeed(message.results))
            else {
              const used = process.cpuUsage(phaseStart)
              if (message.phase === "measured") cpu[String(message.inFlight)] = (used.user + used.system) / 1000
              phaseStart = process.cpuUsage()
            }
          })
          worker.on("error", (error) => resume(Effect.die(error)))
        })
        yield* Effect.promise(() => worker.terminate())
        const rows = results.map((result) => ({
          inFlight: result.inFlight,
          perSecond: Math.round(result.calls / result.seconds),
          cpuMicrosPerCall: Math.round(((cpu[String(result.inFlight)] ?? 0) * 1_000_000) / result.calls) / 1000
        }))
        const floor = [
          yield* Effect.promise(() => measureFloor("post", seconds)),
          yield* Effect.promise(() => measureFloor("shared", seconds))
        ]
        console.log(JSON.stringify({ crossing: rows, floor }))
      })
    )
  )
} else {
  const data = workerData as { readonly port: MessageChannel["port2"]; readonly seconds: number }
  const results = await Effect.runPromise(drive(data.port, data.seconds))
  parentPort!.postMessage({ results })
}
