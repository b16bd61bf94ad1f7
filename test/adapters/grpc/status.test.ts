import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import { Cause } from "effect"
import { fromCause, fromServiceError, fromStatus, toStatus } from "../../../src/adapters/grpc/status.ts"
import type { DiscoveryError } from "../../../src/ports/DiscoveryError.ts"
import {
  InvalidArgument,
  lostUpdateMessage,
  RemoteFailure,
  ResourceExhausted,
  SubscriptionLost,
  Unavailable
} from "../../../src/ports/DiscoveryError.ts"

const table: ReadonlyArray<readonly [DiscoveryError, grpc.status, string]> = [
  [
    new InvalidArgument({ message: "cluster ID can't be empty" }),
    grpc.status.INVALID_ARGUMENT,
    "cluster ID can't be empty"
  ],
  [
    new ResourceExhausted({ message: "too many affiliates in the cluster" }),
    grpc.status.RESOURCE_EXHAUSTED,
    "too many affiliates in the cluster"
  ],
  [new SubscriptionLost({ message: lostUpdateMessage }), grpc.status.ABORTED, "subscription canceled: lost update"],
  [new Unavailable({ message: "server is shutting down" }), grpc.status.UNAVAILABLE, "server is shutting down"],
  [new RemoteFailure({ code: grpc.status.DEADLINE_EXCEEDED, message: "late" }), grpc.status.DEADLINE_EXCEEDED, "late"]
]

describe("status", () => {
  for (const [error, code, details] of table) {
    it(`maps ${error._tag} to ${grpc.status[code]} and back`, () => {
      assert.deepStrictEqual(toStatus(error), { code, details })
      assert.deepStrictEqual(fromStatus(code, details), error)
    })
  }

  it("keeps codes without a domain meaning as RemoteFailure", () => {
    assert.deepStrictEqual(fromStatus(grpc.status.INTERNAL, "boom"), new RemoteFailure({ code: 13, message: "boom" }))
    assert.deepStrictEqual(fromStatus(grpc.status.CANCELLED, "x"), new RemoteFailure({ code: 1, message: "x" }))
  })

  it("reads grpc-js client errors by code and details", () => {
    const error = Object.assign(new Error("3 INVALID_ARGUMENT: ttl is too large"), {
      code: grpc.status.INVALID_ARGUMENT,
      details: "ttl is too large",
      metadata: new grpc.Metadata()
    })
    assert.deepStrictEqual(fromServiceError(error), new InvalidArgument({ message: "ttl is too large" }))
    assert.deepStrictEqual(
      fromServiceError(new Error("socket gone")),
      new RemoteFailure({ code: grpc.status.UNKNOWN, message: "socket gone" })
    )
  })

  it("answers a failed handler with its error, a defect with INTERNAL and an interruption with UNAVAILABLE", () => {
    assert.deepStrictEqual(fromCause(Cause.fail(new SubscriptionLost({ message: lostUpdateMessage }))), {
      code: grpc.status.ABORTED,
      details: lostUpdateMessage
    })
    assert.deepStrictEqual(fromCause(Cause.die(new Error("kaput"))), { code: grpc.status.INTERNAL, details: "kaput" })
    assert.deepStrictEqual(fromCause(Cause.die("raw")), { code: grpc.status.INTERNAL, details: "raw" })
    assert.deepStrictEqual(fromCause(Cause.interrupt()), {
      code: grpc.status.UNAVAILABLE,
      details: "server is shutting down"
    })
  })
})
