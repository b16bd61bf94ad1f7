import { execFile } from "node:child_process"
import { writeFileSync } from "node:fs"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { toJson } from "../../src/adapters/storage/SnapshotJson.ts"
import {
  affiliateMessage,
  clusterMessage,
  duration,
  endpointMessage,
  hex,
  stateBinary,
  tempDir,
  timestamp,
  utf8
} from "../storage/fixtures/snapshots.ts"

const run = promisify(execFile)
const command = resolve(import.meta.dirname, "..", "..", "src", "cli", "snapshotDecoder.ts")
const workedExample = hex("0A 18 0A 01 63 12 13 0A 01 78 1A 01 64 22 07 12 01 65 1A 02 08 1E 2A 02 08 3C")

const { dir, remove } = tempDir()
afterAll(remove)

describe("snapshot-decoder command", () => {
  it("prints protobuf JSON: lowerCamelCase, base64 data, TTLs as seconds, expirations in RFC 3339", () => {
    const bytes = stateBinary([
      clusterMessage({
        id: "c",
        affiliates: [
          affiliateMessage({
            id: "x",
            data: utf8("d"),
            ttl: duration(3599),
            endpoints: [endpointMessage({ data: utf8("e"), expiration: timestamp(Date.UTC(2024, 0, 31, 12)) })]
          })
        ]
      }),
      clusterMessage({ id: "empty" })
    ])
    const json = toJson(bytes)
    assert.isTrue(json.endsWith("}\n"))
    assert.deepStrictEqual(JSON.parse(json), {
      clusters: [
        {
          id: "c",
          affiliates: [
            {
              id: "x",
              data: "ZA==",
              endpoints: [{ data: "ZQ==", expiration: "2024-01-31T12:00:00Z" }],
              ttl: "3599s"
            }
          ]
        },
        { id: "empty" }
      ]
    })
    assert.include(json, '\n  "clusters": [\n')
  })

  it("runs as a command with the original's flag, in either dash style", { timeout: 20_000 }, async () => {
    const path = join(dir, "state.binpb")
    writeFileSync(path, workedExample)
    for (const args of [["--snapshot-path", path], [`-snapshot-path=${path}`]]) {
      const { stdout } = await run(process.execPath, [command, ...args])
      assert.strictEqual(stdout, toJson(workedExample))
    }
  })

  it("reports an error with exit status 1", { timeout: 20_000 }, async () => {
    const path = join(dir, "truncated.binpb")
    writeFileSync(path, workedExample.subarray(0, 10))
    const missing = join(dir, "missing.binpb")
    for (const file of [path, missing]) {
      const failure = await run(process.execPath, [command, "--snapshot-path", file]).then(
        () => undefined,
        (error: { code: number; stdout: string; stderr: string }) => error
      )
      assert.isDefined(failure)
      assert.strictEqual(failure!.code, 1)
      assert.strictEqual(failure!.stdout, "")
      assert.match(failure!.stderr, /^error: /)
    }
  })
})
