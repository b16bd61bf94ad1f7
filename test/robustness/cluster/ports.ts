/**
 * Fixed loopback ports for the processes of a robustness run. A run keeps
 * its ports for its whole life (a killed process comes back on the same
 * one), so they are taken below the kernel's ephemeral range: an outgoing
 * connection can never grab a port while its server is down. Ports handed
 * out once are not handed out again by this process.
 */
import * as net from "node:net"

const lowest = 15_000
/** The first port of the kernel's ephemeral range on Linux (net.ipv4.ip_local_port_range). */
const ephemeral = 32_768
const handedOut = new Set<number>()

const isFree = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const server = net.createServer()
    server.once("error", () => resolve(false))
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => server.close(() => resolve(true)))
  })

/**
 * A loopback port that is free now, below the ephemeral range; with
 * `alsoFreeAt`, the port that far above it is free too (a Redis Cluster
 * node's bus port is its port + 10000).
 */
export const reservePort = async (alsoFreeAt?: number): Promise<number> => {
  const highest = ephemeral - (alsoFreeAt ?? 0)
  for (let attempt = 0; attempt < 1000; attempt++) {
    const port = lowest + Math.floor(Math.random() * (highest - lowest))
    if (handedOut.has(port) || (alsoFreeAt !== undefined && handedOut.has(port + alsoFreeAt))) continue
    if (!(await isFree(port))) continue
    if (alsoFreeAt !== undefined && !(await isFree(port + alsoFreeAt))) continue
    handedOut.add(port)
    if (alsoFreeAt !== undefined) handedOut.add(port + alsoFreeAt)
    return port
  }
  throw new Error(`no free loopback port between ${lowest} and ${highest}`)
}
