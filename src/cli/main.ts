#!/usr/bin/env node
/**
 * The `discovery-service` executable. It turns on Node's compile cache (in the
 * OS temp directory; `NODE_DISABLE_COMPILE_CACHE=1` turns it off) before the
 * rest of the program loads, so later starts skip most parsing and compiling,
 * then runs `program.ts`, with the heap settings of `heapTuning.ts`.
 *
 * @since 0.1.0
 */
import { enableCompileCache } from "node:module"
import { tuneHeap } from "./heapTuning.ts"

tuneHeap()
enableCompileCache()
await import("./program.ts")
