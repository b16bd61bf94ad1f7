/**
 * The landing listener in a real headless Chromium (Debian's /usr/bin/chromium
 * driven by playwright-core): the landing page renders and explains the
 * service, its link leads to /inspect, and the form shows a cluster's
 * affiliates with hostile IDs escaped. Skipped when Chromium is missing,
 * except in CI (CI=true), where a missing browser fails.
 */
import { existsSync } from "node:fs"
import { mkdtemp } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { BrowserContext } from "playwright-core"
import * as LandingServer from "../../../src/adapters/http/LandingServer.ts"
import { ClusterState } from "../../../src/core/server/ClusterState.ts"
import { endpoint, updateRequest } from "../../core/fixtures/discovery.ts"
import { browser, chromiumPath, skipBrowser as skip } from "./chromium.ts"
import { landing } from "./fixtures.ts"

const hostileId = "<script>window.__xss = 1</script>"

describe(skip ? `browser (skipped: ${chromiumPath} is missing; run .ci/install-chromium.sh)` : "browser", () => {
  if (skip) {
    console.warn(`browser test skipped: ${chromiumPath} is missing (install it with .ci/install-chromium.sh)`)
    it.skip("landing page and /inspect in headless Chromium", () => {})
    return
  }

  it("has Chromium (CI must install it with .ci/install-chromium.sh)", () => {
    assert.isTrue(existsSync(chromiumPath), `${chromiumPath} is missing`)
  })

  it.live(
    "renders the landing page, follows the link to /inspect and shows a cluster through the form",
    () =>
      Effect.gen(function* () {
        const state = yield* ClusterState
        yield* state.update(
          updateRequest({
            clusterId: "browser-cluster",
            affiliateId: hostileId,
            data: new Uint8Array([0xde, 0xad, 0xbe, 0xef]),
            endpoints: [endpoint(0xab)]
          })
        )
        yield* state.update(updateRequest({ clusterId: "browser-cluster", affiliateId: "node-2" }))
        const { port } = yield* LandingServer.LandingServer
        const { context } = yield* browser
        const shots = yield* Effect.promise(() => mkdtemp(join(tmpdir(), "discovery-screenshots-")))
        const page = yield* Effect.promise(() => context.newPage())
        const run = <A>(f: (context: BrowserContext) => Promise<A>) => Effect.promise(() => f(context))

        yield* run(() => page.goto(`http://127.0.0.1:${port}/`))
        assert.strictEqual(yield* run(() => page.title()), "Discovery service")
        // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what a reader sees
        const text = yield* run(() => page.locator("body").innerText())
        assert.include(text, "Talos-compatible cluster discovery service")
        assert.include(text, "AES-GCM")
        assert.include(text, "AES-ECB")
        assert.include(text, "never holds the key")
        yield* run(() => page.screenshot({ path: join(shots, "landing.png"), fullPage: true }))

        yield* run(() => page.getByRole("link", { name: "inspect a cluster" }).click())
        yield* run(() => page.waitForURL(`http://127.0.0.1:${port}/inspect`))
        yield* run(() => page.locator("#clusterID").fill("browser-cluster"))
        yield* run(() => page.getByRole("button", { name: "Inspect" }).click())
        yield* run(() => page.waitForURL(/clusterID=browser-cluster/))

        const ids = yield* run(() => page.locator(".affiliate-id").allInnerTexts())
        assert.sameMembers(ids, [hostileId, "node-2"])
        assert.isUndefined(yield* run(() => page.evaluate(() => (globalThis as { __xss?: number }).__xss)))
        assert.sameMembers(yield* run(() => page.locator(".data").allInnerTexts()), ["deadbeef", "empty"])
        assert.deepStrictEqual(yield* run(() => page.locator(".endpoint").allInnerTexts()), [`ab${"00".repeat(14)}ee`])
        assert.strictEqual(yield* run(() => page.locator("#clusterID").inputValue()), "browser-cluster")
        yield* run(() => page.screenshot({ path: join(shots, "inspect.png"), fullPage: true }))
        console.info(`browser test screenshots: ${shots}`)
      }).pipe(Effect.provide(landing())),
    60_000
  )
})
