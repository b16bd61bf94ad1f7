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

/**
 * The client address of a call: the trusted headers first, then the transport
 * peer. Invalid header values fall through to the next step; `undefined` means
 * no address is known.
 *
 * @category parsing
 * @since 0.1.0
 */
export const clientAddress = (
  peer: string,
  metadata: grpc.Metadata,
  options: TrustOptions = {}
): Uint8Array | undefined =>
  resolveClientAddress(
    (name) => {
      const value = metadata.get(name)[0]
      return typeof value === "string" ? value : undefined
    },
    () => parsePeer(peer),
    options
  )
