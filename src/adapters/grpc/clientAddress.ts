/**
 * The caller's address of a gRPC call (PROTOCOL.md §2.10): the core's rules
 * over grpc-js metadata and the transport peer string.
 *
 * @since 0.1.0
 */
import type * as grpc from "@grpc/grpc-js"
import type { TrustOptions } from "../../core/server/clientAddress.ts"
import { parsePeer, resolveClientAddress } from "../../core/server/clientAddress.ts"

export {
  formatIp,
  limiterKey,
  parseIp,
  parsePeer,
  type TrustOptions
} from "../../core/server/clientAddress.ts"

const peers = new Map<string, Uint8Array | undefined>()
const peersMax = 4096

/** `parsePeer`, remembered per peer string: every call of a connection has the same one. */
const peerAddress = (peer: string): Uint8Array | undefined => {
  let address = peers.get(peer)
  if (address === undefined && !peers.has(peer)) {
    if (peers.size >= peersMax) peers.clear()
    address = parsePeer(peer)
    peers.set(peer, address)
  }
  return address
}

/** The first value of a metadata entry, when it is a string. */
const firstString = (metadata: grpc.Metadata, name: string): string | undefined => {
  const value = metadata.get(name)[0]
  return typeof value === "string" ? value : undefined
}

/**
 * The client address of a call: the trusted headers first, then the transport
 * peer. The returned bytes may be shared between calls: do not change them. Invalid header values fall through to the next step; `undefined` means
 * no address is known.
 *
 * @category parsing
 * @since 0.1.0
 */
export const clientAddress = (
  peer: string,
  metadata: grpc.Metadata,
  options: TrustOptions = {}
): Uint8Array | undefined => callClientAddress({ metadata, getPeer: () => peer }, options)

/**
 * What {@link callClientAddress} reads of a call. `metadata` may be a getter
 * that builds the metadata when first read, as the http2 transport's calls do.
 *
 * @category models
 * @since 0.1.0
 */
export interface CallOrigin {
  readonly metadata: grpc.Metadata
  getPeer(): string
}

/**
 * {@link clientAddress} of a call, reading its metadata only when a trusted
 * header is asked for: with no header trusted, the call's metadata is never
 * built.
 *
 * @category parsing
 * @since 0.1.0
 */
export const callClientAddress = (call: CallOrigin, options: TrustOptions = {}): Uint8Array | undefined =>
  resolveClientAddress(
    (name) => firstString(call.metadata, name),
    () => peerAddress(call.getPeer()),
    options
  )
