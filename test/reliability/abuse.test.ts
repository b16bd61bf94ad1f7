/**
 * The short version of `npm run abuse`: the same attacks on a real service
 * process, small enough for a few seconds each, with assertions on what the
 * service must do (answer, refuse, close, stay up), never on timing.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import {
  hostileMessages,
  idleConnections,
  killDuringSaves,
  logFlood,
  pingFlood,
  unfinishedRequests
} from "../../bench/attacks.ts"
import { counter, type Service, startService } from "../../bench/serviceProcess.ts"
import { killAll } from "../../bench/support.ts"

const dir = mkdtempSync(join(tmpdir(), "discovery-reliability-"))
afterAll(() => {
  killAll()
  rmSync(dir, { recursive: true, force: true })
})

/** Runs `body` against a fresh service started with `flags`, which must then stop with exit code 0. */
const withService = async (flags: ReadonlyArray<string>, body: (service: Service) => Promise<void>) => {
  const service = await startService(dir, flags, { metrics: true })
  try {
    await body(service)
    assert.isTrue(service.alive(), "the service is still running")
  } finally {
    assert.strictEqual(await service.stop(), 0, "the service stops with exit code 0")
  }
}

describe("reliability under abuse (short runs)", { timeout: 60_000 }, () => {
  it("answers every malformed request on the five RPCs with a status and serves valid calls after each batch", () =>
    withService([], async (service) => {
      const figures = await hostileMessages(service.port, 3000, { batch: 1000 })
      assert.strictEqual(figures.sent, 3000)
      assert.deepStrictEqual(
        Object.keys(figures.outcomes).filter((outcome) => outcome.startsWith("reset") || outcome === "no answer"),
        []
      )
      assert.strictEqual(figures.validOk, figures.validAfterBatches)
      assert.strictEqual(figures.validAfterBatches, 3)
      assert.strictEqual(Object.keys(figures.kinds).length, 14, "every kind of hostile request was sent")
    }))

  // with two threads the budget is one for both: the eight connections land on either
  it.each([1, 2])(
    "refuses unfinished large requests past the request budget with UNAVAILABLE while serving another client (--io-threads %i)",
    (threads) =>
      withService(["--request-memory-budget=8MiB", `--io-threads=${threads}`], async (service) => {
        const figures = await unfinishedRequests(service, {
          connections: 8,
          streams: 10,
          messageBytes: 1024 * 1024,
          holdMillis: 1000
        })
        assert.strictEqual(figures.outcomes["held open"], 8, "the budget holds eight 1 MiB messages")
        assert.strictEqual(figures.outcomes.UNAVAILABLE, 72)
        assert.isAbove(figures.normalCalls, 0)
        assert.strictEqual(figures.normalOk, figures.normalCalls)
      })
  )

  it("closes silent, half-open and idle connections at their deadlines", () =>
    withService(["--handshake-timeout=300ms", "--idle-timeout=600ms"], async (service) => {
      const figures = await idleConnections(service, {
        silent: 30,
        halfPreface: 30,
        idleSessions: 30,
        waitMillis: 20_000,
        spread: 5
      })
      assert.deepStrictEqual(
        [figures.silentClosed, figures.halfPrefaceClosed, figures.idleSessionsClosed],
        [30, 30, 30]
      )
    }))

  it("sends a ping flood away with GOAWAY ENHANCE_YOUR_CALM too_many_pings", () =>
    withService([], async (service) => {
      const figures = await pingFlood(service.port, 1000)
      assert.deepStrictEqual(figures, {
        acknowledged: 3,
        goawayCode: 11,
        goawayData: "too_many_pings",
        sessionClosed: true
      })
    }))

  it("bounds the log lines of a client failing calls in a loop and counts the rest", () =>
    withService([], async (service) => {
      const figures = await logFlood(service, 1500, () =>
        counter(service, "discovery_server_log_lines_suppressed_total")
      )
      assert.strictEqual(figures.failed, figures.calls)
      assert.isAbove(figures.failed, 100)
      // A burst of 10, then 1 a second.
      assert.isAtMost(figures.failureLines, 10 + Math.ceil(figures.elapsedMillis / 1000))
      assert.isAtLeast(figures.failureLines + figures.suppressed, figures.failed)
    }))

  it("never leaves a corrupt snapshot when killed with SIGKILL during saves", async () => {
    const figures = await killDuringSaves(dir, { runs: 4, clusters: 1000 })
    assert.strictEqual(figures.corrupt, 0)
    assert.isAbove(figures.saved, 0, "the service saved in some runs, so kills could land in a save")
  })
})
