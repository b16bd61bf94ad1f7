/**
 * A real headless Chromium for the browser tests (Debian's /usr/bin/chromium
 * driven by playwright-core). Tests are skipped when it is missing, except in
 * CI (CI=true), where a missing browser fails.
 */
import { existsSync } from "node:fs"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import type { BrowserContext } from "playwright-core"
import { chromium } from "playwright-core"

/** Where the browser is. */
export const chromiumPath = "/usr/bin/chromium"

/** Whether the browser tests are skipped: no Chromium here, outside CI. */
export const skipBrowser = !existsSync(chromiumPath) && process.env.CI !== "true"

/** The flags this machine needs: no sandbox as root, no GPU, and no background traffic to Google. */
const chromiumArgs = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync"
]

/** Launches Chromium with a fresh profile; `close` closes it and removes the profile. */
export const launchBrowser = async (): Promise<{ context: BrowserContext; close: () => Promise<void> }> => {
  const profile = await mkdtemp(join(tmpdir(), "discovery-chromium-"))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    args: chromiumArgs,
    viewport: { width: 1100, height: 900 }
  })
  return {
    context,
    close: async () => {
      await context.close()
      await rm(profile, { recursive: true, force: true })
    }
  }
}

/** A browser closed (and its profile removed) with the scope. */
export const browser = Effect.acquireRelease(Effect.promise(launchBrowser), ({ close }) => Effect.promise(close))
