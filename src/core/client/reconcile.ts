/**
 * Reconciliation: how one watch event changes the set of discovered
 * affiliates (PROTOCOL.md §5.5), as a pure function. It follows the Go client
 * with its faults fixed:
 *
 * - a snapshot replaces everything; a deletion removes the entry; an update
 *   with empty data is skipped and the entry kept; our own ID is skipped;
 * - a malformed endpoint blob is skipped and reported, never a crash (Q19);
 * - an update whose data does not open or decode **removes** the entry and is
 *   reported (Q21): the Go client keeps showing the previous data, which hides
 *   tampering or a key rotation. A peer that cannot be read is not a peer we
 *   can show.
 *
 * @since 0.1.0
 */
import { Result } from "effect"
import type { AffiliateView, WatchEvent } from "../../ports/ClusterApi.ts"
import type { AffiliateInfo, Endpoint } from "./payload.ts"

/**
 * Another member of the cluster as this client sees it: its ID, what it says
 * about itself, and the endpoints it and the other members reported for it.
 *
 * @category models
 * @since 0.1.0
 */
export interface DiscoveredAffiliate {
  readonly id: string
  readonly affiliate: AffiliateInfo
  readonly endpoints: ReadonlyArray<Endpoint>
}

/**
 * A discovered affiliate with the sealed bytes it was opened from, so that an
 * unchanged update is recognised without decrypting it again.
 *
 * @category models
 * @since 0.1.0
 */
export interface Entry {
  readonly view: DiscoveredAffiliate
  readonly sealed: AffiliateView
}

/**
 * Discovered affiliates by ID.
 *
 * @category models
 * @since 0.1.0
 */
export type Discovered = ReadonlyMap<string, Entry>

/**
 * Something wrong in what the service sent, reported rather than fatal.
 *
 * @category models
 * @since 0.1.0
 */
export interface Problem {
  readonly affiliateId: string
  /** "data": the affiliate was dropped; "endpoint": one endpoint was skipped. */
  readonly kind: "data" | "endpoint"
  readonly reason: string
}

/**
 * What reconciliation needs: our own ID and the two openers of the cluster key.
 *
 * @category models
 * @since 0.1.0
 */
export interface Reconciler {
  readonly selfId: string
  readonly openAffiliate: (blob: Uint8Array) => Result.Result<AffiliateInfo, string>
  readonly openEndpoint: (blob: Uint8Array) => Result.Result<Endpoint, string>
}

/**
 * The outcome of one event: the new set (the same object when nothing
 * changed) and the problems found.
 *
 * @category models
 * @since 0.1.0
 */
export interface Reconciled {
  readonly discovered: Discovered
  readonly problems: ReadonlyArray<Problem>
}

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

const sameSealed = (a: AffiliateView, b: AffiliateView): boolean =>
  sameBytes(a.data, b.data) &&
  a.endpoints.length === b.endpoints.length &&
  a.endpoints.every((endpoint, i) => sameBytes(endpoint, b.endpoints[i]!))

const copyView = (view: AffiliateView): AffiliateView => ({
  id: view.id,
  data: view.data.slice(),
  endpoints: view.endpoints.map((endpoint) => endpoint.slice())
})

// Applies one affiliate update to `map` in place; returns whether it changed.
const applyUpdate = (
  reconciler: Reconciler,
  map: Map<string, Entry>,
  view: AffiliateView,
  problems: Array<Problem>
): boolean => {
  if (view.id === reconciler.selfId || view.data.length === 0) return false
  const previous = map.get(view.id)
  if (previous !== undefined && sameSealed(previous.sealed, view)) return false
  const opened = reconciler.openAffiliate(view.data)
  if (Result.isFailure(opened)) {
    problems.push({ affiliateId: view.id, kind: "data", reason: opened.failure })
    return map.delete(view.id)
  }
  const endpoints: Array<Endpoint> = []
  for (const blob of view.endpoints) {
    const endpoint = reconciler.openEndpoint(blob)
    if (Result.isSuccess(endpoint)) endpoints.push(endpoint.success)
    else problems.push({ affiliateId: view.id, kind: "endpoint", reason: endpoint.failure })
  }
  map.set(view.id, {
    view: { id: view.id, affiliate: opened.success, endpoints },
    // the event's bytes may be shared with other watchers: keep a copy
    sealed: copyView(view)
  })
  return true
}

/**
 * Applies one watch event to the discovered set.
 *
 * @category reconciliation
 * @since 0.1.0
 */
export const reconcile = (reconciler: Reconciler, discovered: Discovered, event: WatchEvent): Reconciled => {
  const problems: Array<Problem> = []
  switch (event._tag) {
    case "Snapshot": {
      const next = new Map<string, Entry>()
      for (const view of event.affiliates) {
        // an unchanged entry is carried over without decrypting it again
        const previous = discovered.get(view.id)
        if (previous !== undefined && view.id !== reconciler.selfId && sameSealed(previous.sealed, view)) {
          next.set(view.id, previous)
        } else {
          applyUpdate(reconciler, next, view, problems)
        }
      }
      const unchanged = next.size === discovered.size && [...next].every(([id, entry]) => discovered.get(id) === entry)
      return { discovered: unchanged ? discovered : next, problems }
    }
    case "Updated": {
      const next = new Map(discovered)
      return { discovered: applyUpdate(reconciler, next, event.affiliate, problems) ? next : discovered, problems }
    }
    case "Resumed":
      // the changes missed follow as deltas; nothing is replaced
      return { discovered, problems }
    case "Deleted": {
      if (event.affiliateId === reconciler.selfId || !discovered.has(event.affiliateId)) {
        return { discovered, problems }
      }
      const next = new Map(discovered)
      next.delete(event.affiliateId)
      return { discovered: next, problems }
    }
  }
}

const copyAffiliate = (affiliate: AffiliateInfo): AffiliateInfo => ({
  nodeId: affiliate.nodeId,
  addresses: affiliate.addresses.map((address) => address.slice()),
  hostname: affiliate.hostname,
  nodename: affiliate.nodename,
  machineType: affiliate.machineType,
  operatingSystem: affiliate.operatingSystem,
  kubespan:
    affiliate.kubespan === undefined
      ? undefined
      : {
          publicKey: affiliate.kubespan.publicKey,
          address: affiliate.kubespan.address.slice(),
          additionalAddresses: affiliate.kubespan.additionalAddresses.map((p) => ({ ip: p.ip.slice(), bits: p.bits }))
        },
  controlPlane: affiliate.controlPlane === undefined ? undefined : { ...affiliate.controlPlane }
})

/**
 * The discovered affiliates as fresh copies that the caller may keep or
 * change freely (the Go client hands out shared objects: Q21).
 *
 * @category reconciliation
 * @since 0.1.0
 */
export const toAffiliates = (discovered: Discovered): Array<DiscoveredAffiliate> =>
  Array.from(discovered.values(), ({ view }) => ({
    id: view.id,
    affiliate: copyAffiliate(view.affiliate),
    endpoints: view.endpoints.map((endpoint) => ({ ip: endpoint.ip.slice(), port: endpoint.port }))
  }))
