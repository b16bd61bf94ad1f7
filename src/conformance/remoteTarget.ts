/**
 * A server reached over gRPC as a conformance target: any discovery server
 * (ours, the original, a fork, a deployment behind a proxy), plaintext or
 * TLS. It is judged on the original protocol unless it announces our
 * extensions (a watch's snapshot carries an epoch, as only our server sends
 * to a client asking for revisions), or the caller says it has them.
 *
 * @since 0.1.0
 */
import * as grpc from "@grpc/grpc-js"
import { Effect, type Layer, Stream } from "effect"
import * as GrpcClient from "../adapters/grpc/GrpcClient.ts"
import { ClusterApi } from "../ports/ClusterApi.ts"
import { newClusterId } from "./fixtures.ts"
import type { ContractTarget } from "./Target.ts"

/**
 * Where the server is and how to reach it.
 *
 * @category models
 * @since 0.1.0
 */
export interface RemoteOptions {
  /** `host:port`. */
  readonly endpoint: string
  /** Plaintext (false, the default), TLS with the system roots (true), or TLS trusting this CA (PEM). */
  readonly tls?: boolean | { readonly ca: Uint8Array } | undefined
  /** Whether the server has our extensions; detected when absent. */
  readonly extensions?: boolean | undefined
  /** The longest a case may take, in milliseconds (default 60 s). */
  readonly caseTimeoutMillis?: number | undefined
  /**
   * How soon after a TTL passes the server has removed the affiliate, in
   * milliseconds (its GC interval and a margin); given, the real-time expiry
   * cases run.
   */
  readonly expiryWithinMillis?: number | undefined
}

const credentialsOf = (tls: RemoteOptions["tls"]): boolean | grpc.ChannelCredentials =>
  tls === undefined || tls === false ? false : tls === true ? true : grpc.credentials.createSsl(Buffer.from(tls.ca))

/**
 * The client layer of the server.
 *
 * @category constructors
 * @since 0.1.0
 */
export const clientLayer = (options: RemoteOptions): Layer.Layer<ClusterApi> =>
  GrpcClient.layer({ endpoint: options.endpoint, tls: credentialsOf(options.tls), callTimeout: "30 seconds" })

/**
 * Whether the server announces our extensions: the snapshot of a watch
 * (which asks for revisions) carries an epoch.
 *
 * @category constructors
 * @since 0.1.0
 */
export const announcesExtensions = (options: RemoteOptions) =>
  ClusterApi.use((api) =>
    api.watch({ clusterId: newClusterId() }).pipe(
      Stream.take(1),
      Stream.runHead,
      Effect.map((first) => first._tag === "Some" && first.value._tag === "Snapshot" && first.value.epoch !== undefined)
    )
  ).pipe(Effect.provide(clientLayer(options)), Effect.timeout("10 seconds"))

/**
 * The target of the server, its extensions detected unless given.
 *
 * @category constructors
 * @since 0.1.0
 */
export const remoteTarget = (options: RemoteOptions) =>
  Effect.gen(function* () {
    const extensions = options.extensions ?? (yield* announcesExtensions(options))
    const target: ContractTarget = {
      name: options.endpoint,
      layer: clientLayer(options),
      ours: extensions,
      clientIp: { _tag: "Any" },
      rawStrings: false,
      timeout: options.caseTimeoutMillis ?? 60_000,
      realTimeExpiry:
        options.expiryWithinMillis === undefined ? undefined : { gcWithinMillis: options.expiryWithinMillis }
    }
    return { target, extensions }
  })
