/**
 * Parses byte sizes as flags take them: a number of bytes (`1048576`), or a
 * number with a binary unit (`512KiB`, `256MiB`, `1.5GiB`; `K`, `M`, `G` and
 * `KB`, `MB`, `GB` mean the same powers of 1024).
 *
 * @since 0.1.0
 */

const unitBytes: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3
}

/**
 * The whole number of bytes `text` names, or `undefined` when it is not a
 * non-negative size.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseByteSize = (text: string): number | undefined => {
  const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text)
  if (match === null) return undefined
  const unit = unitBytes[match[2]!.toLowerCase()]
  if (unit === undefined) return undefined
  const bytes = Math.floor(Number(match[1]) * unit)
  return Number.isSafeInteger(bytes) ? bytes : undefined
}

/**
 * `bytes` in the largest binary unit that keeps it short (`256MiB`, `1.5GiB`, `100B`).
 *
 * @category parsing
 * @since 0.1.0
 */
export const formatByteSize = (bytes: number): string => {
  for (const [unit, size] of [
    ["GiB", 1024 ** 3],
    ["MiB", 1024 ** 2],
    ["KiB", 1024]
  ] as const) {
    if (bytes >= size) return `${Number((bytes / size).toFixed(1))}${unit}`
  }
  return `${bytes}B`
}
