/**
 * The Node HTTP listener under both HTTP adapters: listen addresses written
 * the Go way (`:3001`, `127.0.0.1:0`, `[::1]:2122`, so the original's flag
 * values carry over), and a router served on a `node:http` server that closes
 * with its layer.
 *
 * @since 0.1.0
 */
import { createServer } from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Duration, Effect, Layer } from "effect"
import { HttpRouter, HttpServer, HttpServerError } from "effect/http"

/**
 * Where a listener binds: no host means every interface (Node binds `::`
 * dual-stack, or `0.0.0.0` on hosts without IPv6).
 *
 * @category models
 * @since 0.1.0
 */
export interface ListenOptions {
  readonly host?: string
  readonly port: number
}

/**
 * Parses `host:port`, `:port` or `[ipv6]:port`; `undefined` when the text is
 * not one (no port, or a port outside 0–65535). Port 0 picks a free port.
 *
 * @category parsing
 * @since 0.1.0
 */
export const parseListenAddress = (address: string): ListenOptions | undefined => {
  const colon = address.lastIndexOf(":")
  if (colon === -1) return undefined
  let host = address.slice(0, colon)
  const portText = address.slice(colon + 1)
  if (!/^\d{1,5}$/.test(portText)) return undefined
  const port = Number(portText)
  if (port > 65535) return undefined
  if (host.startsWith("[") && host.endsWith("]")) host = host.slice(1, -1)
  else if (host.includes(":")) return undefined
  return host === "" ? { port } : { host, port }
}

/**
 * A Go-style listen address as Node listen options, or a `ServeError`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const listenOptions = (address: string): Effect.Effect<ListenOptions, HttpServerError.ServeError> => {
  const parsed = parseListenAddress(address)
  return parsed === undefined
    ? Effect.fail(
        new HttpServerError.ServeError({ cause: new Error(`invalid listen address ${JSON.stringify(address)}`) })
      )
    : Effect.succeed(parsed)
}

/**
 * Serves `routes` on a Node HTTP/1.1 server at `address`; the server closes
 * with the layer's scope, giving open requests `shutdownTimeout` to finish.
 *
 * @category constructors
 * @since 0.1.0
 */
export const serveOn = <A, E, R>(
  appLayer: Layer.Layer<A, E, R>,
  address: string,
  shutdownTimeout: Duration.Input | undefined
) =>
  HttpRouter.serve(appLayer, { disableLogger: true, disableListenLog: true }).pipe(
    Layer.provide(
      Layer.unwrap(
        Effect.map(listenOptions(address), (listen) =>
          NodeHttpServer.layer(() => createServer(), {
            ...listen,
            gracefulShutdownTimeout: shutdownTimeout ?? Duration.seconds(5)
          })
        )
      )
    )
  )

/**
 * The bound address of the current `HttpServer`.
 *
 * @category constructors
 * @since 0.1.0
 */
export const boundAddress = Effect.map(HttpServer.HttpServer, (server) => ({
  address: server.address,
  port: server.address._tag === "UnixPathAddress" ? 0 : server.address.port
}))
