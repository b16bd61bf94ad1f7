/**
 * What the live `/inspect` page receives about one cluster: what List and
 * the cluster's change log say, as a holder of the cluster ID could see it
 * through Watch. Blobs stay the encrypted bytes (in hex); a change carries
 * no client address and no instance name.
 *
 * @since 0.1.0
 */
import type { ChangeRecord } from "../../../ports/ChangeCause.ts"
import type { AffiliateView } from "../../../ports/ClusterApi.ts"
import { changeFacts, type KnownAffiliate, toHex } from "../pages.ts"

/**
 * One affiliate as the page shows it.
 *
 * @category models
 * @since 0.1.0
 */
export interface InspectedAffiliate {
  readonly id: string
  /** The encrypted data in hex. */
  readonly data: string
  readonly dataBytes: number
  /** Each encrypted endpoint in hex. */
  readonly endpoints: ReadonlyArray<string>
  /** The revision of its last change, when the change log still has it. */
  readonly revision: number | undefined
  /** When it expires (milliseconds since the epoch), when the change log says. */
  readonly expiresAt: number | undefined
}

/**
 * One change as the page shows it.
 *
 * @category models
 * @since 0.1.0
 */
export interface InspectedChange {
  readonly revision: number | undefined
  readonly at: number
  readonly affiliateId: string
  readonly cause: string
  readonly facts: string
}

/**
 * A frame of the live `/inspect` page.
 *
 * @category models
 * @since 0.1.0
 */
export interface InspectFrame {
  /** The server's time, so the page counts time left on the server's clock. */
  readonly now: number
  /** The cluster's revision as far as its change log says. */
  readonly revision: number | undefined
  readonly affiliates: ReadonlyArray<InspectedAffiliate>
  /** Its last changes, newest first; `undefined` when they could not be read. */
  readonly history: ReadonlyArray<InspectedChange> | undefined
}

const setsExpiry = new Set(["created", "data_changed", "endpoints_added", "ttl_refreshed"])

/**
 * What a history (newest first) says of each affiliate: the revision of its
 * last change, and the expiry its last update set.
 *
 * @category constructors
 * @since 0.1.0
 */
export const latestByAffiliate = (
  history: ReadonlyArray<ChangeRecord> | undefined
): ReadonlyMap<string, KnownAffiliate> => {
  const latest = new Map<string, { revision: number | undefined; expiresAt: number | undefined }>()
  for (const record of history ?? []) {
    if (record.affiliateId === undefined) continue
    let known = latest.get(record.affiliateId)
    if (known === undefined) {
      known = { revision: record.revision, expiresAt: undefined }
      latest.set(record.affiliateId, known)
    }
    known.revision ??= record.revision
    if (known.expiresAt === undefined && setsExpiry.has(record.cause)) known.expiresAt = record.expiresAt
  }
  return latest
}

/**
 * The frame of a cluster's affiliates and history at `now`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const inspectFrame = (
  affiliates: ReadonlyArray<AffiliateView>,
  history: ReadonlyArray<ChangeRecord> | undefined,
  now: number
): InspectFrame => {
  const latest = latestByAffiliate(history)
  return {
    now,
    revision: history?.find((record) => record.revision !== undefined)?.revision,
    affiliates: affiliates.map((affiliate) => {
      const record = latest.get(affiliate.id)
      return {
        id: affiliate.id,
        data: toHex(affiliate.data),
        dataBytes: affiliate.data.length,
        endpoints: affiliate.endpoints.map(toHex),
        revision: record?.revision,
        expiresAt: record?.expiresAt
      }
    }),
    history: history?.map((record) => ({
      revision: record.revision,
      at: record.at,
      affiliateId: record.affiliateId ?? "",
      cause: record.cause,
      facts: changeFacts(record)
    }))
  }
}
