// @ts-check
/**
 * The least any Node server can do on the start-up row: a bare `node:http2`
 * server that answers every call with an empty message and status OK, so the
 * bench's `loadgen ready` takes it for a served Hello. `bench/startup.ts`
 * runs it as the `floor` variant, next to the service and the original:
 * Node's own start and loading `node:http2` are in it; nothing of ours is.
 *
 *   node bench/startupFloor.mjs --addr=127.0.0.1:3000
 */
import { createServer } from "node:http2"

const addr = process.argv.find((arg) => arg.startsWith("--addr="))?.slice("--addr=".length) ?? "127.0.0.1:3000"
const colon = addr.lastIndexOf(":")
const emptyMessage = Buffer.alloc(5)

const server = createServer()
server.on("stream", (stream) => {
  stream.resume()
  stream.on("end", () => {
    stream.respond({ ":status": 200, "content-type": "application/grpc" }, { waitForTrailers: true })
    stream.on("wantTrailers", () => stream.sendTrailers({ "grpc-status": "0" }))
    stream.end(emptyMessage)
  })
})
server.listen(Number(addr.slice(colon + 1)), addr.slice(0, colon))
process.on("SIGTERM", () => process.exit(0))
