import { readdirSync, readFileSync } from "node:fs"
import { join, relative, resolve } from "node:path"
import { assert, describe, it } from "@effect/vitest"

const root = resolve(import.meta.dirname, "..")

const sourceFiles = (dir: string): Array<string> =>
  readdirSync(join(root, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => relative(root, join(entry.parentPath, entry.name)))

const importsIn = (text: string): Array<string> =>
  [...text.matchAll(/(?:from|import)\s*\(?\s*["']([^"']+)["']/g)].map((m) => m[1]!)

const importsOf = (file: string): Array<string> => importsIn(readFileSync(join(root, file), "utf8"))

const coreAllowed = (target: string) =>
  target === "effect" ||
  target.startsWith("effect/") ||
  target.startsWith("src/core/") ||
  target.startsWith("src/ports/")

const resolved = (file: string, specifier: string): string =>
  specifier.startsWith(".") ? relative(root, resolve(root, file, "..", specifier)) : specifier

const violations = (dir: string, allowed: (target: string, file: string) => boolean): Array<string> =>
  sourceFiles(dir).flatMap((file) =>
    importsOf(file)
      .map((specifier) => resolved(file, specifier))
      .filter((target) => !allowed(target, file))
      .map((target) => `${file} imports ${target}`)
  )

/** The relative imports of each of `files` (type-only ones and re-exports included), read with `read`. */
const importGraph = (files: ReadonlyArray<string>, read: (file: string) => string): Map<string, Array<string>> =>
  new Map(
    files.map((file) => [
      file,
      importsIn(read(file))
        .filter((specifier) => specifier.startsWith("."))
        .map((specifier) => resolved(file, specifier))
    ])
  )

/**
 * The cycles a depth-first walk of `graph` closes, each as the files along it
 * back to its first: at least one through every group of files that import
 * each other, none when there is no such group.
 */
const cyclesIn = (graph: ReadonlyMap<string, ReadonlyArray<string>>): Array<Array<string>> => {
  const cycles: Array<Array<string>> = []
  const finished = new Set<string>()
  const path: Array<string> = []
  const visit = (file: string): void => {
    path.push(file)
    for (const target of graph.get(file) ?? []) {
      const onPath = path.indexOf(target)
      if (onPath >= 0) cycles.push([...path.slice(onPath), target])
      else if (!finished.has(target)) visit(target)
    }
    path.pop()
    finished.add(file)
  }
  for (const file of [...graph.keys()].sort()) if (!finished.has(file)) visit(file)
  return cycles
}

describe("architecture", () => {
  it("keeps the core server free of transports, file systems, networks, adapters and generated code", () => {
    assert.deepStrictEqual(violations("src/core/server", coreAllowed), [])
  })

  it("lets the client core use only node:crypto beyond that", () => {
    const allowed = (target: string) => coreAllowed(target) || target === "node:crypto"
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

  it("has no import cycles in src, type-only imports included", () => {
    const graph = importGraph(sourceFiles("src"), (file) => readFileSync(join(root, file), "utf8"))
    assert.deepStrictEqual(cyclesIn(graph), [])
  })

  it("detects a planted import cycle (the cycle check itself works)", () => {
    const planted = new Map([
      ["src/core/a.ts", 'import type { B } from "./server/b.ts"\nimport { Effect } from "effect"'],
      ["src/core/server/b.ts", 'export { c } from "../c.ts"'],
      ["src/core/c.ts", 'import { a } from "./a.ts"'],
      ["src/core/d.ts", 'import { a } from "./a.ts"']
    ])
    const graph = importGraph([...planted.keys()], (file) => planted.get(file)!)
    assert.deepStrictEqual(cyclesIn(graph), [
      ["src/core/a.ts", "src/core/server/b.ts", "src/core/c.ts", "src/core/a.ts"]
    ])
  })

  it("detects forbidden imports (the guard itself works)", () => {
    const text = [
      'import * as grpc from "@grpc/grpc-js"',
      'import { readFile } from "node:fs"',
      'import type { X } from "../../adapters/grpc/GrpcServer.ts"',
      'const lazy = await import("node:http2")',
      'import { Effect } from "effect"'
    ].join("\n")
    const targets = importsIn(text).map((specifier) => resolved("src/core/server/Example.ts", specifier))
    assert.deepStrictEqual(
      targets.filter((target) => !coreAllowed(target)),
      ["@grpc/grpc-js", "node:fs", "src/adapters/grpc/GrpcServer.ts", "node:http2"]
    )
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
