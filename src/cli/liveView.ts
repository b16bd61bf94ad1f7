/**
 * The command's live view: the sampler of `LiveSampler` over what this
 * process serves (its threads, its request memory, the counters `/metrics`
 * exports), and with a Redis state the instances' directory on the same
 * Redis. The gRPC port binds after the view starts, so what only it knows is
 * read through `ServedPort`, which it fills in.
 *
 * @since 0.1.0
 */
import { hostname } from "node:os"
import type { Scope } from "effect"
import { Effect, Layer } from "effect"
import type { ThreadRow } from "../adapters/http/live/LiveSample.ts"
import * as LiveSampler from "../adapters/http/live/LiveSampler.ts"
import { LiveView } from "../adapters/http/live/LiveView.ts"
import type { ClusterState } from "../core/server/ClusterState.ts"
import type { InstanceDirectory } from "../ports/InstanceDirectory.ts"
import type { ServiceConfig } from "./ServiceConfig.ts"
import { serviceVersion } from "./version.ts"

/**
 * What the gRPC port tells the live view once it serves.
 *
 * @category models
 * @since 0.1.0
 */
export interface ServedPort {
  port: number
  threads: (watches: number) => ReadonlyArray<ThreadRow>
  requestMemory: () => { readonly bytes: number; readonly budget: number } | undefined
  refreshMetrics: Effect.Effect<void>
}

/**
 * A port that serves nothing yet.
 *
 * @category constructors
 * @since 0.1.0
 */
export const notServing = (): ServedPort => ({
  port: 0,
  threads: () => [],
  requestMemory: () => undefined,
  refreshMetrics: Effect.void
})

/**
 * The name this instance goes by: the one the Redis backend gives the
 * changes it applies.
 *
 * @category models
 * @since 0.1.0
 */
export const instanceName = (): string => `${hostname()}/${process.pid}`

/** Where other instances' operators reach this one: the listen host when it is one, else this host's name. */
const announcedAddress = (addr: string, port: number): string => {
  const colon = addr.lastIndexOf(":")
  const host = colon === -1 ? "" : addr.slice(0, colon)
  const named = host === "" || host === "0.0.0.0" || host === "[::]" ? hostname() : host
  return `${named}:${port}`
}

const directoryOf = (
  config: ServiceConfig
): Effect.Effect<InstanceDirectory["Service"] | undefined, never, Scope.Scope> => {
  const state = config.state
  if (state._tag === "Memory") return Effect.succeed(undefined)
  return Effect.flatMap(
    Effect.promise(() => import("../adapters/redis/RedisInstanceDirectory.ts")),
    (directory) =>
      directory.make({
        url: state.url,
        cluster: state.cluster,
        password: state.password,
        keyPrefix: state.keyPrefix
      })
  )
}

/**
 * The live view of the command, sampling from the start.
 *
 * @category layers
 * @since 0.1.0
 */
export const layer = (config: ServiceConfig, served: ServedPort): Layer.Layer<LiveView, never, ClusterState> =>
  Layer.effect(
    LiveView,
    Effect.gen(function* () {
      const directory = yield* directoryOf(config)
      return yield* LiveSampler.make({
        self: {
          name: instanceName(),
          version: serviceVersion,
          startedAt: Date.now(),
          state: config.state._tag === "Memory" ? "memory" : "redis"
        },
        address: () => announcedAddress(config.addr, served.port),
        threads: (watches) => served.threads(watches),
        requestMemory: () => served.requestMemory(),
        refreshMetrics: Effect.suspend(() => served.refreshMetrics),
        directory
      })
    })
  )
