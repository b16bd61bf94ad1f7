/**
 * The cores a container's CPU quota lets this process use, which the host's
 * core count does not show: cgroup v2's `cpu.max`, else cgroup v1's
 * `cpu.cfs_quota_us` over `cpu.cfs_period_us`.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"

const read = (path: string): string | undefined => {
  try {
    return readFileSync(path, "utf8").trim()
  } catch {
    return undefined
  }
}

/**
 * The cores of the quota ("200000 100000" is 2), or `undefined` without one.
 *
 * @category constructors
 * @since 0.1.0
 */
export const cpuQuotaCores = (root = "/sys/fs/cgroup"): number | undefined => {
  const v2 = read(`${root}/cpu.max`)
  if (v2 !== undefined) {
    const [quota, period] = v2.split(/\s+/)
    return quota === undefined || quota === "max" ? undefined : Number(quota) / Number(period ?? 100_000)
  }
  const quota = Number(read(`${root}/cpu/cpu.cfs_quota_us`))
  const period = Number(read(`${root}/cpu/cpu.cfs_period_us`))
  return Number.isFinite(quota) && quota > 0 && period > 0 ? quota / period : undefined
}
