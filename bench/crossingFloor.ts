/**
 * The floor under any crossing between two threads of one process: a
 * ping-pong with one message in flight and nothing else, so each round trip
 * wakes both threads. `post` sends a small object over a `MessagePort` each
 * way (as `ClusterApiClient` does, without it); `shared` writes a sequence
 * number into shared memory and wakes the other side with `Atomics.notify`,
 * each side waiting with `Atomics.waitAsync` (the shared-memory ring issue 23
 * names as a candidate). Used by `bench/crossing.ts`.
 */
import { isMainThread, MessageChannel, parentPort, Worker, workerData } from "node:worker_threads"

/** How the two threads reach each other. */
export type FloorKind = "post" | "shared"

/** Round trips per second and the process's CPU per round trip (both threads). */
export interface Floor {
  readonly kind: FloorKind
  readonly perSecond: number
  readonly cpuMicrosPerCall: number
}

interface FloorData {
  readonly kind: FloorKind
  readonly port: MessageChannel["port2"]
  readonly cells: Int32Array<SharedArrayBuffer>
  readonly seconds: number
}

const request = 0
const reply = 1

/** Waits until `cells[index]` is no longer `value`, then calls `then`, without blocking the event loop. */
const whenChanged = (cells: Int32Array<SharedArrayBuffer>, index: number, value: number, then: () => void) => {
  const waited = Atomics.waitAsync(cells, index, value)
  if (waited.async) void waited.value.then(then)
  else then()
}

/** Measures one kind for `seconds` (plus one second of warm-up) in a worker of its own. */
export const measureFloor = (kind: FloorKind, seconds: number): Promise<Floor> =>
  new Promise((resolve, reject) => {
    const channel = new MessageChannel()
    const cells = new Int32Array(new SharedArrayBuffer(8))
    let answering = true
    if (kind === "post") channel.port1.on("message", (message: { id: number }) => channel.port1.postMessage(message))
    else {
      const answer = (seen: number) =>
        whenChanged(cells, request, seen, () => {
          if (!answering) return
          const next = Atomics.load(cells, request)
          Atomics.store(cells, reply, next)
          Atomics.notify(cells, reply)
          answer(next)
        })
      answer(0)
    }
    const worker = new Worker(new URL(import.meta.url), {
      workerData: { kind, port: channel.port2, cells, seconds } satisfies FloorData,
      transferList: [channel.port2]
    })
    let started = process.cpuUsage()
    let startedAt = performance.now()
    worker.on("message", (message: { warmed?: true; calls?: number }) => {
      if (message.warmed) {
        started = process.cpuUsage()
        startedAt = performance.now()
        return
      }
      const used = process.cpuUsage(started)
      const calls = message.calls ?? 0
      answering = false
      Atomics.store(cells, request, -1)
      Atomics.notify(cells, request)
      channel.port1.close()
      resolve({
        kind,
        perSecond: Math.round(calls / ((performance.now() - startedAt) / 1000)),
        cpuMicrosPerCall: Math.round(((used.user + used.system) * 1000) / calls) / 1000
      })
      void worker.terminate()
    })
    worker.on("error", reject)
  })

/** The worker side: round trips one at a time for a second of warm-up, then for `seconds`. */
const pingPong = ({ kind, port, cells, seconds }: FloorData) => {
  const keepAlive = setInterval(() => {}, 1000)
  let until = performance.now() + 1000
  let warm = false
  let calls = 0
  const next = (): boolean => {
    calls++
    if (performance.now() < until) return true
    if (!warm) {
      warm = true
      calls = 0
      until = performance.now() + seconds * 1000
      parentPort!.postMessage({ warmed: true })
      return true
    }
    clearInterval(keepAlive)
    port.close()
    parentPort!.postMessage({ calls })
    return false
  }
  if (kind === "post") {
    port.on("message", (message: { id: number }) => {
      if (next()) port.postMessage({ id: message.id + 1, request: { clusterId: "c" } })
    })
    port.postMessage({ id: 0, request: { clusterId: "c" } })
  } else {
    let sequence = 0
    const call = () => {
      sequence++
      Atomics.store(cells, request, sequence)
      Atomics.notify(cells, request)
      whenChanged(cells, reply, sequence - 1, () => {
        if (next()) setImmediate(call)
      })
    }
    call()
  }
}

if (!isMainThread && (workerData as FloorData | undefined)?.cells !== undefined) pingPong(workerData as FloorData)
