/**
 * The snapshot file format of the original service (`state.binpb`), encoded
 * and decoded by hand: the protobuf encoding of a `StateSnapshot`, one
 * `0A len ClusterSnapshot` record per cluster (PROTOCOL.md §1.4, §1.5).
 *
 * Writing is byte-exact with the original: fields in ascending order, defaults
 * left out, TTLs as whole seconds truncated toward zero, never the legacy
 * expiration. Reading takes every complete, well-formed record and reports
 * precisely what it had to skip, instead of failing the whole load: truncated
 * or malformed records, records over {@link maxClusterSize}, duplicate cluster
 * IDs and unknown top-level fields. Pure functions over bytes, no I/O.
 *
 * This module holds the format's models and its public API; the encoder is
 * in `snapshotEncoding.ts`, the decoder (whole or piece by piece) in
 * `snapshotDecoding.ts`, and the limits they share in `snapshotFormat.ts`.
 *
 * @since 0.1.0
 */
import type { Affiliate } from "./Affiliate.ts"

export { type DecodeOptions, decode, SnapshotDecoder } from "./snapshotDecoding.ts"
export { defaultPieceBytes, encode, encodePieces, encodeTo } from "./snapshotEncoding.ts"
export { maxClusterSize } from "./snapshotFormat.ts"

/**
 * One endpoint as the encoder reads it and the decoder returns it. Times are
 * milliseconds since the epoch.
 *
 * @category models
 * @since 0.1.0
 */
export interface EndpointEntry {
  readonly data: Uint8Array
  readonly expiresAt: number
}

/**
 * One affiliate as the encoder reads it and the decoder returns it.
 *
 * @category models
 * @since 0.1.0
 */
export interface AffiliateEntry {
  readonly id: string
  readonly data: Uint8Array
  readonly expiresAt: number
  readonly endpoints: ReadonlyArray<EndpointEntry>
}

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
