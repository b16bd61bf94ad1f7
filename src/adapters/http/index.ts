/**
 * The HTTP adapters, served with `@effect/platform-node`: the landing listener
 * (landing page, `/inspect`, `/stats`, probes), the Prometheus metrics
 * listener, the readiness signal behind `/readyz`, and the live view the
 * landing page follows (`LiveView`, fed by `LiveSampler`).
 *
 * @since 0.1.0
 */
export * as Health from "./Health.ts"
export * as LandingServer from "./LandingServer.ts"
export * as LiveSample from "./live/LiveSample.ts"
export * as LiveSampler from "./live/LiveSampler.ts"
export { LiveView } from "./live/LiveView.ts"
export * as MetricsServer from "./MetricsServer.ts"
export * as ProcessMetrics from "./ProcessMetrics.ts"
export * as RateLimiter from "./RateLimiter.ts"
export * as Readiness from "./Readiness.ts"
export * as StateMetrics from "./StateMetrics.ts"
