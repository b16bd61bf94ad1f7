import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit } from "effect"
import fc from "fast-check"
import {
  utf8Length,
  validateAffiliateIds,
  validateClusterId,
  validateUpdate
} from "../../src/core/server/validation.ts"
import type { InvalidArgument } from "../../src/ports/DiscoveryError.ts"
import { blob, updateRequest } from "./fixtures/discovery.ts"

/** The InvalidArgument message a validation ends with, or undefined when it passes. */
const problem = (check: Effect.Effect<void, InvalidArgument>): string | undefined => {
  const exit = Effect.runSyncExit(check)
  if (Exit.isSuccess(exit)) return undefined
  const error = Exit.findErrorOption(exit)
  assert.isTrue(error._tag === "Some", "the validation fails with a typed error")
  if (error._tag !== "Some") return undefined
  assert.strictEqual(error.value._tag, "InvalidArgument")
  return error.value.message
}

const twoByte = "é" // U+00E9: 2 bytes in UTF-8, 1 UTF-16 unit
const threeByte = "€" // U+20AC: 3 bytes, 1 unit
const fourByte = "😀" // U+1F600: 4 bytes, 2 units
const loneSurrogate = "\ud800"
const endpointMessage = "affiliate endpoint must be a positive multiple of 16 bytes"
const thirtyMinutes = Duration.minutes(30)

describe("validation", () => {
  describe("utf8Length", () => {
    it("counts UTF-8 bytes, not UTF-16 units", () => {
      assert.strictEqual(utf8Length(""), 0)
      assert.strictEqual(utf8Length("abc"), 3)
      assert.strictEqual(utf8Length(twoByte), 2)
      assert.strictEqual(utf8Length(threeByte), 3)
      assert.strictEqual(utf8Length(fourByte), 4)
      assert.strictEqual(utf8Length(loneSurrogate), 3)
    })

    it("agrees with Buffer.byteLength on any string, lone surrogates included", () => {
      // any UTF-16 unit (lone surrogates included) or any astral code point (a valid surrogate pair)
      const piece = fc.oneof(
        fc.integer({ min: 0, max: 0xffff }).map((unit) => String.fromCharCode(unit)),
        fc.integer({ min: 0x10000, max: 0x10ffff }).map((point) => String.fromCodePoint(point))
      )
      const text = fc.array(piece, { maxLength: 40 }).map((pieces) => pieces.join(""))
      fc.assert(
        fc.property(text, (value) => utf8Length(value) === Buffer.byteLength(value, "utf8")),
        { numRuns: 500, seed: 0x0f8 }
      )
    })
  })

  describe("cluster ID", () => {
    it("rejects an empty cluster ID", () => {
      assert.strictEqual(problem(validateClusterId("")), "cluster ID can't be empty")
    })

    it("accepts 256 bytes and rejects 257", () => {
      assert.isUndefined(problem(validateClusterId("c".repeat(256))))
      assert.strictEqual(problem(validateClusterId("c".repeat(257))), "cluster ID is too long")
    })

    it("measures the length in UTF-8 bytes", () => {
      assert.isUndefined(problem(validateClusterId(twoByte.repeat(128))))
      assert.strictEqual(problem(validateClusterId(twoByte.repeat(129))), "cluster ID is too long")
      assert.isUndefined(problem(validateClusterId(threeByte.repeat(85))))
      assert.strictEqual(problem(validateClusterId(threeByte.repeat(86))), "cluster ID is too long")
      assert.isUndefined(problem(validateClusterId(fourByte.repeat(64))))
      assert.strictEqual(problem(validateClusterId(fourByte.repeat(65))), "cluster ID is too long")
    })

    it("rejects an ID that is not well-formed Unicode", () => {
      assert.strictEqual(problem(validateClusterId(`c${loneSurrogate}`)), "cluster ID is not valid UTF-8")
      assert.strictEqual(problem(validateClusterId("\udc00c")), "cluster ID is not valid UTF-8")
    })

    it("reports the length before the encoding", () => {
      assert.strictEqual(problem(validateClusterId(loneSurrogate.repeat(86))), "cluster ID is too long")
    })
  })

  describe("affiliate IDs", () => {
    it("checks the cluster ID first", () => {
      assert.strictEqual(problem(validateAffiliateIds("", "")), "cluster ID can't be empty")
      assert.strictEqual(problem(validateAffiliateIds("c".repeat(257), "")), "cluster ID is too long")
    })

    it("then checks the affiliate ID", () => {
      assert.strictEqual(problem(validateAffiliateIds("c", "")), "affiliate ID can't be empty")
      assert.strictEqual(problem(validateAffiliateIds("c", "a".repeat(257))), "affiliate ID is too long")
      assert.strictEqual(problem(validateAffiliateIds("c", twoByte.repeat(129))), "affiliate ID is too long")
      assert.strictEqual(problem(validateAffiliateIds("c", loneSurrogate)), "affiliate ID is not valid UTF-8")
    })

    it("accepts IDs of 256 bytes", () => {
      assert.isUndefined(problem(validateAffiliateIds("c".repeat(256), twoByte.repeat(128))))
    })
  })

  describe("update", () => {
    it("accepts a plain request", () => {
      assert.isUndefined(problem(validateUpdate(updateRequest({ data: blob(10), endpoints: [blob(16), blob(32)] }))))
    })

    it("checks cluster ID, affiliate ID, data, endpoints and ttl in that order", () => {
      const allBad = {
        clusterId: "",
        affiliateId: "",
        data: blob(2049),
        endpoints: [blob(33)],
        ttl: Duration.hours(1)
      }
      assert.strictEqual(problem(validateUpdate(allBad)), "cluster ID can't be empty")
      assert.strictEqual(problem(validateUpdate({ ...allBad, clusterId: "c" })), "affiliate ID can't be empty")
      assert.strictEqual(
        problem(validateUpdate({ ...allBad, clusterId: "c", affiliateId: "a" })),
        "affiliate data is too big"
      )
      assert.strictEqual(
        problem(validateUpdate({ ...allBad, clusterId: "c", affiliateId: "a", data: blob(2048) })),
        "affiliate endpoint is too big"
      )
      assert.strictEqual(
        problem(validateUpdate({ ...allBad, clusterId: "c", affiliateId: "a", data: blob(2048), endpoints: [] })),
        "ttl is too large"
      )
    })

    it("rejects IDs that are too long or not well-formed", () => {
      assert.strictEqual(
        problem(validateUpdate(updateRequest({ clusterId: "c".repeat(257) }))),
        "cluster ID is too long"
      )
      assert.strictEqual(
        problem(validateUpdate(updateRequest({ clusterId: twoByte.repeat(129) }))),
        "cluster ID is too long"
      )
      assert.strictEqual(
        problem(validateUpdate(updateRequest({ affiliateId: "a".repeat(257) }))),
        "affiliate ID is too long"
      )
      assert.strictEqual(
        problem(validateUpdate(updateRequest({ clusterId: loneSurrogate }))),
        "cluster ID is not valid UTF-8"
      )
      assert.strictEqual(
        problem(validateUpdate(updateRequest({ affiliateId: `a${loneSurrogate}b` }))),
        "affiliate ID is not valid UTF-8"
      )
    })

    it("accepts 2048 bytes of data and rejects 2049", () => {
      assert.isUndefined(problem(validateUpdate(updateRequest({ data: blob(2048) }))))
      assert.strictEqual(problem(validateUpdate(updateRequest({ data: blob(2049) }))), "affiliate data is too big")
    })

    it("accepts absent and empty data", () => {
      assert.isUndefined(problem(validateUpdate(updateRequest({ data: undefined }))))
      assert.isUndefined(problem(validateUpdate(updateRequest({ data: new Uint8Array(0) }))))
    })

    it("accepts endpoint blobs of 16 and 32 bytes", () => {
      assert.isUndefined(problem(validateUpdate(updateRequest({ endpoints: [blob(16)] }))))
      assert.isUndefined(problem(validateUpdate(updateRequest({ endpoints: [blob(32)] }))))
      assert.isUndefined(problem(validateUpdate(updateRequest({ endpoints: [blob(16), blob(32), blob(16)] }))))
    })

    it("rejects endpoint blobs that are not a positive multiple of 16 bytes", () => {
      for (const size of [0, 1, 15, 17, 31]) {
        assert.strictEqual(
          problem(validateUpdate(updateRequest({ endpoints: [blob(size)] }))),
          endpointMessage,
          `${size}`
        )
      }
    })

    it("rejects endpoint blobs over 32 bytes as too big", () => {
      for (const size of [33, 48, 2048]) {
        assert.strictEqual(
          problem(validateUpdate(updateRequest({ endpoints: [blob(size)] }))),
          "affiliate endpoint is too big",
          `${size}`
        )
      }
    })

    it("reports the first bad endpoint in request order", () => {
      assert.strictEqual(
        problem(validateUpdate(updateRequest({ endpoints: [blob(16), blob(33), blob(15)] }))),
        "affiliate endpoint is too big"
      )
      assert.strictEqual(
        problem(validateUpdate(updateRequest({ endpoints: [blob(16), blob(15), blob(33)] }))),
        endpointMessage
      )
    })

    it("does not limit how many endpoints one request carries", () => {
      const endpoints = Array.from({ length: 200 }, () => blob(16))
      assert.isUndefined(problem(validateUpdate(updateRequest({ endpoints }))))
    })

    it("accepts a ttl of exactly 30 minutes and rejects one nanosecond more", () => {
      assert.isUndefined(problem(validateUpdate(updateRequest({ ttl: thirtyMinutes }))))
      assert.isUndefined(problem(validateUpdate(updateRequest({ ttl: Duration.nanos(1_800_000_000_000n) }))))
      assert.strictEqual(
        problem(validateUpdate(updateRequest({ ttl: Duration.nanos(1_800_000_000_001n) }))),
        "ttl is too large"
      )
      assert.strictEqual(problem(validateUpdate(updateRequest({ ttl: Duration.infinity }))), "ttl is too large")
    })

    it("accepts zero and negative ttls", () => {
      assert.isUndefined(problem(validateUpdate(updateRequest({ ttl: Duration.zero }))))
      assert.isUndefined(problem(validateUpdate(updateRequest({ ttl: Duration.millis(-5000) }))))
      assert.isUndefined(problem(validateUpdate(updateRequest({ ttl: Duration.nanos(-1n) }))))
    })
  })
})
