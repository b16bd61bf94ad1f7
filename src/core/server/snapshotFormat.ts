/**
 * What the snapshot encoder and decoder share (PROTOCOL.md §1.5, §2.2): the
 * format's limits, and the models they read and return.
 *
 * @since 0.1.0
 */
import type { Affiliate, AffiliateEntry } from "./Affiliate.ts"

/**
 * The largest ClusterSnapshot record accepted, in bytes: the exact size of a
 * cluster of 1024 affiliates, each with a 256-byte ID, 2048-byte data and 64
 * endpoints of 2048 bytes, with the largest TTLs.
 *
 * @category models
 * @since 0.1.0
 */
export const maxClusterSize = 137_912_579

/**
 * Go's largest `time.Duration` (2^63−1 ns) in whole seconds: TTLs written
 * saturate at ± this.
 *
 * @category models
 * @since 0.1.0
 */
export const maxDurationSeconds = 9_223_372_036

/**
 * Go's largest `time.Duration` in milliseconds: TTLs read saturate at ± this.
 *
 * @category models
 * @since 0.1.0
 */
export const maxDurationMillis = 9_223_372_036_854

/**
 * One cluster as the encoder reads it. The store's own clusters have this
 * shape, and their {@link Affiliate} values are encoded straight from their
 * compact form; other entries are copied into that form first.
 *
 * @category models
 * @since 0.1.0
 */
export interface ClusterEntry {
  readonly id: string
  readonly affiliates: ReadonlyMap<string, AffiliateEntry>
  /** When present, the affiliates are written from it, and `affiliates` is not read. */
  readonly packed?: PackedAffiliates | undefined
}

/**
 * A cluster's affiliates still in the bytes of the snapshot record they were
 * read from, as the decoder keeps them until first use: far fewer objects
 * than one {@link Affiliate} each, so a restart is ready sooner and holds
 * less memory. Nothing in it had expired when it was read, and no affiliate
 * ID repeats.
 *
 * @category models
 * @since 0.1.0
 */
export interface PackedAffiliates {
  /** How many affiliates `unpack` returns. */
  readonly affiliates: number
  /** How many endpoints they hold in all. */
  readonly endpoints: number
  /** The earliest expiry (ms since the epoch) of any affiliate or endpoint. */
  readonly earliestExpiry: number
  /** The record's bytes, one char per byte, which `spans` points into. */
  readonly record: string
  /**
   * Writes where each affiliate's parts are in `record`, in record order,
   * into `spans` from index 0, and returns how many numbers it wrote: per
   * affiliate `expiresAt, idStart, idEnd, dataStart, dataEnd, endpointCount`,
   * then `start, end, expiresAt` for each endpoint.
   */
  spans(spans: Array<number>): number
  /** The affiliates, newly built each call. */
  unpack(): Map<string, Affiliate>
}

/**
 * One cluster as the decoder returns it, ready for `ClusterStore.restore` to
 * take over: most clusters packed, the others with their affiliates already
 * in the store's compact form.
 *
 * @category models
 * @since 0.1.0
 */
export interface DecodedCluster extends ClusterEntry {
  /** Handed over: `ClusterStore.restore` makes it the cluster's own map (built on first read when packed). */
  readonly affiliates: Map<string, Affiliate>
  /**
   * The affiliates still in the record's bytes, when packing is on and the
   * record holds 1 to 64 affiliates with distinct IDs and nothing expired;
   * else `undefined`.
   */
  readonly packed: PackedAffiliates | undefined
}

/**
 * The encoded snapshot and what it holds.
 *
 * @category models
 * @since 0.1.0
 */
export interface EncodedSnapshot {
  readonly bytes: Uint8Array
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
  /** IDs of clusters left out because their record would exceed {@link maxClusterSize}. */
  readonly oversized: ReadonlyArray<string>
}

/**
 * A byte range of a snapshot that was not loaded, and why.
 *
 * @category models
 * @since 0.1.0
 */
export interface SkippedRange {
  readonly offset: number
  readonly length: number
  readonly reason: string
}

/**
 * What the decoder read: the clusters in file order, and the ranges it had to
 * skip (empty for an intact snapshot).
 *
 * @category models
 * @since 0.1.0
 */
export interface DecodedSnapshot {
  readonly clusters: ReadonlyArray<DecodedCluster>
  readonly skipped: ReadonlyArray<SkippedRange>
  readonly size: number
}

/**
 * What a snapshot holds, and its size in bytes.
 *
 * @category models
 * @since 0.1.0
 */
export interface SnapshotContents {
  readonly clusters: number
  readonly affiliates: number
  readonly endpoints: number
  /** IDs of clusters left out because their record would exceed {@link maxClusterSize}. */
  readonly oversized: ReadonlyArray<string>
  readonly size: number
}
