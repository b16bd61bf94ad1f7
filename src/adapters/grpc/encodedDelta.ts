/**
 * A watch delta encoded once, in both of its forms: the WatchResponse with
 * its epoch and revision (fields 1001 and 1002, written last) and, as a
 * prefix of the same bytes, the original's message without them. The thread
 * that owns the state encodes each delta this way once and hands the bytes
 * to every I/O thread; a delta read back from them remembers its bytes, so
 * the Watch calls of that thread send them without encoding again.
 *
 * @since 0.1.0
 */
import { fromBinary } from "@bufbuild/protobuf"
import { WatchResponseSchema } from "../../gen/discovery/server/cluster_pb.ts"
import { varintSize } from "../../core/wire/wireWriter.ts"
import type { WatchDelta } from "../../ports/ClusterApi.ts"
import { affiliateFromProto, encodeDelta } from "./codec.ts"

/**
 * A delta's message with its position; `bytes.subarray(0, plainLength)` is
 * the original's message.
 *
 * @category models
 * @since 0.1.0
 */
export interface EncodedDelta {
  readonly bytes: Uint8Array
  readonly plainLength: number
}

/** Bytes of the tags of fields 1001 and 1002 (both above 2^11, below 2^14). */
const positionTagBytes = 2

/** What the epoch and revision fields add to a delta's message. */
const positionBytes = (epoch: string, revision: number): number =>
  positionTagBytes +
  varintSize(Buffer.byteLength(epoch)) +
  Buffer.byteLength(epoch) +
  positionTagBytes +
  varintSize(revision)

/**
 * Encodes `delta` once in both forms. It needs an epoch: the original's
 * form alone would lose the revision.
 *
 * @category codecs
 * @since 0.1.0
 */
export const encodeDeltaForms = (delta: WatchDelta, epoch: string): EncodedDelta => {
  const bytes = encodeDelta(delta, epoch)
  return { bytes, plainLength: bytes.length - positionBytes(epoch, delta.revision) }
}

const known = new WeakMap<WatchDelta, EncodedDelta>()

/**
 * Reads a delta of `encodeDeltaForms` back, and remembers its bytes for
 * `knownEncoding`.
 *
 * @category codecs
 * @since 0.1.0
 */
export const decodeDeltaForms = (encoded: EncodedDelta): WatchDelta => {
  const message = fromBinary(WatchResponseSchema, encoded.bytes)
  const affiliate = message.affiliates[0]!
  const revision = Number(message.revision)
  const delta: WatchDelta = message.deleted
    ? { _tag: "Deleted", revision, affiliateId: affiliate.id }
    : { _tag: "Updated", revision, affiliate: affiliateFromProto(affiliate) }
  known.set(delta, encoded)
  return delta
}

/**
 * The message of a delta read by `decodeDeltaForms`, in the form asked
 * (with `epoch`, or the original's when undefined), without encoding it
 * again; undefined for any other delta.
 *
 * @category codecs
 * @since 0.1.0
 */
export const knownEncoding = (delta: WatchDelta, epoch: string | undefined): Uint8Array | undefined => {
  const encoded = known.get(delta)
  if (encoded === undefined) return undefined
  return epoch === undefined ? encoded.bytes.subarray(0, encoded.plainLength) : encoded.bytes
}
