/**
 * The plaintext payloads a discovery client seals: `sidero.discovery.client`
 * Affiliate and Endpoint, as plain objects, with a hand-written protobuf
 * codec. Encoding is canonical (ascending field order, default scalars left
 * out, present sub-messages always written), which is what the Go client's
 * MarshalVT produces; the interop vectors check it byte for byte. Decoding
 * follows Go's UnmarshalVT: unknown fields are skipped, repeated sub-messages
 * merge, a wrong wire type or a truncated field is an error.
 *
 * @since 0.1.0
 */
import { Result } from "effect"

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
const textEncoder = new TextEncoder()
// Go does not check UTF-8 in these strings; invalid bytes become U+FFFD here.
const textDecoder = new TextDecoder("utf-8", { fatal: false, ignoreBOM: true })

const WireVarint = 0
const Wire64 = 1
const WireLen = 2
const WireStartGroup = 3
const WireEndGroup = 4
const Wire32 = 5

class Writer {
  private readonly parts: Array<number | Uint8Array> = []
  private size = 0

  varint(value: number): void {
    // value is a uint32 or a length: at most 5 bytes
    let v = value >>> 0
    while (v > 0x7f) {
      this.parts.push((v & 0x7f) | 0x80)
      v >>>= 7
      this.size++
    }
    this.parts.push(v)
    this.size++
  }

  bytes(field: number, value: Uint8Array): void {
    this.varint((field << 3) | WireLen)
    this.varint(value.length)
    this.parts.push(value)
    this.size += value.length
  }

  string(field: number, value: string | undefined): void {
    if (value !== undefined && value !== "") this.bytes(field, textEncoder.encode(value))
  }

  optionalBytes(field: number, value: Uint8Array | undefined): void {
    if (value !== undefined && value.length > 0) this.bytes(field, value)
  }

  uint32(field: number, value: number | undefined): void {
    if (value !== undefined && value >>> 0 !== 0) {
      this.varint((field << 3) | WireVarint)
      this.varint(value)
    }
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.size)
    let offset = 0
    for (const part of this.parts) {
      if (typeof part === "number") out[offset++] = part
      else {
        out.set(part, offset)
        offset += part.length
      }
    }
    return out
  }
}

const encodeKubeSpan = (kubespan: NonNullable<AffiliateInfoInit["kubespan"]>): Uint8Array => {
  const w = new Writer()
  w.string(1, kubespan.publicKey)
  w.optionalBytes(2, kubespan.address)
  for (const prefix of kubespan.additionalAddresses ?? []) {
    const p = new Writer()
    p.optionalBytes(1, prefix.ip)
    p.uint32(2, prefix.bits)
    w.bytes(3, p.finish())
  }
  return w.finish()
}

/**
 * The canonical protobuf encoding of an affiliate, as Go's MarshalVT writes it.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeAffiliate = (affiliate: AffiliateInfoInit): Uint8Array => {
  const w = new Writer()
  w.string(1, affiliate.nodeId)
  for (const address of affiliate.addresses ?? []) w.bytes(2, address)
  w.string(3, affiliate.hostname)
  w.string(4, affiliate.nodename)
  w.string(5, affiliate.machineType)
  w.string(6, affiliate.operatingSystem)
  if (affiliate.kubespan !== undefined) w.bytes(7, encodeKubeSpan(affiliate.kubespan))
  if (affiliate.controlPlane !== undefined) {
    const c = new Writer()
    c.uint32(1, affiliate.controlPlane.apiServerPort)
    w.bytes(8, c.finish())
  }
  return w.finish()
}

/**
 * The canonical protobuf encoding of an endpoint: `0A len ip` when the ip is
 * not empty, then `10 varint(port)` when the port is not 0.
 *
 * @category encoding
 * @since 0.1.0
 */
export const encodeEndpoint = (endpoint: EndpointInit): Uint8Array => {
  const w = new Writer()
  w.optionalBytes(1, endpoint.ip)
  w.uint32(2, endpoint.port)
  return w.finish()
}

class DecodeError extends Error {}

class Reader {
  offset = 0
  readonly buf: Uint8Array
  constructor(buf: Uint8Array) {
    this.buf = buf
  }

  get done(): boolean {
    return this.offset >= this.buf.length
  }

  // Reads a varint of at most 10 bytes; returns its low 53 bits as a number
  // (lengths and tags) and its low 32 bits (uint32 fields, truncated like Go).
  varint(): { readonly value: number; readonly low32: number } {
    let value = 0
    let low32 = 0
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.offset >= this.buf.length) throw new DecodeError("unexpected end of data")
      const b = this.buf[this.offset++]!
      if (shift < 53) value += (b & 0x7f) * 2 ** shift
      if (shift < 32) low32 = (low32 | ((b & 0x7f) << shift)) >>> 0
      if (b < 0x80) return { value, low32 }
    }
    throw new DecodeError("varint overflow")
  }

  tag(): { readonly field: number; readonly wire: number } {
    const { value } = this.varint()
    const field = Math.floor(value / 8)
    if (field <= 0 || field > 0x1fffffff) throw new DecodeError(`illegal field number ${field}`)
    return { field, wire: value % 8 }
  }

  take(n: number): Uint8Array {
    if (n < 0 || this.offset + n > this.buf.length) throw new DecodeError("unexpected end of data")
    const out = this.buf.subarray(this.offset, this.offset + n)
    this.offset += n
    return out
  }

  lengthDelimited(): Uint8Array {
    return this.take(this.varint().value)
  }

  skip(wire: number): void {
    switch (wire) {
      case WireVarint:
        this.varint()
        return
      case Wire64:
        this.take(8)
        return
      case WireLen:
        this.lengthDelimited()
        return
      case Wire32:
        this.take(4)
        return
      case WireStartGroup:
        // like Go, the end group's field number is not checked
        for (;;) {
          const inner = this.tag()
          if (inner.wire === WireEndGroup) return
          this.skip(inner.wire)
        }
      default:
        throw new DecodeError(`illegal wire type ${wire}`)
    }
  }
}

const expectWire = (field: number, wire: number, expected: number) => {
  if (wire !== expected) throw new DecodeError(`wrong wire type ${wire} for field ${field}`)
}

const bytesField = (r: Reader, field: number, wire: number): Uint8Array => {
  expectWire(field, wire, WireLen)
  return r.lengthDelimited().slice()
}

const stringField = (r: Reader, field: number, wire: number): string => {
  expectWire(field, wire, WireLen)
  return textDecoder.decode(r.lengthDelimited())
}

const uint32Field = (r: Reader, field: number, wire: number): number => {
  expectWire(field, wire, WireVarint)
  return r.varint().low32
}

const decodeIpPrefix = (buf: Uint8Array): IpPrefix => {
  const r = new Reader(buf)
  let ip = empty
  let bits = 0
  while (!r.done) {
    const { field, wire } = r.tag()
    if (field === 1) ip = bytesField(r, field, wire)
    else if (field === 2) bits = uint32Field(r, field, wire)
    else r.skip(wire)
  }
  return { ip, bits }
}

const decodeKubeSpan = (buf: Uint8Array, base: KubeSpan | undefined): KubeSpan => {
  const r = new Reader(buf)
  let publicKey = base?.publicKey ?? ""
  let address = base?.address ?? empty
  const additionalAddresses = [...(base?.additionalAddresses ?? [])]
  while (!r.done) {
    const { field, wire } = r.tag()
    if (field === 1) publicKey = stringField(r, field, wire)
    else if (field === 2) address = bytesField(r, field, wire)
    else if (field === 3) additionalAddresses.push(decodeIpPrefix(bytesField(r, field, wire)))
    else r.skip(wire)
  }
  return { publicKey, address, additionalAddresses }
}

const decodeControlPlane = (buf: Uint8Array, base: ControlPlane | undefined): ControlPlane => {
  const r = new Reader(buf)
  let apiServerPort = base?.apiServerPort ?? 0
  while (!r.done) {
    const { field, wire } = r.tag()
    if (field === 1) apiServerPort = uint32Field(r, field, wire)
    else r.skip(wire)
  }
  return { apiServerPort }
}

const guarded = <A>(decode: () => A): Result.Result<A, string> => {
  try {
    return Result.succeed(decode())
  } catch (error) {
    if (error instanceof DecodeError) return Result.fail(error.message)
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
    const r = new Reader(buf)
    let nodeId = ""
    const addresses: Array<Uint8Array> = []
    let hostname = ""
    let nodename = ""
    let machineType = ""
    let operatingSystem = ""
    let kubespan: KubeSpan | undefined
    let controlPlane: ControlPlane | undefined
    while (!r.done) {
      const { field, wire } = r.tag()
      switch (field) {
        case 1:
          nodeId = stringField(r, field, wire)
          break
        case 2:
          addresses.push(bytesField(r, field, wire))
          break
        case 3:
          hostname = stringField(r, field, wire)
          break
        case 4:
          nodename = stringField(r, field, wire)
          break
        case 5:
          machineType = stringField(r, field, wire)
          break
        case 6:
          operatingSystem = stringField(r, field, wire)
          break
        case 7:
          kubespan = decodeKubeSpan(bytesField(r, field, wire), kubespan)
          break
        case 8:
          controlPlane = decodeControlPlane(bytesField(r, field, wire), controlPlane)
          break
        default:
          r.skip(wire)
      }
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
    const r = new Reader(buf)
    let ip = empty
    let port = 0
    while (!r.done) {
      const { field, wire } = r.tag()
      if (field === 1) ip = bytesField(r, field, wire)
      else if (field === 2) port = uint32Field(r, field, wire)
      else r.skip(wire)
    }
    return { ip, port }
  })
