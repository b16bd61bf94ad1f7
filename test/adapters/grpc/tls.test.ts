import * as fs from "node:fs/promises"
import * as os from "node:os"
import * as path from "node:path"
import * as grpc from "@grpc/grpc-js"
import { assert, describe, it } from "@effect/vitest"
import { Effect, type Exit, Layer } from "effect"
import * as GrpcClient from "../../../src/adapters/grpc/GrpcClient.ts"
import * as GrpcServer from "../../../src/adapters/grpc/GrpcServer.ts"
import * as Tls from "../../../src/adapters/grpc/tls.ts"
import { TestDiscovery } from "../../../src/adapters/testing/index.ts"
import type { PemPair } from "./certificates.ts"
import { selfSigned } from "./certificates.ts"
import { captureLogs, eventually, failureOf, realSleep, transports, waitUntil } from "./fixtures.ts"

const tempDir = Effect.acquireRelease(
  Effect.promise(() => fs.mkdtemp(path.join(os.tmpdir(), "discovery-tls-"))),
  (dir) => Effect.promise(() => fs.rm(dir, { recursive: true, force: true }))
)

const write = (file: string, text: string) => Effect.promise(() => fs.writeFile(file, text))

/** Writes the pair to temporary files and renames them over the paths, as tools that replace files atomically do. */
const replace = (files: { readonly certificatePath: string; readonly keyPath: string }, pair: PemPair) =>
  Effect.promise(async () => {
    await fs.writeFile(`${files.keyPath}.new`, pair.privateKey)
    await fs.writeFile(`${files.certificatePath}.new`, pair.certificate)
    await fs.rename(`${files.keyPath}.new`, files.keyPath)
    await fs.rename(`${files.certificatePath}.new`, files.certificatePath)
  })

/** Calls Hello over a new TLS connection that trusts only `ca`; fails with the client's error. */
const helloTrusting = (port: number, ca: PemPair) =>
  Effect.scoped(
    Effect.gen(function* () {
      const api = yield* GrpcClient.make({
        endpoint: `127.0.0.1:${port}`,
        tls: grpc.credentials.createSsl(Buffer.from(ca.certificate)),
        callTimeout: "2 seconds",
        channelOptions: { "grpc.use_local_subchannel_pool": 1 }
      })
      return yield* api.hello({ clusterId: "c", clientVersion: "v1" })
    })
  )

describe("tls", () => {
  describe("paths", () => {
    it("asks for both paths or neither", () => {
      assert.isUndefined(Tls.paths({}))
      assert.isUndefined(Tls.paths({ certificatePath: "", keyPath: "" }))
      assert.deepStrictEqual(Tls.paths({ certificatePath: "c", keyPath: "k" }), { certificatePath: "c", keyPath: "k" })
      const onlyCertificate = Tls.paths({ certificatePath: "c" })
      assert.instanceOf(onlyCertificate, Tls.TlsError)
      assert.strictEqual(
        (onlyCertificate as Tls.TlsError).message,
        "TLS needs both a certificate path and a key path; only the certificate path is set"
      )
      assert.strictEqual(
        (Tls.paths({ certificatePath: "", keyPath: "k" }) as Tls.TlsError).message,
        "TLS needs both a certificate path and a key path; only the key path is set"
      )
    })
  })

  describe("validate", () => {
    it("accepts a matching pair and explains what is wrong with others", () => {
      const a = selfSigned("a")
      const b = selfSigned("b")
      const pair = (p: PemPair) => ({ certificate: Buffer.from(p.certificate), privateKey: Buffer.from(p.privateKey) })
      assert.isUndefined(Tls.validate(pair(a)))
      assert.strictEqual(
        Tls.validate({ certificate: pair(a).certificate, privateKey: pair(b).privateKey }),
        "the private key does not match the certificate"
      )
      assert.match(Tls.validate({ ...pair(a), certificate: Buffer.from("garbage") }) ?? "", /^invalid certificate: /)
      assert.match(Tls.validate({ ...pair(a), privateKey: Buffer.alloc(0) }) ?? "", /^invalid private key: /)
    })
  })

  for (const transport of transports) {
    describe(`GrpcServer with tls over ${transport}`, () => {
      it.live("refuses to start with only one path, a bad pair, or credentials as well", () =>
        Effect.gen(function* () {
          const dir = yield* tempDir
          const a = selfSigned("a")
          const b = selfSigned("b")
          const files = { certificatePath: path.join(dir, "tls.crt"), keyPath: path.join(dir, "tls.key") }
          yield* write(files.certificatePath, a.certificate)
          yield* write(files.keyPath, b.privateKey)
          const start = (options: GrpcServer.ServerOptions) =>
            Effect.exit(
              Layer.build(
                GrpcServer.layer({ address: "127.0.0.1:0", transport, ...options }).pipe(
                  Layer.provide(TestDiscovery.layer())
                )
              )
            )
          const messageOf = (exit: Exit.Exit<unknown, GrpcServer.BindError | GrpcServer.TlsError>) => {
            const error = failureOf(exit)
            assert.strictEqual(error._tag, "TlsError")
            return error.message
          }
          assert.strictEqual(
            messageOf(yield* start({ tls: { keyPath: files.keyPath } })),
            "TLS needs both a certificate path and a key path; only the key path is set"
          )
          assert.strictEqual(
            messageOf(yield* start({ tls: files })),
            `cannot use ${files.certificatePath} and ${files.keyPath} as a TLS key pair: the private key does not match the certificate`
          )
          assert.match(
            messageOf(yield* start({ tls: { ...files, keyPath: path.join(dir, "missing.key") } })),
            /^cannot read the TLS certificate or key: ENOENT/
          )
          yield* write(files.keyPath, a.privateKey)
          assert.strictEqual(
            messageOf(yield* start({ tls: files, credentials: grpc.ServerCredentials.createInsecure() })),
            "give either credentials or TLS certificate and key paths, not both"
          )
        })
      )

      it.live(
        "serves the pair from the files and reloads it when they change, keeping it when a new one is bad",
        () => {
          const { lines, layer } = captureLogs()
          return Effect.gen(function* () {
            const dir = yield* tempDir
            const [a, b, c, d] = [selfSigned("a"), selfSigned("b"), selfSigned("c"), selfSigned("d")]
            const files = { certificatePath: path.join(dir, "tls.crt"), keyPath: path.join(dir, "tls.key") }
            yield* write(files.certificatePath, a.certificate)
            yield* write(files.keyPath, a.privateKey)
            const { port } = yield* GrpcServer.make({
              address: "127.0.0.1:0",
              transport,
              tls: files,
              shutdownTimeout: "1 second"
            })

            // A client trusting the pair in service connects; one trusting another does not.
            assert.deepStrictEqual((yield* helloTrusting(port, a)).clientIp, Uint8Array.of(127, 0, 0, 1))
            assert.strictEqual(failureOf(yield* Effect.exit(helloTrusting(port, b)))._tag, "Unavailable")

            // Rewritten in place: the new pair is served to new connections.
            yield* write(files.keyPath, b.privateKey)
            yield* write(files.certificatePath, b.certificate)
            yield* eventually(helloTrusting(port, b))
            assert.strictEqual(failureOf(yield* Effect.exit(helloTrusting(port, a)))._tag, "Unavailable")

            // A broken pair is logged and B stays in service.
            yield* write(files.certificatePath, "not a certificate")
            yield* waitUntil(
              () => lines.some((line) => line.message === "TLS certificate reload failed, keeping the previous one"),
              "the failed reload is logged"
            )
            const failed = lines.find((line) => line.level === "ERROR")!
            assert.deepStrictEqual(
              [failed.annotations.certificate_path, failed.annotations.key_path],
              [files.certificatePath, files.keyPath]
            )
            assert.match(String(failed.annotations.error), /invalid certificate/)
            yield* helloTrusting(port, b)

            // Replaced by rename: the watch follows the new files, and keeps following them.
            yield* replace(files, c)
            yield* eventually(helloTrusting(port, c))
            yield* realSleep(200)
            yield* write(files.keyPath, d.privateKey)
            yield* write(files.certificatePath, d.certificate)
            yield* eventually(helloTrusting(port, d))
            assert.isTrue(lines.some((line) => line.level === "INFO" && line.message === "TLS certificate reloaded"))
          }).pipe(Effect.provide(TestDiscovery.layer()), Effect.provide(layer))
        }
      )
    })
  }

  describe("GrpcServer's transport for credentials", () => {
    it.live(
      "serves Tls.watchedCredentials over http2, as the command does, and other secure credentials over grpc-js",
      () =>
        Effect.gen(function* () {
          const dir = yield* tempDir
          const a = selfSigned("a")
          const files = { certificatePath: path.join(dir, "tls.crt"), keyPath: path.join(dir, "tls.key") }
          yield* write(files.certificatePath, a.certificate)
          yield* write(files.keyPath, a.privateKey)
          const watched = yield* Tls.watchedCredentials(files.certificatePath, files.keyPath)
          assert.isDefined(Tls.keyPairSourceOf(watched))
          const fromCommand = yield* GrpcServer.make({
            address: "127.0.0.1:0",
            credentials: watched,
            shutdownTimeout: "1 second"
          })
          assert.strictEqual(fromCommand.transport, "http2")
          yield* helloTrusting(fromCommand.port, a)

          const other = grpc.ServerCredentials.createSsl(null, [
            { private_key: Buffer.from(a.privateKey), cert_chain: Buffer.from(a.certificate) }
          ])
          assert.isUndefined(Tls.keyPairSourceOf(other))
          const custom = yield* GrpcServer.make({
            address: "127.0.0.1:0",
            credentials: other,
            shutdownTimeout: "1 second"
          })
          assert.strictEqual(custom.transport, "grpc-js")
          yield* helloTrusting(custom.port, a)

          const refused = failureOf(
            yield* Effect.exit(GrpcServer.make({ address: "127.0.0.1:0", credentials: other, transport: "http2" }))
          )
          assert.deepStrictEqual(
            [refused._tag, refused.message],
            [
              "TlsError",
              "the http2 transport serves TLS from certificate and key paths or Tls.watchedCredentials only; use the grpc-js transport for other credentials"
            ]
          )
        }).pipe(Effect.provide(TestDiscovery.layer()))
    )
  })
})
