/**
 * The live view in a real headless Chromium, against the `discovery-service`
 * command: two instances on one Redis (each started as a child process), the
 * first with an I/O thread. The landing page shows one row per thread and,
 * when the second instance starts, a second row in the instance table; the
 * live `/inspect` page shows an affiliate sent over gRPC (to the other
 * instance) within 2 s, and removes it when it expires. Both pages are
 * served on the landing port and on the gRPC port. Screenshots go to
 * `SCREENSHOTS_DIR` when set (the README's come from there).
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { mkdirSync, mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Stream } from "effect"
import type { BrowserContext, Page } from "playwright-core"
import * as GrpcClient from "../../src/adapters/grpc/GrpcClient.ts"
import { launchBrowser, skipBrowser } from "../adapters/http/chromium.ts"
import { redisForTests } from "../adapters/redis/redisServer.ts"
import { endpoint, updateRequest } from "../core/fixtures/discovery.ts"
import { listening } from "./listening.ts"

const root = resolve(import.meta.dirname, "../..")

interface Instance {
  readonly child: ChildProcess
  readonly port: number
  readonly landingPort: number
}

const startInstance = async (redisUrl: string, ioThreads: string): Promise<Instance> => {
  const child = spawn(
    process.execPath,
    [
      "src/cli/main.ts",
      "--addr=127.0.0.1:0",
      "--landing-addr=127.0.0.1:0",
      "--metrics-addr=",
      `--state=${redisUrl}`,
      `--io-threads=${ioThreads}`,
      "--gc-interval=1s"
    ],
    { cwd: root, stdio: ["ignore", "pipe", "pipe"] }
  )
  const { ports } = await listening(child)
  return { child, port: ports.port!, landingPort: ports.landing_port! }
}

const stopInstance = async (instance: Instance | undefined) => {
  if (instance === undefined || instance.child.exitCode !== null) return
  instance.child.kill("SIGTERM")
  await once(instance.child, "exit")
}

const sendUpdate = (port: number, ttlSeconds: number, version = 0) =>
  Effect.runPromise(
    Effect.scoped(
      Effect.flatMap(GrpcClient.make({ endpoint: `127.0.0.1:${port}`, tls: false }), (api) =>
        api.affiliateUpdate(
          updateRequest({
            clusterId: "live-cluster",
            affiliateId: "node-live",
            data: new Uint8Array([1, 2, 3, 4, 5 + version]),
            endpoints: [endpoint(0x42)],
            ttl: Duration.seconds(ttlSeconds)
          })
        )
      )
    )
  )

/** What the page reports as errors (a script that throws, a policy that blocks, a resource not found). */
const pageErrors = (page: Page): Array<string> => {
  const errors: Array<string> = []
  page.on("pageerror", (error) => errors.push(error.message))
  page.on("console", (message) => {
    if (message.type() === "error") errors.push(message.text())
  })
  return errors
}

const rows = (page: Page, selector: string) => page.locator(selector).count()

/**
 * Waits until `read` gives what `done` accepts (from outside the page: its
 * policy forbids the evaluated strings of `waitForFunction`).
 */
const waitUntil = async <A>(read: () => Promise<A>, done: (value: A) => boolean, timeout = 5000): Promise<A> => {
  const until = performance.now() + timeout
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (performance.now() > until) throw new Error(`still ${JSON.stringify(value)} after ${timeout} ms`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const waitForRows = (page: Page, selector: string, count: number) =>
  waitUntil(
    () => rows(page, selector),
    (found) => found === count
  )

const waitForText = (page: Page, selector: string, done: (text: string) => boolean) =>
  waitUntil(async () => (await page.locator(selector).textContent()) ?? "", done)

describe.skipIf(skipBrowser)("live view in Chromium", () => {
  const redis = redisForTests()
  const shots = process.env.SCREENSHOTS_DIR ?? mkdtempSync(join(tmpdir(), "discovery-live-screenshots-"))
  let first: Instance | undefined
  let second: Instance | undefined
  let browser: { context: BrowserContext; close: () => Promise<void> } | undefined

  beforeAll(async () => {
    mkdirSync(shots, { recursive: true })
    first = await startInstance(redis.server.url, "2")
    browser = await launchBrowser()
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await Promise.all([stopInstance(first), stopInstance(second)])
    console.info(`live view screenshots: ${shots}`)
  }, 30_000)

  it("shows the threads, then a second instance when it starts", async () => {
    const page = await browser!.context.newPage()
    await page.goto(`http://127.0.0.1:${first!.landingPort}/`)
    await waitForText(page, "#live-status", (text) => text === "live")
    await waitForRows(page, ".thread-row", 2)
    await waitForRows(page, ".instance-row", 1)
    second = await startInstance(redis.server.url, "1")
    const started = performance.now()
    await waitForRows(page, ".instance-row", 2)
    console.info(`second instance shown after ${Math.round(performance.now() - started)} ms`)
    const names = await page.locator(".instance-name").allInnerTexts()
    assert.lengthOf(new Set(names), 2)
    assert.strictEqual(await rows(page, ".instance-row.self"), 1)
    assert.strictEqual(await page.locator("#live-backend").textContent(), "available")
    await page.close()
  }, 30_000)

  it("shows an update sent over gRPC within 2 s on the live /inspect page, and removes it when it expires", async () => {
    const page = await browser!.context.newPage()
    const errors = pageErrors(page)
    // the page is served by the gRPC port of the first instance, the update goes to the second
    await page.goto(`http://127.0.0.1:${first!.port}/inspect?clusterID=live-cluster`)
    await waitForText(page, "#live-status", (text) => text.startsWith("Live"))
    assert.strictEqual(await rows(page, ".no-affiliates"), 1)
    const sent = performance.now()
    await sendUpdate(second!.port, 4)
    await page.locator(".affiliate-id", { hasText: "node-live" }).first().waitFor({ timeout: 2000 })
    const shown = Math.round(performance.now() - sent)
    console.info(`update shown after ${shown} ms`)
    assert.isBelow(shown, 2000)
    assert.include(await page.locator(".known").textContent(), "5 bytes of data, 1 endpoint")
    assert.match((await page.locator(".time-left").textContent()) ?? "", /expires in \d+ s/)
    assert.deepStrictEqual(await page.locator(".endpoint").allInnerTexts(), [`42${"00".repeat(14)}ee`])
    assert.include(await page.locator(".history .cause").allInnerTexts(), "created")
    await page.screenshot({ path: join(shots, "inspect-live.png"), fullPage: true })
    // 4 s of TTL, a GC pass each second, a read each second
    await page.locator(".no-affiliates").waitFor({ timeout: 8000 })
    assert.include(await page.locator(".history .cause").allInnerTexts(), "affiliate_expired")
    assert.deepStrictEqual(errors, [])
    await page.close()
  }, 30_000)

  it("keeps the landing page's figures and charts live on either port", async () => {
    // two watchers on the first instance, and a node updating through it every 100 ms
    const watchers = Effect.runFork(
      Effect.scoped(
        Effect.flatMap(GrpcClient.make({ endpoint: `127.0.0.1:${first!.port}`, tls: false }), (api) =>
          Effect.all(
            [1, 2].map(() => Stream.runDrain(api.watch({ clusterId: "live-cluster" }))),
            {
              concurrency: "unbounded"
            }
          )
        )
      )
    )
    try {
      for (const port of [first!.landingPort, first!.port]) {
        const page = await browser!.context.newPage()
        const errors = pageErrors(page)
        await page.goto(`http://127.0.0.1:${port}/`)
        await waitForText(page, "#live-status", (text) => text === "live")
        for (let update = 0; update < 20; update++) {
          await sendUpdate(first!.port, 60, update + 1)
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
        await waitForText(page, "#live-affiliates", (text) => text === "1")
        await waitForText(page, "#live-watches", (text) => text === "2")
        assert.strictEqual(await rows(page, ".chart canvas"), 3)
        assert.deepStrictEqual(errors, [])
        if (port === first!.landingPort) {
          await page.screenshot({ path: join(shots, "landing-live.png"), fullPage: true })
        }
        await page.close()
      }
    } finally {
      await Effect.runPromise(Fiber.interrupt(watchers))
    }
  }, 30_000)
})
