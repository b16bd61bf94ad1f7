import { createCipheriv } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import type { AffiliateInfoInit, EndpointInit } from "../../src/core/client/payload.ts"
import type { Discovered, Reconciler } from "../../src/core/client/reconcile.ts"
import { reconcile, toAffiliates } from "../../src/core/client/reconcile.ts"
import { makeKey, openAffiliate, openEndpoint, sealAffiliate, sealEndpoint } from "../../src/core/client/sealing.ts"
import type { AffiliateView, WatchEvent } from "../../src/ports/ClusterApi.ts"
import { key32 } from "./fixtures.ts"

const key = Result.getOrThrow(makeKey(key32))
const wrongKey = Result.getOrThrow(makeKey(new Uint8Array(32).fill(9)))

const reconciler: Reconciler = {
  selfId: "self",
  openAffiliate: (blob) => openAffiliate(key, blob),
  openEndpoint: (blob) => openEndpoint(key, blob)
}

const sealedEndpoint = (endpoint: EndpointInit) => Result.getOrThrow(sealEndpoint(key, endpoint))

const view = (
  id: string,
  affiliate: AffiliateInfoInit | undefined,
  endpoints: ReadonlyArray<Uint8Array> = [],
  k = key
): AffiliateView => ({
  id,
  data: affiliate === undefined ? new Uint8Array(0) : Result.getOrThrow(sealAffiliate(k, affiliate)),
  endpoints
})

const snapshot = (...affiliates: Array<AffiliateView>): WatchEvent => ({ _tag: "Snapshot", revision: 0, affiliates })
const updated = (affiliate: AffiliateView): WatchEvent => ({ _tag: "Updated", revision: 1, affiliate })
const deleted = (affiliateId: string): WatchEvent => ({ _tag: "Deleted", revision: 1, affiliateId })

const apply = (events: ReadonlyArray<WatchEvent>, start: Discovered = new Map()) =>
  events.reduce(
    (acc, event) => {
      const next = reconcile(reconciler, acc.discovered, event)
      return { discovered: next.discovered, problems: [...acc.problems, ...next.problems] }
    },
    { discovered: start, problems: [] as Array<{ affiliateId: string; kind: string; reason: string }> }
  )

const hostnames = (discovered: Discovered) =>
  Object.fromEntries(toAffiliates(discovered).map((a) => [a.id, a.affiliate.hostname]))

/** A 16-byte blob whose ECB plaintext starts with `size`. */
const blockWithSize = (size: number): Uint8Array => {
  const cipher = createCipheriv("aes-256-ecb", key32, null)
  cipher.setAutoPadding(false)
  const block = new Uint8Array(16)
  block[0] = size
  return new Uint8Array(Buffer.concat([cipher.update(block), cipher.final()]))
}

describe("reconcile", () => {
  it("replaces everything with a snapshot and skips our own ID", () => {
    const { discovered } = apply([
      updated(view("old", { hostname: "old" })),
      snapshot(view("a", { hostname: "a" }), view("self", { hostname: "me" }), view("b", { hostname: "b" }))
    ])
    assert.deepStrictEqual(hostnames(discovered), { a: "a", b: "b" })
  })

  it("adds and replaces on update, removes on delete, ignores deletes of unknown or own IDs", () => {
    const start = apply([snapshot(view("a", { hostname: "a1" }))]).discovered
    const { discovered } = apply(
      [
        updated(view("b", { hostname: "b" })),
        updated(view("a", { hostname: "a2" })),
        updated(view("self", { hostname: "me" }))
      ],
      start
    )
    assert.deepStrictEqual(hostnames(discovered), { a: "a2", b: "b" })
    assert.deepStrictEqual(hostnames(apply([deleted("b")], discovered).discovered), { a: "a2" })
    assert.strictEqual(reconcile(reconciler, discovered, deleted("nobody")).discovered, discovered)
    assert.strictEqual(reconcile(reconciler, discovered, deleted("self")).discovered, discovered)
  })

  it("skips an update with empty data and keeps the entry", () => {
    const start = apply([snapshot(view("a", { hostname: "a" }))]).discovered
    const next = reconcile(reconciler, start, updated(view("a", undefined, [sealedEndpoint({ port: 1 })])))
    assert.strictEqual(next.discovered, start)
    assert.deepStrictEqual(next.problems, [])
    // an affiliate that has only endpoints so far is not listed
    assert.deepStrictEqual(hostnames(apply([snapshot(view("x", undefined))]).discovered), {})
  })

  it("removes an entry whose new data cannot be opened and reports it (Q21)", () => {
    const start = apply([snapshot(view("a", { hostname: "a" }), view("b", { hostname: "b" }))]).discovered
    const { discovered, problems } = apply(
      [
        updated(view("a", { hostname: "rotated" }, [], wrongKey)),
        updated({ id: "b", data: new Uint8Array(10), endpoints: [] })
      ],
      start
    )
    assert.deepStrictEqual(hostnames(discovered), {})
    assert.deepStrictEqual(
      problems.map((p) => [p.affiliateId, p.kind]),
      [
        ["a", "data"],
        ["b", "data"]
      ]
    )
    assert.include(problems[0]!.reason, "authentication")
    assert.include(problems[1]!.reason, "shorter than 28")
  })

  it("drops an affiliate whose data opens but does not decode", () => {
    const cipher = createCipheriv("aes-256-gcm", key32, new Uint8Array(12))
    const plaintext = Uint8Array.of(0x0a, 0x09) // nodeId of 9 bytes, none follow
    const data = new Uint8Array(
      Buffer.concat([new Uint8Array(12), cipher.update(plaintext), cipher.final(), cipher.getAuthTag()])
    )
    const { discovered, problems } = apply([snapshot({ id: "a", data, endpoints: [] })])
    assert.strictEqual(discovered.size, 0)
    assert.include(problems[0]!.reason, "does not decode")
  })

  it("skips malformed endpoint blobs (empty, 15 bytes, size byte 200) and keeps the rest (Q19)", () => {
    const good = sealedEndpoint({ ip: Uint8Array.of(1, 2, 3, 4), port: 5678 })
    const { discovered, problems } = apply([
      snapshot(
        view("a", { hostname: "a" }, [
          new Uint8Array(0),
          good,
          new Uint8Array(15),
          blockWithSize(200),
          blockWithSize(15)
        ])
      )
    ])
    const [a] = toAffiliates(discovered)
    assert.deepStrictEqual(a?.endpoints, [{ ip: Uint8Array.of(1, 2, 3, 4), port: 5678 }])
    assert.deepStrictEqual(
      problems.map((p) => [p.affiliateId, p.kind]),
      Array.from({ length: 4 }, () => ["a", "endpoint"])
    )
    assert.include(problems[0]!.reason, "empty")
    assert.include(problems[1]!.reason, "not a multiple of 16")
    assert.include(problems[2]!.reason, "size byte 200")
  })

  it("recognises an unchanged update or snapshot and returns the same set", () => {
    const a = view("a", { hostname: "a" }, [sealedEndpoint({ port: 1 })])
    const start = apply([snapshot(a)]).discovered
    assert.strictEqual(reconcile(reconciler, start, updated(a)).discovered, start)
    assert.strictEqual(reconcile(reconciler, start, snapshot(a)).discovered, start)
    // a new endpoint is a change
    const moved = { ...a, endpoints: [...a.endpoints, sealedEndpoint({ port: 2 })] }
    assert.notStrictEqual(reconcile(reconciler, start, updated(moved)).discovered, start)
  })

  it("keeps its own copy of the bytes it was given", () => {
    const a = view("a", { hostname: "a" })
    const start = apply([snapshot(a)]).discovered
    a.data.fill(0)
    assert.strictEqual(reconcile(reconciler, start, updated(view("a", { hostname: "a" }))).problems.length, 0)
    assert.deepStrictEqual(hostnames(start), { a: "a" })
  })

  it("hands out copies the caller may change (Q21)", () => {
    const start = apply([
      snapshot(
        view("a", { hostname: "a", addresses: [Uint8Array.of(1, 1, 1, 1)] }, [
          sealedEndpoint({ ip: Uint8Array.of(2, 2, 2, 2) })
        ])
      )
    ]).discovered
    const [copy] = toAffiliates(start)
    copy!.affiliate.addresses[0]!.fill(0)
    copy!.endpoints[0]!.ip.fill(0)
    const [again] = toAffiliates(start)
    assert.deepStrictEqual(again!.affiliate.addresses, [Uint8Array.of(1, 1, 1, 1)])
    assert.deepStrictEqual(again!.endpoints[0]!.ip, Uint8Array.of(2, 2, 2, 2))
  })
})
