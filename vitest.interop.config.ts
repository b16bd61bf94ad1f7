import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/interop/**/*.test.ts"],
    environment: "node",
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 600_000
  }
})
