/**
 * The snapshot file shown as protobuf JSON, through the generated
 * `sidero.discovery.storage` schema: lowerCamelCase names, bytes as base64,
 * TTLs as `"3599s"`, legacy expirations as RFC 3339, defaults left out. This
 * is what the original's `snapshot-decoder` prints.
 *
 * @since 0.1.0
 */
import { fromBinary, toJsonString } from "@bufbuild/protobuf"
import { StateSnapshotSchema } from "../../gen/discovery/storage/discovery_pb.ts"

/**
 * The snapshot as protobuf JSON, indented by 2 spaces, with a trailing
 * newline. Throws when the bytes are not a valid `StateSnapshot`.
 *
 * @category encoding
 * @since 0.1.0
 */
export const toJson = (bytes: Uint8Array): string =>
  `${toJsonString(StateSnapshotSchema, fromBinary(StateSnapshotSchema, bytes), { prettySpaces: 2 })}\n`
