/**
 * The transport's ceiling for `npm run bench`: a bare grpc-js server with the
 * same channel options as ours, serving the Cluster service's unary paths
 * (Hello, AffiliateUpdate) with an empty method: the request bytes are not
 * decoded and the reply is an empty message. No Effect, no logging, no
 * metrics. Prints `{"port":N}` once listening; stops on SIGTERM or SIGINT.
 *
 * Run: `node bench/echoServer.ts [host:port]` (default 127.0.0.1:0).
 */
import * as grpc from "@grpc/grpc-js"
import { serverChannelOptions } from "../src/adapters/grpc/GrpcServer.ts"

const address = process.argv[2] ?? "127.0.0.1:0"
const empty = Buffer.alloc(0)
const identity = (bytes: Buffer): Buffer => bytes

const method = (name: string): grpc.MethodDefinition<Buffer, Buffer> => ({
  path: `/sidero.discovery.server.Cluster/${name}`,
  requestStream: false,
  responseStream: false,
  originalName: name,
  requestSerialize: identity,
  requestDeserialize: identity,
  responseSerialize: identity,
  responseDeserialize: identity
})

const service: grpc.ServiceDefinition = {
  Hello: method("Hello"),
  AffiliateUpdate: method("AffiliateUpdate")
}

const reply = (_call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) =>
  callback(null, empty)

const server = new grpc.Server(serverChannelOptions)
server.addService(service, { Hello: reply, AffiliateUpdate: reply })
server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (error, port) => {
  if (error) {
    process.stderr.write(`echo server: ${error.message}\n`)
    process.exit(1)
  }
  process.stdout.write(`${JSON.stringify({ port })}\n`)
})

const stop = () => server.tryShutdown(() => process.exit(0))
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
