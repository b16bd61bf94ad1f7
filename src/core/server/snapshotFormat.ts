/**
 * Limits of the snapshot format shared by its encoder and decoder
 * (PROTOCOL.md §1.5, §2.2).
 *
 * @since 0.1.0
 */

/**
 * The largest ClusterSnapshot record accepted, in bytes: the exact size of a
 * cluster of 1024 affiliates, each with a 256-byte ID, 2048-byte data and 64
 * endpoints of 2048 bytes, with the largest TTLs.
 *
 * @category models
 * @since 0.1.0
 */
export const maxClusterSize = 137_912_579

/**
 * Go's largest `time.Duration` (2^63−1 ns) in whole seconds: TTLs written
 * saturate at ± this.
 *
 * @category models
 * @since 0.1.0
 */
export const maxDurationSeconds = 9_223_372_036

/**
 * Go's largest `time.Duration` in milliseconds: TTLs read saturate at ± this.
 *
 * @category models
 * @since 0.1.0
 */
export const maxDurationMillis = 9_223_372_036_854
