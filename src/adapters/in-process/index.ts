/**
 * In-process adapter: use the discovery service without a transport.
 *
 * @since 0.1.0
 */
export * as InProcess from "./InProcess.ts"
