/**
 * The plaintext payloads a discovery client seals: `sidero.discovery.client`
 * Affiliate and Endpoint, as plain objects, with a hand-written protobuf
 * codec. Encoding is canonical (ascending field order, default scalars left
 * out, present sub-messages always written), which is what the Go client's
 * MarshalVT produces; the interop vectors check it byte for byte. Decoding
 * follows Go's UnmarshalVT: unknown fields are skipped (a group's end tag is
 * not checked against its start), repeated sub-messages merge, a wrong wire
 * type or a truncated field is an error. Both go through the core's wire
 * reader and writer.
 *
 * @since 0.1.0
 */
import { Result } from "effect"
import { utf8Length } from "../utf8.ts"
import { Malformed, WireReader, type WireReaderOptions } from "../wire/WireReader.ts"
import { fieldSize, putHeader, putUtf8, putVarint, varintSize } from "../wire/wireWriter.ts"

/**
 * An address of a node with a port (WireGuard, for KubeSpan): `ip` is binary,
 * 4 or 16 bytes.
 *
 * @category models
 * @since 0.1.0
 */
export interface Endpoint {
  readonly ip: Uint8Array
  readonly port: number
}

/**
 * An IP prefix announced over KubeSpan.
 *
 * @category models
 * @since 0.1.0
 */
export interface IpPrefix {
  readonly ip: Uint8Array
  readonly bits: number
}

/**
 * A node's KubeSpan settings.
 *
 * @category models
 * @since 0.1.0
 */
export interface KubeSpan {
  readonly publicKey: string
  readonly address: Uint8Array
  readonly additionalAddresses: ReadonlyArray<IpPrefix>
}

/**
 * What a control-plane node announces.
 *
 * @category models
 * @since 0.1.0
 */
export interface ControlPlane {
  readonly apiServerPort: number
}

/**
 * What a node says about itself (`sidero.discovery.client.Affiliate`), as
 * decoded: every field is filled in, the two sub-messages are present or not.
 *
 * @category models
 * @since 0.1.0
 */
export interface AffiliateInfo {
  readonly nodeId: string
  readonly addresses: ReadonlyArray<Uint8Array>
  readonly hostname: string
  readonly nodename: string
  readonly machineType: string
  readonly operatingSystem: string
  readonly kubespan?: KubeSpan | undefined
  readonly controlPlane?: ControlPlane | undefined
}

/**
 * An affiliate to encode: any field may be left out (it then has its default).
 * A protobuf-es `Affiliate` message fits this type as it is.
 *
 * @category models
 * @since 0.1.0
 */
export interface AffiliateInfoInit {
  readonly nodeId?: string | undefined
  readonly addresses?: ReadonlyArray<Uint8Array> | undefined
  readonly hostname?: string | undefined
  readonly nodename?: string | undefined
  readonly machineType?: string | undefined
  readonly operatingSystem?: string | undefined
  readonly kubespan?:
    | {
        readonly publicKey?: string | undefined
        readonly address?: Uint8Array | undefined
        readonly additionalAddresses?: ReadonlyArray<Partial<IpPrefix>> | undefined
      }
    | undefined
  readonly controlPlane?: Partial<ControlPlane> | undefined
}

/**
 * An endpoint to encode; a missing ip is empty and a missing port is 0.
 *
 * @category models
 * @since 0.1.0
 */
export type EndpointInit = Partial<Endpoint>

const empty: Uint8Array = new Uint8Array(0)
// Go does not check UTF-8 in these strings; invalid bytes become U+FFFD here.
const textDecoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true })

/** Bytes of a string field holding `text`, left out when empty. */
const textSize = (text: string | undefined): number => (text ? fieldSize(utf8Length(text)) : 0)

/** Bytes of a bytes field holding `value`, left out when empty. */
const bytesSize = (value: Uint8Array | undefined): number =>
  value !== undefined && value.length > 0 ? fieldSize(value.length) : 0

/** Bytes of a uint32 field holding `value`, left out when 0. */
const uint32Size = (value: number | undefined): number => {
  const v = (value ?? 0) >>> 0
  return v === 0 ? 0 : 1 + varintSize(v)
}

const putText = (bytes: Uint8Array, pos: number, tag: number, text: string | undefined): number =>
  text ? putUtf8(bytes, putHeader(bytes, pos, tag, utf8Length(text)), text) : pos

const putBytes = (bytes: Uint8Array, pos: number, tag: number, value: Uint8Array): number => {
  pos = putHeader(bytes, pos, tag, value.length)
  bytes.set(value, pos)
  return pos + value.length
}

const putUint32 = (bytes: Uint8Array, pos: number, tag: number, value: number | undefined): number => {
  const v = (value ?? 0) >>> 0
  if (v === 0) return pos
  bytes[pos++] = tag
  return putVarint(bytes, pos, v)
}

/** Body bytes of an IpPrefix or an Endpoint: both are `bytes ip = 1` and a uint32 field 2 (bits or port). */
const addressSize = (ip: Uint8Array | undefined, number: number | undefined): number =>
  bytesSize(ip) + uint32Size(number)

/** Writes the body of an IpPrefix or an Endpoint; returns the position after it. */
const putAddress = (bytes: Uint8Array, pos: number, ip: Uint8Array | undefined, number: number | undefined): number =>
  putUint32(bytes, ip !== undefined && ip.length > 0 ? putBytes(bytes, pos, 0x0a, ip) : pos, 0x10, number)

type KubeSpanInit = NonNullable<AffiliateInfoInit["kubespan"]>

const kubeSpanSize = (kubespan: KubeSpanInit): number => {
  let size = textSize(kubespan.publicKey) + bytesSize(kubespan.address)
  for (const prefix of kubespan.additionalAddresses ?? []) size += fieldSize(addressSize(prefix.ip, prefix.bits))
  return size
}

const affiliateSize = (affiliate: AffiliateInfoInit): number => {
  let size = textSize(affiliate.nodeId)
  for (const address of affiliate.addresses ?? []) size += fieldSize(address.length)
  size += textSize(affiliate.hostname) + textSize(affiliate.nodename)
  size += textSize(affiliate.machineType) + textSize(affiliate.operatingSystem)
  if (affiliate.kubespan !== undefined) size += fieldSize(kubeSpanSize(affiliate.kubespan))
  if (affiliate.controlPlane !== undefined) size += fieldSize(uint32Size(affiliate.controlPlane.apiServerPort))
  return size
}

/** Writes the KubeSpan field (7); returns the position after it. */
const putKubeSpan = (bytes: Uint8Array, pos: number, kubespan: KubeSpanInit): number => {
  pos = putHeader(bytes, pos, 0x3a, kubeSpanSize(kubespan))
  pos = putText(bytes, pos, 0x0a, kubespan.publicKey)
  if (kubespan.address !== undefined && kubespan.address.length > 0) pos = putBytes(bytes, pos, 0x12, kubespan.address)
  for (const prefix of kubespan.additionalAddresses ?? []) {
    pos = putHeader(bytes, pos, 0x1a, addressSize(prefix.ip, prefix.bits))
    pos = putAddress(bytes, pos, prefix.ip, prefix.bits)
  }
  return pos
}

/**
 * The canonical protobuf encoding of an affiliate, as Go's MarshalVT writes it.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeAffiliate = (affiliate: AffiliateInfoInit): Uint8Array => {
  const bytes = new Uint8Array(affiliateSize(affiliate))
  let pos = putText(bytes, 0, 0x0a, affiliate.nodeId)
  for (const address of affiliate.addresses ?? []) pos = putBytes(bytes, pos, 0x12, address)
  pos = putText(bytes, pos, 0x1a, affiliate.hostname)
  pos = putText(bytes, pos, 0x22, affiliate.nodename)
  pos = putText(bytes, pos, 0x2a, affiliate.machineType)
  pos = putText(bytes, pos, 0x32, affiliate.operatingSystem)
  if (affiliate.kubespan !== undefined) pos = putKubeSpan(bytes, pos, affiliate.kubespan)
  if (affiliate.controlPlane !== undefined) {
    const port = affiliate.controlPlane.apiServerPort
    putUint32(bytes, putHeader(bytes, pos, 0x42, uint32Size(port)), 0x08, port)
  }
  return bytes
}

/**
 * The canonical protobuf encoding of an endpoint: `0A len ip` when the ip is
 * not empty, then `10 varint(port)` when the port is not 0.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeEndpoint = (endpoint: EndpointInit): Uint8Array => {
  const bytes = new Uint8Array(addressSize(endpoint.ip, endpoint.port))
  putAddress(bytes, 0, endpoint.ip, endpoint.port)
  return bytes
}

/** The Go client decodes with vtprotobuf's UnmarshalVT, which does not match a group's end tag to its start. */
const goClient: WireReaderOptions = { checkGroupEnd: false }

const bytesField = (r: WireReader, name: string): Uint8Array => {
  r.expect(2, name)
  const start = r.delimited()
  return r.bytes.slice(start, r.pos)
}

const stringField = (r: WireReader, name: string): string => {
  r.expect(2, name)
  const start = r.delimited()
  return textDecoder.decode(r.bytes.subarray(start, r.pos))
}

const uint32Field = (r: WireReader, name: string): number => {
  r.expect(0, name)
  return r.uint32()
}

/** Reads the fields of an IpPrefix or an Endpoint (see `addressSize`) up to the reader's bound. */
const readAddress = (r: WireReader, ipName: string, numberName: string): [Uint8Array, number] => {
  let ip = empty
  let number = 0
  for (let field = r.nextField(); field !== 0; field = r.nextField()) {
    if (field === 1) ip = bytesField(r, ipName)
    else if (field === 2) number = uint32Field(r, numberName)
    else r.skip(r.wireType, field)
  }
  return [ip, number]
}

/** Reads the KubeSpan field (7) whose payload comes next, merged into `base`. */
const readKubeSpan = (r: WireReader, base: KubeSpan | undefined): KubeSpan => {
  r.expect(2, "Affiliate.kubespan")
  const outer = r.enter()
  let publicKey = base?.publicKey ?? ""
  let address = base?.address ?? empty
  const additionalAddresses = [...(base?.additionalAddresses ?? [])]
  for (let field = r.nextField(); field !== 0; field = r.nextField()) {
    if (field === 1) publicKey = stringField(r, "KubeSpan.public_key")
    else if (field === 2) address = bytesField(r, "KubeSpan.address")
    else if (field === 3) {
      r.expect(2, "KubeSpan.additional_addresses")
      const prefixEnd = r.enter()
      const [ip, bits] = readAddress(r, "IPPrefix.ip", "IPPrefix.bits")
      r.leave(prefixEnd)
      additionalAddresses.push({ ip, bits })
    } else r.skip(r.wireType, field)
  }
  r.leave(outer)
  return { publicKey, address, additionalAddresses }
}

/** Reads the ControlPlane field (8) whose payload comes next, merged into `base`. */
const readControlPlane = (r: WireReader, base: ControlPlane | undefined): ControlPlane => {
  r.expect(2, "Affiliate.control_plane")
  const outer = r.enter()
  let apiServerPort = base?.apiServerPort ?? 0
  for (let field = r.nextField(); field !== 0; field = r.nextField()) {
    if (field === 1) apiServerPort = uint32Field(r, "ControlPlane.api_server_port")
    else r.skip(r.wireType, field)
  }
  r.leave(outer)
  return { apiServerPort }
}

const guarded = <A>(decode: () => A): Result.Result<A, string> => {
  try {
    return Result.succeed(decode())
  } catch (error) {
    if (error instanceof Malformed) return Result.fail(error.reason)
    throw error
  }
}

/**
 * Decodes an affiliate; a malformed encoding gives the reason.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeAffiliate = (buf: Uint8Array): Result.Result<AffiliateInfo, string> =>
  guarded(() => {
    const r = new WireReader(buf, 0, buf.length, goClient)
    let nodeId = ""
    const addresses: Array<Uint8Array> = []
    let hostname = ""
    let nodename = ""
    let machineType = ""
    let operatingSystem = ""
    let kubespan: KubeSpan | undefined
    let controlPlane: ControlPlane | undefined
    for (let field = r.nextField(); field !== 0; field = r.nextField()) {
      if (field === 1) nodeId = stringField(r, "Affiliate.node_id")
      else if (field === 2) addresses.push(bytesField(r, "Affiliate.addresses"))
      else if (field === 3) hostname = stringField(r, "Affiliate.hostname")
      else if (field === 4) nodename = stringField(r, "Affiliate.nodename")
      else if (field === 5) machineType = stringField(r, "Affiliate.machine_type")
      else if (field === 6) operatingSystem = stringField(r, "Affiliate.operating_system")
      else if (field === 7) kubespan = readKubeSpan(r, kubespan)
      else if (field === 8) controlPlane = readControlPlane(r, controlPlane)
      else r.skip(r.wireType, field)
    }
    return { nodeId, addresses, hostname, nodename, machineType, operatingSystem, kubespan, controlPlane }
  })

/**
 * Decodes an endpoint; a malformed encoding gives the reason.
 *
 * @category decoding
 * @since 0.1.0
 */
export const decodeEndpoint = (buf: Uint8Array): Result.Result<Endpoint, string> =>
  guarded(() => {
    const [ip, port] = readAddress(new WireReader(buf, 0, buf.length, goClient), "Endpoint.ip", "Endpoint.port")
    return { ip, port }
  })
