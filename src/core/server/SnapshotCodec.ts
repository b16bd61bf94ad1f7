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
 * This module is the format's public API. The encoder is `snapshotEncoding.ts`;
 * the decoder, whole or piece by piece, is `SnapshotDecoder.ts`, which reads
 * records with `ClusterReader.ts` and keeps them packed with `PackedRecord.ts`;
 * the limits and models they share are in `snapshotFormat.ts`, and the plain
 * entries of an affiliate in `Affiliate.ts`.
 *
 * @since 0.1.0
 */
export type { AffiliateEntry, EndpointEntry } from "./Affiliate.ts"
export { type DecodeOptions, decode, SnapshotDecoder } from "./SnapshotDecoder.ts"
export { defaultPieceBytes, encode, encodePieces, encodeTo } from "./snapshotEncoding.ts"
export {
  type ClusterEntry,
  type DecodedCluster,
  type DecodedSnapshot,
  type EncodedSnapshot,
  maxClusterSize,
  type PackedAffiliates,
  type SkippedRange,
  type SnapshotContents
} from "./snapshotFormat.ts"
