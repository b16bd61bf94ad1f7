/**
 * Snapshot storage: the state snapshot in a file, replaced atomically, and its
 * protobuf JSON form. The in-memory store is `SnapshotStore.layerMemory` on
 * the port.
 *
 * @since 0.1.0
 */
export * as FileSnapshotStore from "./FileSnapshotStore.ts"
export * as SnapshotJson from "./SnapshotJson.ts"
