/**
 * The caller's address as PROTOCOL.md §2.10 defines it: a trusted X-Real-IP,
 * else a trusted first X-Forwarded-For entry, else the transport peer. The
 * result is binary like Go's `netip.Addr.MarshalBinary`: 4 bytes for IPv4, 16
 * for IPv6 plus the zone's UTF-8 bytes. Both headers are distrusted by
 * default, unlike the original (quirk Q7). Pure string and byte work, shared
 * by every adapter that needs the caller's address (gRPC Hello and rate limit,
 * the HTTP pages' rate limit).
 *
 * @since 0.1.0
 */

/**
 * Which proxy headers name the client. Trust a header only when a proxy you
 * run sets it; a client can send any value.
 *
 * @category models
 * @since 0.1.0
 */
export interface TrustOptions {
  /** Use the first `X-Real-IP` value when it is a bare IP (default false). */
  readonly trustXRealIp?: boolean | undefined
  /** Use the first entry of the first `X-Forwarded-For` value (default false). */
  readonly trustXForwardedFor?: boolean | undefined
}

const parseIPv4Into = (text: string, out: Uint8Array, offset: number): boolean => {
  const fields = text.split(".")
  if (fields.length !== 4) return false
  for (let i = 0; i < 4; i++) {
    const field = fields[i]!
    if (field.length === 0 || field.length > 3 || !/^[0-9]+$/.test(field)) return false
    if (field.length > 1 && field[0] === "0") return false
    const value = Number(field)
    if (value > 255) return false
    out[offset + i] = value
  }
  return true
}

const parseIPv6 = (text: string): Uint8Array | undefined => {
  let zone = ""
  const percent = text.indexOf("%")
  if (percent !== -1) {
    zone = text.slice(percent + 1)
    text = text.slice(0, percent)
    if (zone === "") return undefined
  }
  const ip = new Uint8Array(16)
  let ellipsis = -1
  let rest = text
  if (rest.startsWith("::")) {
    ellipsis = 0
    rest = rest.slice(2)
  }
  let filled = 0
  while (rest.length > 0 && filled < 16) {
    const group = /^[0-9a-fA-F]*/.exec(rest)![0]
    if (rest[group.length] === ".") {
      if ((ellipsis < 0 && filled !== 12) || filled + 4 > 16) return undefined
      if (!parseIPv4Into(rest, ip, filled)) return undefined
      filled += 4
      rest = ""
      break
    }
    if (group.length === 0 || group.length > 4) return undefined
    const value = Number.parseInt(group, 16)
    ip[filled] = value >> 8
    ip[filled + 1] = value & 0xff
    filled += 2
    rest = rest.slice(group.length)
    if (rest.length === 0) break
    if (rest[0] !== ":" || rest.length === 1) return undefined
    rest = rest.slice(1)
    if (rest[0] === ":") {
      if (ellipsis >= 0) return undefined
      ellipsis = filled
      rest = rest.slice(1)
    }
  }
  if (rest.length > 0) return undefined
  if (filled < 16) {
    if (ellipsis < 0) return undefined
    const shift = 16 - filled
    ip.copyWithin(ellipsis + shift, ellipsis, filled)
    ip.fill(0, ellipsis, ellipsis + shift)
  } else if (ellipsis >= 0) {
    return undefined
  }
  if (zone === "") return ip
  const zoneBytes = Buffer.from(zone, "utf8")
  const withZone = new Uint8Array(16 + zoneBytes.length)
  withZone.set(ip)
  withZone.set(zoneBytes, 16)
  return withZone
}

/**
 * Parses a bare IP address as Go's `netip.ParseAddr` does (no port, no
 * trimming, no leading zeros in IPv4 fields, an IPv6 zone allowed) and returns
 * its binary form, or `undefined` if it is not an IP address.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseIp = (text: string): Uint8Array | undefined => {
  if (text.includes(":")) return parseIPv6(text)
  const ip = new Uint8Array(4)
  return parseIPv4Into(text, ip, 0) ? ip : undefined
}

const hasIPv4MappedPrefix = (ip: Uint8Array): boolean => {
  if (ip.length < 16) return false
  for (let i = 0; i < 10; i++) if (ip[i] !== 0) return false
  return ip[10] === 0xff && ip[11] === 0xff
}

/**
 * Parses the transport peer as grpc-js reports it (`1.2.3.4:5678`,
 * `::1:5678` without brackets, or the bracketed `[::1]:5678`) and returns the
 * IP in binary form. An IPv4-mapped IPv6 peer (`::ffff:1.2.3.4`, as seen on a
 * dual-stack socket) gives 4 bytes, like Go. `unknown` or anything unparsable
 * gives `undefined`.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parsePeer = (peer: string): Uint8Array | undefined => {
  const colon = peer.lastIndexOf(":")
  if (colon === -1 || !/^[0-9]+$/.test(peer.slice(colon + 1))) return undefined
  let host = peer.slice(0, colon)
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1)
  const ip = parseIp(host)
  return ip !== undefined && ip.length === 16 && hasIPv4MappedPrefix(ip) ? ip.slice(12) : ip
}

const groupOf = (ip: Uint8Array, group: number): number => (ip[group * 2]! << 8) | ip[group * 2 + 1]!

const formatIPv4 = (ip: Uint8Array, offset: number): string =>
  `${ip[offset]}.${ip[offset + 1]}.${ip[offset + 2]}.${ip[offset + 3]}`

/**
 * Formats a binary address as Go's `netip.Addr.String` does: dotted IPv4;
 * IPv6 in RFC 5952 form (lowercase, the longest run of two or more zero
 * groups shortened to `::`), an IPv4-mapped address as `::ffff:1.2.3.4`, and
 * the zone after `%`. Anything that is not 4 or at least 16 bytes gives
 * `invalid IP`, which is also what the request log shows when no address is
 * known.
 *
 * @category formatting
 * @since 0.1.0
 */
export const formatIp = (ip: Uint8Array | undefined): string => {
  if (ip === undefined) return "invalid IP"
  if (ip.length === 4) return formatIPv4(ip, 0)
  if (ip.length < 16) return "invalid IP"
  const zone = ip.length > 16 ? `%${Buffer.from(ip.buffer, ip.byteOffset + 16, ip.length - 16).toString("utf8")}` : ""
  if (hasIPv4MappedPrefix(ip)) return `::ffff:${formatIPv4(ip, 12)}${zone}`
  let bestStart = -1
  let bestLength = 1
  for (let group = 0; group < 8; ) {
    if (groupOf(ip, group) !== 0) {
      group++
      continue
    }
    let end = group
    while (end < 8 && groupOf(ip, end) === 0) end++
    if (end - group > bestLength) {
      bestStart = group
      bestLength = end - group
    }
    group = end
  }
  const parts: Array<string> = []
  for (let group = 0; group < 8; group++) {
    if (group === bestStart) {
      parts.push(group === 0 ? ":" : "")
      group += bestLength - 1
      if (group === 7) parts.push("")
      continue
    }
    parts.push(groupOf(ip, group).toString(16))
  }
  return parts.join(":") + zone
}

/**
 * The key the rate limiter counts a client under: the formatted address, with
 * an IPv4-mapped IPv6 address (`::ffff:1.2.3.4`, zone or not) counted as the
 * IPv4 address it carries, so one client cannot get two buckets by switching
 * between the two spellings (quirk Q10).
 *
 * @category formatting
 * @since 0.1.0
 */
export const limiterKey = (ip: Uint8Array): string => (hasIPv4MappedPrefix(ip) ? formatIPv4(ip, 12) : formatIp(ip))

/**
 * Reads the first value of a request header by lower-case name.
 *
 * @category models
 * @since 0.1.0
 */
export type HeaderReader = (name: string) => string | undefined

/**
 * The client address of a request: the trusted headers first, then what the
 * transport saw (`peer()`). Invalid header values fall through to the next
 * step; `undefined` means no address is known.
 *
 * @category parsing
 * @since 0.1.0
 */
export const resolveClientAddress = (
  header: HeaderReader,
  peer: () => Uint8Array | undefined,
  options: TrustOptions = {}
): Uint8Array | undefined => {
  if (options.trustXRealIp === true) {
    const realIp = header("x-real-ip")
    const ip = realIp === undefined ? undefined : parseIp(realIp)
    if (ip !== undefined) return ip
  }
  if (options.trustXForwardedFor === true) {
    const forwarded = header("x-forwarded-for")
    const ip = forwarded === undefined ? undefined : parseIp(forwarded.split(",", 1)[0]!.trim())
    if (ip !== undefined) return ip
  }
  return peer()
}

/**
 * A bare IP as a socket reports it (no port), with an IPv4-mapped IPv6
 * address turned into its 4 IPv4 bytes.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseSocketAddress = (text: string): Uint8Array | undefined => {
  const ip = parseIp(text)
  return ip !== undefined && ip.length === 16 && hasIPv4MappedPrefix(ip) ? ip.slice(12) : ip
}
