/**
 * Test helpers for embedders: the core on `TestClock` with GC on demand.
 *
 * @since 0.1.0
 */
export * as TestDiscovery from "./TestDiscovery.ts"
