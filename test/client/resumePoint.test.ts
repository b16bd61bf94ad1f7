import { assert, describe, it } from "@effect/vitest"
import { continues, nextResumePoint } from "../../src/core/client/resumePoint.ts"
import type { WatchEvent } from "../../src/ports/ClusterApi.ts"

const updated = (revision: number): WatchEvent => ({
  _tag: "Updated",
  revision,
  affiliate: { id: "a", data: Uint8Array.of(1), endpoints: [] }
})

describe("resume points", () => {
  it("follow snapshots with an epoch, resumed starts and each change; none from a service without epochs", () => {
    assert.isUndefined(nextResumePoint(undefined, { _tag: "Snapshot", revision: 0, affiliates: [] }))
    const start = nextResumePoint(undefined, { _tag: "Snapshot", revision: 4, affiliates: [], epoch: "e" })
    assert.deepStrictEqual(start, { epoch: "e", revision: 4 })
    assert.deepStrictEqual(nextResumePoint(start, updated(5)), { epoch: "e", revision: 5 })
    assert.deepStrictEqual(nextResumePoint(start, { _tag: "Deleted", revision: 5, affiliateId: "a" }), {
      epoch: "e",
      revision: 5
    })
    assert.deepStrictEqual(nextResumePoint(undefined, { _tag: "Resumed", revision: 9, epoch: "f" }), {
      epoch: "f",
      revision: 9
    })
    assert.isUndefined(nextResumePoint(undefined, updated(3)))
  })

  it("a change continues only the revision before it", () => {
    const at = { epoch: "e", revision: 4 }
    assert.isTrue(continues(at, updated(5)))
    assert.isFalse(continues(at, updated(6)))
    assert.isFalse(continues(at, updated(4)))
    assert.isTrue(continues(at, { _tag: "Snapshot", revision: 2, affiliates: [], epoch: "g" }))
    assert.isTrue(continues(undefined, updated(17)))
  })
})
