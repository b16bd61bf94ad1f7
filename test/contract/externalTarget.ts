/**
 * A contract target for a server this suite does not control (for example the
 * original Go service): plaintext gRPC through our `GrpcClient`, original
 * behaviours only, no time control. The address is read when each case builds
 * its layer, so a test file can start the server in `beforeAll`.
 */
import { Effect, Layer } from "effect"
import { GrpcClient } from "../../src/adapters/grpc/index.ts"
import type { ContractTarget } from "./ContractTarget.ts"

/** The target for the server at `address()` (`host:port`), started with `redirect` if given. */
export const externalTarget = (name: string, address: () => string, redirect?: string | undefined): ContractTarget => ({
  name,
  layer: Layer.unwrap(Effect.sync(() => GrpcClient.layer({ endpoint: address(), tls: false }))),
  ours: false,
  clientIp: { _tag: "Any" },
  redirectEndpoint: redirect,
  rawStrings: false,
  timeout: 180_000
})
