/**
 * TLS for the standalone server from a certificate file and a key file
 * (PROTOCOL.md §4.3): the pair is loaded at start (a bad pair fails the
 * start), then reloaded whenever either file changes, including when it is
 * replaced by a rename (the watch is added again on the new file). A reload
 * that fails is logged and the pair in service stays; new handshakes get the
 * newest good pair, open connections keep theirs.
 *
 * The watched pair is a `KeyPairSource`, which the http2 transport serves
 * directly (`setSecureContext` on its listener). For grpc-js it is wrapped in
 * certificate-provider credentials
 * (`experimental.createCertificateProviderServerCredentials`), which swap the
 * secure context of the running listener; such credentials remember their
 * source (`keyPairSourceOf`), so a server given them can use either
 * transport. grpc-js's own `FileWatcherCertificateProvider` is not used: it
 * polls, and on a file it cannot read or a pair Node rejects it takes the
 * listener out of service (every new connection is dropped) instead of
 * keeping the old pair.
 *
 * @since 0.1.0
 */
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as tls from "node:tls"
import * as grpc from "@grpc/grpc-js"
import type { Scope } from "effect"
import { Effect, Queue, Schema } from "effect"

/**
 * Where the PEM certificate chain and private key are. Both set means TLS;
 * both absent or empty means plaintext; only one of them is an error.
 *
 * @category models
 * @since 0.1.0
 */
export interface TlsOptions {
  /** PEM certificate chain, leaf first. */
  readonly certificatePath?: string | undefined
  /** PEM private key of the leaf certificate. */
  readonly keyPath?: string | undefined
}

/**
 * The TLS settings cannot be used: only one of the two paths is set, a file
 * cannot be read, or the files do not hold a matching certificate and key.
 *
 * @category errors
 * @since 0.1.0
 */
export class TlsError extends Schema.TaggedError<TlsError>()("TlsError", {
  message: Schema.String
}) {}

/**
 * A certificate chain and its private key, as PEM bytes.
 *
 * @category models
 * @since 0.1.0
 */
export interface KeyPair {
  readonly certificate: Buffer
  readonly privateKey: Buffer
}

/**
 * The two paths when TLS is asked for, `undefined` for plaintext, or a
 * TlsError when only one of them is set.
 *
 * @category constructors
 * @since 0.1.0
 */
export const paths = (
  options: TlsOptions
): { readonly certificatePath: string; readonly keyPath: string } | TlsError | undefined => {
  const certificatePath = options.certificatePath || undefined
  const keyPath = options.keyPath || undefined
  if (certificatePath === undefined && keyPath === undefined) return undefined
  if (certificatePath === undefined || keyPath === undefined) {
    return new TlsError({
      message: `TLS needs both a certificate path and a key path; only the ${certificatePath === undefined ? "key" : "certificate"} path is set`
    })
  }
  return { certificatePath, keyPath }
}

const reason = (error: unknown): string => (error instanceof Error ? error.message : String(error))

/**
 * Checks that the PEM bytes hold a certificate and the private key that
 * matches it, and that Node accepts them for a TLS server. Returns the
 * problem, or `undefined` when the pair is good.
 *
 * @category constructors
 * @since 0.1.0
 */
export const validate = (pair: KeyPair): string | undefined => {
  let certificate: crypto.X509Certificate
  try {
    certificate = new crypto.X509Certificate(pair.certificate)
  } catch (error) {
    return `invalid certificate: ${reason(error)}`
  }
  let key: crypto.KeyObject
  try {
    key = crypto.createPrivateKey(pair.privateKey)
  } catch (error) {
    return `invalid private key: ${reason(error)}`
  }
  if (!certificate.checkPrivateKey(key)) return "the private key does not match the certificate"
  try {
    tls.createSecureContext({ cert: pair.certificate, key: pair.privateKey })
  } catch (error) {
    return reason(error)
  }
  return undefined
}

/**
 * Reads and checks a key pair.
 *
 * @category constructors
 * @since 0.1.0
 */
export const load = (certificatePath: string, keyPath: string): Effect.Effect<KeyPair, TlsError> =>
  Effect.tryPromise({
    try: () => Promise.all([fs.promises.readFile(certificatePath), fs.promises.readFile(keyPath)]),
    catch: (error) => new TlsError({ message: `cannot read the TLS certificate or key: ${reason(error)}` })
  }).pipe(
    Effect.flatMap(([certificate, privateKey]) => {
      const pair = { certificate, privateKey }
      const problem = validate(pair)
      return problem === undefined
        ? Effect.succeed(pair)
        : Effect.fail(
            new TlsError({ message: `cannot use ${certificatePath} and ${keyPath} as a TLS key pair: ${problem}` })
          )
    })
  )

/**
 * A key pair that can change: the one in service, and the changes to come.
 *
 * @category models
 * @since 0.1.0
 */
export interface KeyPairSource {
  readonly current: KeyPair
  /** Calls `listener` with each new pair until the returned function is called. */
  subscribe(listener: (pair: KeyPair) => void): () => void
}

/** The watched pair: the newest good one and who wants to hear of the next. */
class WatchedKeyPair implements KeyPairSource {
  current: KeyPair
  readonly #listeners = new Set<(pair: KeyPair) => void>()

  constructor(pair: KeyPair) {
    this.current = pair
  }

  set(pair: KeyPair): void {
    this.current = pair
    for (const listener of this.#listeners) listener(pair)
  }

  subscribe(listener: (pair: KeyPair) => void): () => void {
    this.#listeners.add(listener)
    return () => this.#listeners.delete(listener)
  }
}

const toUpdate = (pair: KeyPair): grpc.experimental.IdentityCertificateUpdate => ({
  certificate: pair.certificate,
  privateKey: pair.privateKey
})

/** Serves a key pair source to grpc-js; listeners are told asynchronously, as grpc-js expects. */
class KeyPairProvider implements grpc.experimental.CertificateProvider {
  readonly #source: KeyPairSource
  readonly #listeners = new Map<grpc.experimental.IdentityCertificateUpdateListener, () => void>()

  constructor(source: KeyPairSource) {
    this.#source = source
  }

  addCaCertificateListener(): void {}
  removeCaCertificateListener(): void {}
  addIdentityCertificateListener(listener: grpc.experimental.IdentityCertificateUpdateListener): void {
    this.#listeners.set(
      listener,
      this.#source.subscribe((pair) => listener(toUpdate(pair)))
    )
    process.nextTick(() => {
      if (this.#listeners.has(listener)) listener(toUpdate(this.#source.current))
    })
  }
  removeIdentityCertificateListener(listener: grpc.experimental.IdentityCertificateUpdateListener): void {
    this.#listeners.get(listener)?.()
    this.#listeners.delete(listener)
  }
}

/** The source behind credentials made by `watchedCredentials`. */
const sources = new WeakMap<grpc.ServerCredentials, KeyPairSource>()

/**
 * The key pair source of credentials made by `watchedCredentials`, or
 * `undefined` for any other credentials.
 *
 * @category constructors
 * @since 0.1.0
 */
export const keyPairSourceOf = (credentials: grpc.ServerCredentials): KeyPairSource | undefined =>
  sources.get(credentials)

/** Waits on the real clock: file events happen in real time, whatever clock the fiber has. */
const realDelay = (millis: number): Effect.Effect<void> =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), millis)
    return Effect.sync(() => clearTimeout(timer))
  })

/** Events of one save usually come in a burst (truncate, write, rename); the reload waits for them to settle. */
const settleMillis = 100
/** How long to wait before watching a file again that is missing (deleted, or not written back yet), as the original does. */
const rewatchMillis = 5000

/**
 * The key pair of a certificate file and a key file, reloaded when either
 * changes, with the watches closed when the scope closes. Fails with
 * TlsError when the pair cannot be loaded at start. Reloads are logged
 * (`TLS certificate reloaded` at Info, `TLS certificate reload failed, keeping
 * the previous one` at Error, with the paths and the reason).
 *
 * @category constructors
 * @since 0.1.0
 */
export const watchedKeyPair = (
  certificatePath: string,
  keyPath: string
): Effect.Effect<KeyPairSource, TlsError, Scope.Scope> =>
  Effect.gen(function* () {
    const source = new WatchedKeyPair(yield* load(certificatePath, keyPath))
    const changed = yield* Queue.sliding<void>(1)
    // Each path's watcher and the file (inode) it watches; a file replaced by a rename is a new inode.
    const watchers = new Map<string, { readonly watcher: fs.FSWatcher; readonly inode: number }>()
    const signal = () => Queue.offerUnsafe(changed, undefined)

    const unwatch = (path: string) => {
      watchers.get(path)?.watcher.close()
      watchers.delete(path)
    }
    const inodeOf = (path: string): number | undefined => {
      try {
        return fs.statSync(path).ino
      } catch {
        return undefined
      }
    }
    /** Watches `path` unless the file there is already watched; false when it cannot be (missing). */
    const watch = (path: string): boolean => {
      const inode = inodeOf(path)
      if (inode === undefined) return false
      if (watchers.get(path)?.inode === inode) return true
      unwatch(path)
      try {
        const watcher = fs.watch(path, { persistent: false }, (event) => {
          // A renamed or deleted file is no longer the one at `path`: watch the path again on reload.
          if (event === "rename") unwatch(path)
          signal()
        })
        watcher.on("error", () => {
          unwatch(path)
          signal()
        })
        watchers.set(path, { watcher, inode })
        return true
      } catch {
        return false
      }
    }
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        for (const path of [...watchers.keys()]) unwatch(path)
      })
    )

    const paths = [certificatePath, keyPath]
    const rewatch = (): boolean => paths.map(watch).every(Boolean)
    rewatch()

    const annotations = { certificate_path: certificatePath, key_path: keyPath }
    const reload = load(certificatePath, keyPath).pipe(
      Effect.flatMap((pair) =>
        Effect.andThen(
          Effect.sync(() => source.set(pair)),
          Effect.logInfo("TLS certificate reloaded")
        )
      ),
      Effect.catch((error) =>
        Effect.logError("TLS certificate reload failed, keeping the previous one").pipe(
          Effect.annotateLogs("error", error.message)
        )
      ),
      Effect.annotateLogs(annotations)
    )

    const loop = Effect.gen(function* () {
      yield* Queue.take(changed)
      yield* realDelay(settleMillis)
      yield* Queue.clear(changed)
      // A file replaced by a rename may not exist for a moment: retry until both paths are watched.
      if (!rewatch()) yield* Effect.andThen(realDelay(rewatchMillis), Effect.sync(signal))
      yield* reload
    })
    yield* Effect.forkScoped(Effect.forever(loop))
    return source
  })

/**
 * grpc-js server credentials over `watchedKeyPair`: the same loading,
 * reloading and logging. `keyPairSourceOf` finds the pair behind them.
 *
 * @category constructors
 * @since 0.1.0
 */
export const watchedCredentials = (
  certificatePath: string,
  keyPath: string
): Effect.Effect<grpc.ServerCredentials, TlsError, Scope.Scope> =>
  Effect.map(watchedKeyPair(certificatePath, keyPath), (source) => {
    // The first argument is the identity (certificate) provider, whatever grpc-js's parameter name says.
    const credentials = grpc.experimental.createCertificateProviderServerCredentials(
      new KeyPairProvider(source),
      null,
      false
    )
    sources.set(credentials, source)
    return credentials
  })
