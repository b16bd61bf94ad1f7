import { assert, describe, it } from "@effect/vitest"
import { parseTimeout } from "../../../../src/adapters/grpc/http2/grpcTimeout.ts"

describe("grpcTimeout", () => {
  it("reads every unit into milliseconds", () => {
    assert.deepStrictEqual(
      ["2H", "3M", "4S", "5m", "6000u", "7000000n", "99999999S", "0m"].map(parseTimeout),
      [7_200_000, 180_000, 4000, 5, 6, 7, 99_999_999_000, 0]
    )
    assert.closeTo(parseTimeout("1u")!, 0.001, 1e-12)
  })

  it("refuses values that are not 1 to 8 digits and a unit", () => {
    for (const value of ["", "S", "1", "123456789m", "1s", "1h", "-1S", "+1S", "1.5S", " 1S", "1S ", "1 S", "١S"]) {
      assert.isUndefined(parseTimeout(value), value)
    }
  })
})
