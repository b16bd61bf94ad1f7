/**
 * The robustness run's gRPC client: plain grpc-js calls to one instance with
 * the generated messages, so the history records exactly what crossed the
 * wire (every field of every watch message, the status of every call).
 * Unary calls carry a deadline; a watch asks for revisions, can stop reading
 * (HTTP/2 flow control then holds the server back) and be cancelled.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf"
import { DurationSchema } from "@bufbuild/protobuf/wkt"
import * as grpc from "@grpc/grpc-js"
import {
  type AffiliateUpdateRequest,
  AffiliateDeleteRequestSchema,
  AffiliateDeleteResponseSchema,
  AffiliateUpdateRequestSchema,
  AffiliateUpdateResponseSchema,
  ListRequestSchema,
  type ListResponse,
  ListResponseSchema,
  type WatchResponse,
  WatchRequestSchema,
  WatchResponseSchema
} from "../../../src/gen/discovery/server/cluster_pb.ts"

const service = "/sidero.discovery.server.Cluster"

/** How a call ended: its reply, or its gRPC status code and message. */
export type CallResult<A> =
  | { readonly ok: true; readonly value: A }
  | { readonly ok: false; readonly code: number; readonly message: string }

/** What an AffiliateUpdate sends. */
export interface UpdateCall {
  readonly clusterId: string
  readonly affiliateId: string
  readonly data: Uint8Array
  readonly endpoints: ReadonlyArray<Uint8Array>
  readonly ttlMillis: number
}

/** A watch in progress. */
export interface WatchCall {
  /** Stops reading: messages wait in the server's and the connection's buffers. */
  readonly pause: () => void
  /** Reads again. */
  readonly resume: () => void
  /** Ends the watch from the client's side. */
  readonly cancel: () => void
}

/** What a watch reports. */
export interface WatchHandlers {
  readonly message: (message: WatchResponse) => void
  /** The watch ended: by the server or the connection (a code), or cancelled by the client (code 1). */
  readonly end: (code: number, message: string) => void
}

const rawSerializer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)

/** A client of one instance. */
export class WireClient {
  readonly #client: grpc.Client
  readonly #deadlineMillis: number

  constructor(address: string, deadlineMillis: number) {
    this.#client = new grpc.Client(address, grpc.credentials.createInsecure(), {
      "grpc.keepalive_time_ms": 10_000,
      "grpc.keepalive_timeout_ms": 5_000,
      "grpc.initial_reconnect_backoff_ms": 100,
      "grpc.max_reconnect_backoff_ms": 1000,
      "grpc.enable_retries": 0
    })
    this.#deadlineMillis = deadlineMillis
  }

  #unary<A>(method: string, request: Uint8Array, decode: (bytes: Buffer) => A): Promise<CallResult<A>> {
    return new Promise((resolve) => {
      this.#client.makeUnaryRequest(
        `${service}/${method}`,
        rawSerializer,
        decode,
        request,
        new grpc.Metadata(),
        { deadline: Date.now() + this.#deadlineMillis },
        (error, value) =>
          resolve(
            error === null ? { ok: true, value: value as A } : { ok: false, code: error.code, message: error.details }
          )
      )
    })
  }

  /** AffiliateUpdate. */
  update(call: UpdateCall): Promise<CallResult<unknown>> {
    const request: AffiliateUpdateRequest = create(AffiliateUpdateRequestSchema, {
      clusterId: call.clusterId,
      affiliateId: call.affiliateId,
      affiliateData: call.data,
      affiliateEndpoints: [...call.endpoints],
      ttl: create(DurationSchema, {
        seconds: BigInt(Math.floor(call.ttlMillis / 1000)),
        nanos: (call.ttlMillis % 1000) * 1_000_000
      })
    })
    return this.#unary("AffiliateUpdate", toBinary(AffiliateUpdateRequestSchema, request), (bytes) =>
      fromBinary(AffiliateUpdateResponseSchema, bytes)
    )
  }

  /** AffiliateDelete. */
  delete(clusterId: string, affiliateId: string): Promise<CallResult<unknown>> {
    const request = create(AffiliateDeleteRequestSchema, { clusterId, affiliateId })
    return this.#unary("AffiliateDelete", toBinary(AffiliateDeleteRequestSchema, request), (bytes) =>
      fromBinary(AffiliateDeleteResponseSchema, bytes)
    )
  }

  /** List. */
  list(clusterId: string): Promise<CallResult<ListResponse>> {
    const request = create(ListRequestSchema, { clusterId })
    return this.#unary("List", toBinary(ListRequestSchema, request), (bytes) => fromBinary(ListResponseSchema, bytes))
  }

  /** Watch with revisions, from `resume` when given. */
  watch(
    clusterId: string,
    resume: { readonly epoch: string; readonly revision: number } | undefined,
    handlers: WatchHandlers
  ): WatchCall {
    const request = create(WatchRequestSchema, {
      clusterId,
      withRevisions: true,
      resumeEpoch: resume?.epoch ?? "",
      resumeRevision: BigInt(resume?.revision ?? 0)
    })
    const call = this.#client.makeServerStreamRequest(
      `${service}/Watch`,
      rawSerializer,
      (bytes: Buffer) => fromBinary(WatchResponseSchema, bytes),
      toBinary(WatchRequestSchema, request),
      new grpc.Metadata()
    )
    let ended = false
    const end = (code: number, message: string) => {
      if (ended) return
      ended = true
      handlers.end(code, message)
    }
    // the status comes as soon as the trailers do, before messages still waiting to be read: the
    // watch ends for its reader once they are read ('end')
    let status: grpc.StatusObject | undefined
    call.on("data", (message: WatchResponse) => {
      if (!ended) handlers.message(message)
    })
    call.on("status", (received: grpc.StatusObject) => {
      status ??= received
    })
    call.on("error", () => undefined)
    call.on("end", () =>
      setImmediate(() => end(status?.code ?? grpc.status.UNKNOWN, status?.details ?? "ended without a status"))
    )
    return {
      pause: () => call.pause(),
      resume: () => call.resume(),
      cancel: () => {
        end(grpc.status.CANCELLED, "cancelled by the client")
        call.cancel()
      }
    }
  }

  /** Closes the channel. */
  close(): void {
    this.#client.close()
  }
}
