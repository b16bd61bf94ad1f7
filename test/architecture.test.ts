import { readdirSync, readFileSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import { assert, describe, it } from "@effect/vitest"

const root = resolve(import.meta.dirname, "..")

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)))

const importsOf = (file: string): Array<string> =>
  [...readFileSync(join(root, file), "utf8").matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)].map((m) => m[1]!)

const resolved = (file: string, specifier: string): string =>
  specifier.startsWith(".") ? relative(root, resolve(root, file, "..", specifier)) : specifier

const violations = (dir: string, allowed: (target: string) => boolean): Array<string> =>
  sourceFiles(dir).flatMap((file) =>
    importsOf(file)
      .map((specifier) => resolved(file, specifier))
      .filter((target) => !allowed(target))
      .map((target) => `${file} imports ${target}`)
  )

describe("architecture", () => {
  it("keeps the core free of transports, file systems, networks, adapters and generated code", () => {
    const allowed = (target: string) =>
      target === "effect" ||
      target.startsWith("effect/") ||
      target.startsWith("src/core/") ||
      target.startsWith("src/ports/")
    assert.deepStrictEqual(violations("src/core", allowed), [])
  })

  it("keeps the ports dependent on effect alone", () => {
    const allowed = (target: string) =>
      target === "effect" || target.startsWith("effect/") || target.startsWith("src/ports/")
    assert.deepStrictEqual(violations("src/ports", allowed), [])
  })

  it("keeps adapters independent of each other", () => {
    const adapters = readdirSync(join(root, "src/adapters"), { withFileTypes: true }).filter((e) => e.isDirectory())
    const found = adapters.flatMap((adapter) =>
      violations(
        `src/adapters/${adapter.name}`,
        (target) => !target.startsWith("src/adapters/") || target.startsWith(`src/adapters/${adapter.name}/`)
      )
    )
    assert.deepStrictEqual(found, [])
  })

  it("never imports test code from the sources", () => {
    assert.deepStrictEqual(
      violations("src", (target) => !target.startsWith("test/")),
      []
    )
  })

  it("detects a forbidden import (the guard itself works)", () => {
    const allowed = (target: string) => target === "effect"
    assert.isTrue(importsOf("test/architecture.test.ts").some((s) => !allowed(s)))
  })
})

describe("package entry points", () => {
  const reachable = (entry: string): Set<string> => {
    const seen = new Set<string>()
    const visit = (file: string) => {
      if (seen.has(file)) return
      seen.add(file)
      for (const specifier of importsOf(file)) {
        const target = resolved(file, specifier)
        if (target.startsWith("src/")) visit(target)
        else seen.add(target)
      }
    }
    visit(entry)
    return seen
  }

  it("lets the root entry load without gRPC or the network", () => {
    const modules = [...reachable("src/index.ts")]
    assert.deepStrictEqual(
      modules.filter((m) => m.startsWith("@grpc/") || m.startsWith("node:") || m.startsWith("src/adapters/")),
      []
    )
  })
})
