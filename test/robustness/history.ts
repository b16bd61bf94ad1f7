/**
 * The history of a robustness run: every call a client made with its start,
 * end and result, every watch message, every fault injected and healed, and
 * what the run read off the servers (probes, gauges, the final lists). Each
 * client writes its records as JSON lines to a file of its own; the
 * validators read them all, merged by time. Times are milliseconds since the
 * run started, on the harness's monotonic clock. Payloads are recorded as
 * digests (equal bytes, equal digest), so a history stays small and carries
 * no secret.
 */
import { createHash } from "node:crypto"

/** Milliseconds since the run started (monotonic, the harness's clock). */
export type Time = number

/** An affiliate as a List or a watch message showed it: its ID and digests of its data and endpoints. */
export interface AffiliateRecord {
  readonly id: string
  /** Digest of the data ("" for empty data). */
  readonly data: string
  /** Digests of the endpoint blobs, in the order the server sent them. */
  readonly endpoints: ReadonlyArray<string>
}

/**
 * How a call ended. `failed`: the server said it changed nothing (a limit, a
 * bad argument); `unknown`: it may or may not have been applied (deadline,
 * connection lost, backend unavailable).
 */
export type Outcome = "ok" | "failed" | "unknown"

/** The run's settings, written first: what the validators judge the history against. */
export interface RunRecord {
  readonly type: "run"
  readonly scenario: string
  readonly seed: number
  readonly backend: "memory" | "redis" | "redis-cluster"
  readonly instances: ReadonlyArray<string>
  /** Caps every instance ran with; clusters are global, watches per instance. */
  readonly caps: { readonly maxClusters: number; readonly maxWatches: number }
  /** Clusters beyond the cap that the backend may hold at a moment (Redis Cluster, empty watched clusters of other instances). */
  readonly clusterCapTolerance: number
  /** false when no acknowledged update may be lost at all (AOF `always`, no fault that loses writes). */
  readonly lossAllowed: boolean
  /** Largest offset of an instance's clock from the harness's, in milliseconds (faketime). */
  readonly clockSkewMillis: number
  readonly bounds: {
    /** After quiescence, watchers' views equal List on every instance within this. */
    readonly convergeMillis: number
    /** After a fault heals, every instance answers and is ready within this. */
    readonly aliveMillis: number
    /** A change observed by any watcher reaches every other open watcher of its epoch within this (or that watch ends). */
    readonly deliveryMillis: number
  }
  readonly startedAt: string
}

/** An AffiliateUpdate, AffiliateDelete or List call. */
export interface CallRecord {
  readonly type: "call"
  readonly client: string
  readonly instance: string
  readonly op: "update" | "delete" | "list"
  readonly cluster: string
  readonly affiliate?: string
  /** update: digest of the data sent ("" when none). */
  readonly data?: string
  /** update: digests of the endpoints sent. */
  readonly endpoints?: ReadonlyArray<string>
  /** update: the TTL asked for. */
  readonly ttlMillis?: number
  readonly start: Time
  readonly end: Time
  readonly outcome: Outcome
  readonly code?: number
  readonly message?: string
  /** list: what it returned. */
  readonly affiliates?: ReadonlyArray<AffiliateRecord>
}

/** A Watch call opened. `watcher` names the logical watcher, which may open many watches (reconnects). */
export interface WatchOpenRecord {
  readonly type: "watch-open"
  readonly watch: string
  readonly watcher: string
  readonly instance: string
  readonly cluster: string
  /** The resume point it asked for, if any. */
  readonly resume?: { readonly epoch: string; readonly revision: number }
  /** false for a watcher that stops reading for a while (the cut-off path). */
  readonly reads: boolean
  readonly start: Time
}

/** One WatchResponse as it arrived (the fields of a watch with revisions). */
export interface WatchMessageRecord {
  readonly type: "watch-msg"
  readonly watch: string
  readonly at: Time
  readonly epoch: string
  readonly revision: number
  readonly snapshot: boolean
  readonly resumed: boolean
  readonly more: boolean
  readonly deleted: boolean
  readonly affiliates: ReadonlyArray<AffiliateRecord>
}

/** A watch ended: closed by its client, or by the server (or the connection) with a status. */
export interface WatchEndRecord {
  readonly type: "watch-end"
  readonly watch: string
  readonly at: Time
  readonly by: "client" | "server"
  readonly code?: number
  readonly message?: string
}

/** A fault injected or healed. */
export interface FaultRecord {
  readonly type: "fault"
  readonly name: string
  readonly phase: "inject" | "heal"
  readonly at: Time
  /** What it hit: an instance, a Redis node, a proxy. */
  readonly target?: string
  readonly detail?: string
}

/** A probe of one instance: `/readyz` status (null: no answer) and whether a List call answered. */
export interface ProbeRecord {
  readonly type: "probe"
  readonly instance: string
  readonly at: Time
  readonly readyz: number | null
  readonly answered: boolean
}

/** The state gauges one instance's `/metrics` showed. */
export interface GaugeRecord {
  readonly type: "gauges"
  readonly instance: string
  readonly at: Time
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
  readonly watches: number
}

/** A Go discovery-client node's view of its cluster (affiliate IDs, itself left out). */
export interface NodeViewRecord {
  readonly type: "node-view"
  readonly node: string
  readonly affiliate: string
  readonly cluster: string
  readonly at: Time
  readonly affiliates: ReadonlyArray<string>
}

/**
 * A checkpoint begins: the writers are paused (typically after a fault
 * healed) and every fault is healed; from here the state must settle within
 * `convergeMillis`, and the checkpoint's `final` record follows. A run has one
 * per checkpoint; after the final record the traffic resumes, and the last
 * quiesce/final pair is the end of the run.
 */
export interface QuiesceRecord {
  readonly type: "quiesce"
  readonly at: Time
}

/**
 * A checkpoint's reading, once the run settled after its quiesce record (or
 * gave up waiting): what every instance listed for every cluster. A
 * `node-view` of each Go node is recorded just before it and a `gauges`
 * record of each instance just after it; then the traffic resumes. Lists,
 * views and gauges are compared only here; the last final record is the end
 * of the run.
 */
export interface FinalRecord {
  readonly type: "final"
  readonly at: Time
  /** instance → cluster → affiliates. */
  readonly lists: Readonly<Record<string, Readonly<Record<string, ReadonlyArray<AffiliateRecord>>>>>
}

/**
 * One line of a history file.
 */
export type HistoryRecord =
  | RunRecord
  | CallRecord
  | WatchOpenRecord
  | WatchMessageRecord
  | WatchEndRecord
  | FaultRecord
  | ProbeRecord
  | GaugeRecord
  | NodeViewRecord
  | QuiesceRecord
  | FinalRecord

/** A broken rule: which validator found it, what it says, and the records that show it. */
export interface Violation {
  readonly validator: string
  readonly message: string
  readonly at?: Time
  readonly records?: ReadonlyArray<HistoryRecord>
}

/** The digest a history records for a payload: 12 hex digits of its SHA-256, "" for no bytes. */
export const digest = (bytes: Uint8Array): string =>
  bytes.length === 0 ? "" : createHash("sha256").update(bytes).digest("hex").slice(0, 12)

/** The time a record happened at (a call's end, a watch's start). */
export const timeOf = (record: HistoryRecord): Time => {
  switch (record.type) {
    case "run":
      return 0
    case "call":
      return record.end
    case "watch-open":
      return record.start
    default:
      return record.at
  }
}
