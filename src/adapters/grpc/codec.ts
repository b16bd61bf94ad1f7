/**
 * Conversions between the `ClusterApi` port models and the generated messages
 * of `sidero.discovery.server`: TTLs as Go converts them, request decoding that
 * turns IDs that are not valid UTF-8 into InvalidArgument (quirk Q20; the Go
 * server takes them as raw bytes), and watch events encoded as WatchResponse
 * bytes, with big snapshots split to fit a byte budget. protobuf-es 2.17
 * rejects invalid UTF-8 in proto3 strings, so the raw bytes are scanned only
 * when decoding fails.
 *
 * @since 0.1.0
 */
import { isUtf8 } from "node:buffer"
import type { DescMessage, MessageInitShape, MessageShape } from "@bufbuild/protobuf"
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire"
import type { Duration as ProtoDuration } from "@bufbuild/protobuf/wkt"
import { DurationSchema } from "@bufbuild/protobuf/wkt"
import { Duration, Option, Result } from "effect"
import type {
  Affiliate as ProtoAffiliate,
  AffiliateDeleteRequest as ProtoAffiliateDeleteRequest,
  AffiliateUpdateRequest as ProtoAffiliateUpdateRequest,
  HelloRequest as ProtoHelloRequest,
  HelloResponse as ProtoHelloResponse,
  ListRequest as ProtoListRequest,
  ListResponse as ProtoListResponse,
  WatchRequest as ProtoWatchRequest,
  WatchResponse as ProtoWatchResponse
} from "../../gen/discovery/server/cluster_pb.ts"
import {
  AffiliateDeleteRequestSchema,
  AffiliateSchema,
  AffiliateUpdateRequestSchema,
  HelloRequestSchema,
  HelloResponseSchema,
  ListRequestSchema,
  ListResponseSchema,
  WatchRequestSchema,
  WatchResponseSchema
} from "../../gen/discovery/server/cluster_pb.ts"
import type {
  AffiliateDeleteRequest,
  AffiliateUpdateRequest,
  AffiliateView,
  ClusterRequest,
  HelloRequest,
  HelloResponse,
  WatchDelta,
  WatchEvent,
  WatchRequest
} from "../../ports/ClusterApi.ts"
import { Limits } from "../../core/server/limits.ts"
import { fieldSize } from "../../core/wire/wireWriter.ts"
import { InvalidArgument } from "../../ports/DiscoveryError.ts"

const int64Max = (1n << 63n) - 1n
const int64Min = -(1n << 63n)
const nanosPerSecond = 1_000_000_000n

/**
 * Converts a protobuf Duration to an Effect Duration the way Go's
 * `durationpb.AsDuration` does: `seconds * 1e9 + nanos` nanoseconds, saturating
 * at the int64 bounds (2^63−1 and −2^63) on overflow; a missing TTL is zero.
 *
 * @category codecs
 * @since 0.1.0
 */
export const ttlFromProto = (ttl: ProtoDuration | undefined): Duration.Duration => {
  if (ttl === undefined) return Duration.zero
  const scaled = ttl.seconds * nanosPerSecond
  const total = scaled + BigInt(ttl.nanos)
  const overflow = scaled > int64Max || scaled < int64Min || total > int64Max || total < int64Min
  if (!overflow) return Duration.nanos(total)
  return Duration.nanos(ttl.seconds < 0n ? int64Min : int64Max)
}

/**
 * Converts an Effect Duration to a protobuf Duration as Go's `durationpb.New`
 * does: whole seconds truncated toward zero and the remainder, with the same
 * sign, in nanos. Values beyond the int64 nanosecond range (infinite ones
 * included) saturate.
 *
 * @category codecs
 * @since 0.1.0
 */
export const ttlToProto = (ttl: Duration.Duration): ProtoDuration => {
  const exact = Option.getOrElse(Duration.toNanos(ttl), () => (Duration.toMillis(ttl) < 0 ? int64Min : int64Max))
  const total = exact > int64Max ? int64Max : exact < int64Min ? int64Min : exact
  return create(DurationSchema, {
    seconds: total / nanosPerSecond,
    nanos: Number(total % nanosPerSecond)
  })
}

/**
 * A request as the server decoded it from the wire: the message, or the
 * InvalidArgument to answer with before the `ClusterApi` is called.
 *
 * @category models
 * @since 0.1.0
 */
export type DecodedRequest<A> = Result.Result<A, InvalidArgument>

/** The bytes of the last occurrence of a length-delimited top-level field (proto3: the last one wins). */
const rawField = (bytes: Uint8Array, fieldNo: number): Uint8Array | undefined => {
  const reader = new BinaryReader(bytes)
  let found: Uint8Array | undefined
  while (reader.pos < reader.len) {
    const [no, wireType] = reader.tag()
    if (no === fieldNo && wireType === WireType.LengthDelimited) found = reader.bytes()
    else reader.skip(wireType, no)
  }
  return found
}

const fieldIsUtf8 = (bytes: Uint8Array, fieldNo: number): boolean => {
  const raw = rawField(bytes, fieldNo)
  return raw === undefined || isUtf8(raw)
}

const lossyDecoder = new TextDecoder("utf-8", { ignoreBOM: true })

const withLossyStrings = (bytes: Uint8Array, fieldNos: ReadonlyArray<number>): Uint8Array => {
  const reader = new BinaryReader(bytes)
  const writer = new BinaryWriter()
  while (reader.pos < reader.len) {
    const start = reader.pos
    const [no, wireType] = reader.tag()
    if (fieldNos.includes(no) && wireType === WireType.LengthDelimited) {
      writer.tag(no, wireType).string(lossyDecoder.decode(reader.bytes()))
    } else {
      reader.skip(wireType, no)
      writer.raw(bytes.subarray(start, reader.pos))
    }
  }
  return writer.finish()
}

type IdField = readonly [fieldNo: number, name: string, max: number]

/**
 * The answer for an ID that failed to decode, checked in the order of
 * PROTOCOL.md §2.3 on the raw bytes (empty, too long), then for UTF-8, so a
 * bad ID gets the same message over gRPC as in process.
 */
const idProblem = (bytes: Uint8Array, [fieldNo, name, max]: IdField): string | undefined => {
  const raw = rawField(bytes, fieldNo)
  if (raw === undefined || raw.length === 0) return `${name} can't be empty`
  if (raw.length > max) return `${name} is too long`
  if (!isUtf8(raw)) return `${name} is not valid UTF-8`
  return undefined
}

const decodeChecked = <Desc extends DescMessage>(
  schema: Desc,
  bytes: Uint8Array,
  ids: ReadonlyArray<IdField>,
  lossy: ReadonlyArray<number> = []
): DecodedRequest<MessageShape<Desc>> => {
  try {
    return Result.succeed(fromBinary(schema, bytes))
  } catch (error) {
    if (ids.some(([fieldNo]) => !fieldIsUtf8(bytes, fieldNo))) {
      for (const id of ids) {
        const problem = idProblem(bytes, id)
        if (problem !== undefined) return Result.fail(new InvalidArgument({ message: problem }))
      }
    }
    if (lossy.some((fieldNo) => !fieldIsUtf8(bytes, fieldNo))) {
      return Result.succeed(fromBinary(schema, withLossyStrings(bytes, lossy)))
    }
    throw error
  }
}

const clusterId: IdField = [1, "cluster ID", Limits.clusterIdMax]
const affiliateId: IdField = [2, "affiliate ID", Limits.affiliateIdMax]

/**
 * Decodes a HelloRequest. A cluster ID that is not valid UTF-8 is rejected;
 * an invalid client version, which the original never checks, is read with
 * U+FFFD replacements.
 *
 * @category codecs
 * @since 0.1.0
 */
export const decodeHelloRequest = (bytes: Uint8Array): DecodedRequest<ProtoHelloRequest> =>
  decodeChecked(HelloRequestSchema, bytes, [clusterId], [2])

/**
 * Decodes an AffiliateUpdateRequest, rejecting a cluster or affiliate ID that
 * is not valid UTF-8 (the cluster ID is checked first).
 *
 * @category codecs
 * @since 0.1.0
 */
export const decodeAffiliateUpdateRequest = (bytes: Uint8Array): DecodedRequest<ProtoAffiliateUpdateRequest> =>
  decodeChecked(AffiliateUpdateRequestSchema, bytes, [clusterId, affiliateId])

/**
 * Decodes an AffiliateDeleteRequest, rejecting a cluster or affiliate ID that
 * is not valid UTF-8 (the cluster ID is checked first).
 *
 * @category codecs
 * @since 0.1.0
 */
export const decodeAffiliateDeleteRequest = (bytes: Uint8Array): DecodedRequest<ProtoAffiliateDeleteRequest> =>
  decodeChecked(AffiliateDeleteRequestSchema, bytes, [clusterId, affiliateId])

/**
 * Decodes a ListRequest, rejecting a cluster ID that is not valid UTF-8.
 *
 * @category codecs
 * @since 0.1.0
 */
export const decodeListRequest = (bytes: Uint8Array): DecodedRequest<ProtoListRequest> =>
  decodeChecked(ListRequestSchema, bytes, [clusterId])

/**
 * Decodes a WatchRequest, rejecting a cluster ID that is not valid UTF-8.
 *
 * @category codecs
 * @since 0.1.0
 */
export const decodeWatchRequest = (bytes: Uint8Array): DecodedRequest<ProtoWatchRequest> =>
  decodeChecked(WatchRequestSchema, bytes, [clusterId])

/**
 * Builds the port's HelloRequest from the message and the caller's address as
 * the transport saw it.
 *
 * @category codecs
 * @since 0.1.0
 */
export const helloRequestFromProto = (
  message: ProtoHelloRequest,
  clientAddress: Uint8Array | undefined
): HelloRequest => ({
  clusterId: message.clusterId,
  clientVersion: message.clientVersion,
  clientAddress
})

/**
 * Builds the HelloRequest message; the client address is not on the wire.
 *
 * @category codecs
 * @since 0.1.0
 */
export const helloRequestToProto = (request: HelloRequest): ProtoHelloRequest =>
  create(HelloRequestSchema, { clusterId: request.clusterId, clientVersion: request.clientVersion })

/**
 * Builds the HelloResponse message: a redirect only when there is an endpoint,
 * and `client_ip` only when an address is reported.
 *
 * @category codecs
 * @since 0.1.0
 */
export const helloResponseToProto = (response: HelloResponse): ProtoHelloResponse => {
  const init: MessageInitShape<typeof HelloResponseSchema> = {}
  if (response.redirect !== undefined && response.redirect !== "") init.redirect = { endpoint: response.redirect }
  if (response.clientIp !== undefined) init.clientIp = response.clientIp
  return create(HelloResponseSchema, init)
}

/**
 * Reads a HelloResponse message: an empty redirect endpoint or client IP means
 * none, as in the Go client.
 *
 * @category codecs
 * @since 0.1.0
 */
export const helloResponseFromProto = (message: ProtoHelloResponse): HelloResponse => {
  const endpoint = message.redirect?.endpoint
  return {
    redirect: endpoint === undefined || endpoint === "" ? undefined : endpoint,
    clientIp: message.clientIp.length > 0 ? message.clientIp : undefined
  }
}

/**
 * Builds the port's AffiliateUpdateRequest; absent data stays absent and the
 * TTL goes through `ttlFromProto`. The caller's address explains the change.
 *
 * @category codecs
 * @since 0.1.0
 */
export const affiliateUpdateRequestFromProto = (
  message: ProtoAffiliateUpdateRequest,
  clientAddress?: Uint8Array | undefined
): AffiliateUpdateRequest => ({
  clusterId: message.clusterId,
  affiliateId: message.affiliateId,
  data: message.affiliateData,
  endpoints: message.affiliateEndpoints,
  ttl: ttlFromProto(message.ttl),
  clientAddress
})

/**
 * Builds the AffiliateUpdateRequest message; data is sent only when present,
 * and the TTL is always sent.
 *
 * @category codecs
 * @since 0.1.0
 */
export const affiliateUpdateRequestToProto = (request: AffiliateUpdateRequest): ProtoAffiliateUpdateRequest => {
  const init: MessageInitShape<typeof AffiliateUpdateRequestSchema> = {
    clusterId: request.clusterId,
    affiliateId: request.affiliateId,
    affiliateEndpoints: [...request.endpoints],
    ttl: ttlToProto(request.ttl)
  }
  if (request.data !== undefined) init.affiliateData = request.data
  return create(AffiliateUpdateRequestSchema, init)
}

/**
 * Builds the port's AffiliateDeleteRequest.
 *
 * @category codecs
 * @since 0.1.0
 */
export const affiliateDeleteRequestFromProto = (
  message: ProtoAffiliateDeleteRequest,
  clientAddress?: Uint8Array | undefined
): AffiliateDeleteRequest => ({
  clusterId: message.clusterId,
  affiliateId: message.affiliateId,
  clientAddress
})

/**
 * Builds the AffiliateDeleteRequest message.
 *
 * @category codecs
 * @since 0.1.0
 */
export const affiliateDeleteRequestToProto = (request: AffiliateDeleteRequest): ProtoAffiliateDeleteRequest =>
  create(AffiliateDeleteRequestSchema, { clusterId: request.clusterId, affiliateId: request.affiliateId })

/**
 * Builds the port's ClusterRequest from a List request message.
 *
 * @category codecs
 * @since 0.1.0
 */
export const clusterRequestFromProto = (message: ProtoListRequest): ClusterRequest => ({
  clusterId: message.clusterId
})

/**
 * Builds the port's WatchRequest from its message: a resume point when the
 * client sent an epoch.
 *
 * @category codecs
 * @since 0.1.0
 */
export const watchRequestFromProto = (message: ProtoWatchRequest): WatchRequest =>
  message.resumeEpoch === ""
    ? { clusterId: message.clusterId }
    : {
        clusterId: message.clusterId,
        resume: { epoch: message.resumeEpoch, revision: revisionOf(message.resumeRevision) }
      }

/** A revision off the wire; one past what a number holds exactly can be no revision of ours, so it reads as -1. */
const revisionOf = (value: bigint): number => (value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : -1)

/**
 * Builds the ListRequest message.
 *
 * @category codecs
 * @since 0.1.0
 */
export const listRequestToProto = (request: ClusterRequest): ProtoListRequest =>
  create(ListRequestSchema, { clusterId: request.clusterId })

/**
 * Builds the WatchRequest message.
 *
 * @category codecs
 * @since 0.1.0
 */
export const watchRequestToProto = (request: WatchRequest): ProtoWatchRequest =>
  create(WatchRequestSchema, {
    clusterId: request.clusterId,
    resumeEpoch: request.resume?.epoch ?? "",
    resumeRevision: BigInt(request.resume?.revision ?? 0),
    withRevisions: true
  })

/**
 * Whether the client of a WatchRequest reads epochs and revisions (it asked
 * for them, or to resume); others get the original's messages, byte for byte.
 *
 * @category codecs
 * @since 0.1.0
 */
export const wantsRevisions = (message: ProtoWatchRequest): boolean =>
  message.withRevisions || message.resumeEpoch !== ""

/**
 * Builds the Affiliate message of an affiliate view.
 *
 * @category codecs
 * @since 0.1.0
 */
export const affiliateToProto = (affiliate: AffiliateView): ProtoAffiliate =>
  create(AffiliateSchema, { id: affiliate.id, data: affiliate.data, endpoints: [...affiliate.endpoints] })

/**
 * Reads an Affiliate message as an affiliate view.
 *
 * @category codecs
 * @since 0.1.0
 */
export const affiliateFromProto = (message: ProtoAffiliate): AffiliateView => ({
  id: message.id,
  data: message.data,
  endpoints: message.endpoints
})

/**
 * Builds the ListResponse message.
 *
 * @category codecs
 * @since 0.1.0
 */
export const listResponseToProto = (affiliates: ReadonlyArray<AffiliateView>): ProtoListResponse =>
  create(ListResponseSchema, { affiliates: affiliates.map(affiliateToProto) })

/**
 * Reads a ListResponse message.
 *
 * @category codecs
 * @since 0.1.0
 */
export const listResponseFromProto = (message: ProtoListResponse): ReadonlyArray<AffiliateView> =>
  message.affiliates.map(affiliateFromProto)

/**
 * Where a watch message stands in its cluster's revisions; absent for a
 * watch whose backend names no epoch (its messages then carry neither, as
 * the original's).
 *
 * @category models
 * @since 0.1.0
 */
export interface WatchPosition {
  readonly epoch: string
  readonly revision: number
}

/** Field numbers of the resumable-watch fields of WatchResponse (see cluster.proto). */
const epochField = 1001
const revisionField = 1002
const snapshotField = 1003
const moreField = 1005

/**
 * Encodes a snapshot as WatchResponse messages of at most `budget` bytes each
 * (a single affiliate larger than the budget still gets a message of its own).
 * There is always at least one message, empty for an empty snapshot; the
 * others carry the rest of the affiliates with `deleted=false`, which a Go
 * client merges into the snapshot it got first. With a position, each
 * message carries it and says it is a snapshot, and all but the last say
 * that more follow.
 *
 * @category codecs
 * @since 0.1.0
 */
export const encodeSnapshot = (
  affiliates: ReadonlyArray<AffiliateView>,
  budget: number,
  position?: WatchPosition
): Array<Uint8Array> => {
  const messages: Array<Uint8Array> = []
  const finish = (writer: BinaryWriter, last: boolean) => {
    if (position !== undefined) {
      writer.tag(epochField, WireType.LengthDelimited).string(position.epoch)
      if (position.revision !== 0) writer.tag(revisionField, WireType.Varint).uint64(position.revision)
      writer.tag(snapshotField, WireType.Varint).bool(true)
      if (!last) writer.tag(moreField, WireType.Varint).bool(true)
    }
    messages.push(writer.finish())
  }
  let writer = new BinaryWriter()
  let size = 0
  for (const affiliate of affiliates) {
    const bytes = toBinary(AffiliateSchema, affiliateToProto(affiliate))
    const entrySize = fieldSize(bytes.length)
    if (size > 0 && size + entrySize > budget) {
      finish(writer, false)
      writer = new BinaryWriter()
      size = 0
    }
    writer.tag(1, WireType.LengthDelimited).bytes(bytes)
    size += entrySize
  }
  finish(writer, true)
  return messages
}

/**
 * Encodes a delta as one WatchResponse: the full affiliate for Updated, the ID
 * alone with `deleted=true` for Deleted; with the watch's epoch, also that
 * and the delta's revision.
 *
 * @category codecs
 * @since 0.1.0
 */
export const encodeDelta = (event: WatchDelta, epoch?: string): Uint8Array =>
  toBinary(
    WatchResponseSchema,
    event._tag === "Updated"
      ? create(WatchResponseSchema, {
          affiliates: [affiliateToProto(event.affiliate)],
          epoch: epoch ?? "",
          revision: epoch === undefined ? 0n : BigInt(event.revision)
        })
      : create(WatchResponseSchema, {
          affiliates: [{ id: event.affiliateId }],
          deleted: true,
          epoch: epoch ?? "",
          revision: epoch === undefined ? 0n : BigInt(event.revision)
        })
  )

/**
 * Encodes the first message of a resumed watch: the revision it resumes
 * after, in its epoch; the changes since follow as deltas.
 *
 * @category codecs
 * @since 0.1.0
 */
export const encodeResumed = (position: WatchPosition): Uint8Array =>
  toBinary(
    WatchResponseSchema,
    create(WatchResponseSchema, { epoch: position.epoch, revision: BigInt(position.revision), resumed: true })
  )

/**
 * Encodes any watch event as the WatchResponse messages that carry it; a
 * snapshot's epoch goes on its messages, `epoch` on a delta's.
 *
 * @category codecs
 * @since 0.1.0
 */
export const encodeWatchEvent = (event: WatchEvent, snapshotBudget: number, epoch?: string): Array<Uint8Array> => {
  switch (event._tag) {
    case "Snapshot":
      return encodeSnapshot(
        event.affiliates,
        snapshotBudget,
        event.epoch === undefined ? undefined : { epoch: event.epoch, revision: event.revision }
      )
    case "Resumed":
      return [encodeResumed(event)]
    default:
      return [encodeDelta(event, epoch)]
  }
}

/**
 * Reads one WatchResponse as watch events. A message with an epoch carries
 * its own revision and says whether it is a snapshot or a resumed start;
 * one without (from the original server) is read as the original's client
 * reads it, numbered from `revision` on: the first message of a watch is the
 * snapshot (deleted entries leave it empty, as in the Go client), and each
 * later one gives one Updated or Deleted per affiliate. The later parts of a
 * snapshot split over several messages come as Updated events at the
 * snapshot's revision.
 *
 * @category codecs
 * @since 0.1.0
 */
export const watchResponseToEvents = (
  message: ProtoWatchResponse,
  first: boolean,
  revision: number
): Array<WatchEvent> => {
  const epoch = message.epoch === "" ? undefined : message.epoch
  const own = epoch === undefined ? undefined : revisionOf(message.revision)
  if (epoch !== undefined && message.resumed) return [{ _tag: "Resumed", revision: own!, epoch }]
  if (first) {
    const affiliates = message.deleted ? [] : message.affiliates.map(affiliateFromProto)
    return [
      epoch === undefined
        ? { _tag: "Snapshot", revision, affiliates }
        : { _tag: "Snapshot", revision: own!, affiliates, epoch }
    ]
  }
  return message.affiliates.map(
    (affiliate, index): WatchEvent =>
      message.deleted
        ? { _tag: "Deleted", revision: own ?? revision + index, affiliateId: affiliate.id }
        : { _tag: "Updated", revision: own ?? revision + index, affiliate: affiliateFromProto(affiliate) }
  )
}

/**
 * Reads the WatchResponse messages of one watch as watch events, in order:
 * `watchResponseToEvents` for each, except that a snapshot the server split
 * over several messages (each saying `more` but the last) comes as one
 * Snapshot event once its last part is in, so a client never takes a
 * snapshot's revision as its resume point before it has the whole snapshot.
 *
 * @category codecs
 * @since 0.1.0
 */
export class WatchResponseReader {
  private first = true
  private revision = 0
  private parts: Array<AffiliateView> | undefined

  /** The events `message` completes (none while a snapshot's parts are still coming). */
  read(message: ProtoWatchResponse): Array<WatchEvent> {
    if (message.epoch !== "" && message.snapshot && (message.more || this.parts !== undefined)) {
      const parts = this.parts ?? []
      for (const affiliate of message.affiliates) parts.push(affiliateFromProto(affiliate))
      this.parts = message.more ? parts : undefined
      if (message.more) return []
      this.first = false
      return [{ _tag: "Snapshot", revision: revisionOf(message.revision), affiliates: parts, epoch: message.epoch }]
    }
    const events = watchResponseToEvents(message, this.first, this.revision)
    this.first = false
    this.revision += events.length
    return events
  }
}
