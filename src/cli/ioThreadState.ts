/**
 * The cluster state as the landing site on an I/O thread's share of the
 * gRPC port sees it: `list` and `stats` are asked of the thread that holds
 * the state; the site needs nothing else, and anything else dies.
 *
 * @since 0.1.0
 */
import { Effect, Stream } from "effect"
import type { ThreadContext } from "./IoThread.ts"
import { ClusterState } from "../core/server/ClusterState.ts"
import type { ClusterApi } from "../ports/ClusterApi.ts"
import type { InvalidArgument, Unavailable } from "../ports/DiscoveryError.ts"

const elsewhere = (what: string) => new Error(`${what}: the state is held by the owner thread, not an I/O thread`)

/**
 * The owner's state for an I/O thread's landing site.
 *
 * @category constructors
 * @since 0.1.0
 */
export const remoteState = (thread: ThreadContext, api: ClusterApi["Service"]): ClusterState["Service"] =>
  ClusterState.of({
    list: (request) => api.list(request) as Effect.Effect<never, InvalidArgument | Unavailable>,
    stats: Effect.orDie(thread.stats),
    history: (request) => thread.history(request) as Effect.Effect<never, InvalidArgument | Unavailable>,
    available: () => true,
    update: () => Effect.die(elsewhere("update")),
    delete: () => Effect.die(elsewhere("delete")),
    watch: () => Stream.die(elsewhere("watch")),
    subscribe: () => Effect.die(elsewhere("subscribe")),
    collectGarbage: Effect.die(elsewhere("collectGarbage")),
    exportSnapshot: Effect.die(elsewhere("exportSnapshot")),
    snapshotPieces: Effect.die(elsewhere("snapshotPieces")),
    importSnapshot: () => Effect.die(elsewhere("importSnapshot")),
    importSnapshotFrom: () => Effect.die(elsewhere("importSnapshotFrom"))
  })
