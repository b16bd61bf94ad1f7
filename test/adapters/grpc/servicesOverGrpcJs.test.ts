/**
 * The health and reflection suites once more, with grpc-js as the standalone
 * server's transport: their own files run over the default, http2, and are
 * written for it (they build servers through `serverLayer`).
 */
import { useTransport } from "./fixtures.ts"

useTransport("grpc-js")
await import("./health.test.ts")
await import("./reflection.test.ts")
