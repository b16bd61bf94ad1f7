/**
 * A TCP load balancer for the failover row, as an operator would put in
 * front of several instances: each new connection goes to the next backend
 * in turn, and to the one after when a backend refuses it (a dead instance),
 * so clients that reconnect land on an instance that is up.
 */
import * as net from "node:net"

/** A running balancer: its port, and how to stop it. */
export interface TcpBalancer {
  readonly port: number
  readonly close: () => void
}

/** Starts a balancer on a free loopback port over `backends` (`host:port` each). */
export const startTcpBalancer = (backends: ReadonlyArray<string>): Promise<TcpBalancer> =>
  new Promise((resolve, reject) => {
    let next = 0
    const sockets = new Set<net.Socket>()
    const connect = (client: net.Socket, tries: number) => {
      const [host, port] = backends[next++ % backends.length]!.split(":")
      const upstream = net.connect(Number(port), host!)
      let connected = false
      sockets.add(upstream)
      upstream.once("connect", () => {
        connected = true
        client.pipe(upstream)
        upstream.pipe(client)
        client.resume()
        client.once("close", () => upstream.destroy())
      })
      upstream.on("error", () => undefined)
      upstream.once("close", () => {
        sockets.delete(upstream)
        if (connected || tries + 1 >= backends.length) client.destroy()
        else connect(client, tries + 1)
      })
    }
    const server = net.createServer({ pauseOnConnect: true }, (client) => {
      sockets.add(client)
      client.on("error", () => client.destroy())
      client.once("close", () => sockets.delete(client))
      connect(client, 0)
    })
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      resolve({
        port: (server.address() as net.AddressInfo).port,
        close: () => {
          server.close()
          for (const socket of sockets) socket.destroy()
        }
      })
    })
  })
