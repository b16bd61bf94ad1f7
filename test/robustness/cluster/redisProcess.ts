/**
 * One `redis-server` process on a fixed loopback port, writing its log into
 * its own folder: the part the single Redis and the nodes of a Redis Cluster
 * share. It is ready once it answers PING (a server still loading its files
 * answers LOADING and is waited for).
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { type TrackedProcess, spawnTracked } from "./processes.ts"
import { answersPing } from "./resp.ts"
import { sleep } from "./wait.ts"

/** The log file a server started by `launchRedis` writes in its folder. */
export const redisLogName = "redis.log"

const tail = (file: string): string =>
  existsSync(file) ? readFileSync(file, "utf8").split("\n").slice(-15).join("\n") : "(no log)"

/**
 * Starts `redis-server` on `127.0.0.1:port` with `dir` as its working folder
 * (created if needed) and `flags` after the common ones; resolves once it
 * answers PING, rejects if it exits first or takes longer than `timeoutMillis`.
 */
export const launchRedis = async (
  name: string,
  port: number,
  dir: string,
  flags: ReadonlyArray<string>,
  timeoutMillis = 30_000
): Promise<TrackedProcess> => {
  mkdirSync(dir, { recursive: true })
  const server = spawnTracked(
    name,
    "redis-server",
    ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--logfile", redisLogName, ...flags],
    { stdio: "ignore" }
  )
  const deadline = performance.now() + timeoutMillis
  while (!(await answersPing(port))) {
    if (!server.running()) {
      throw new Error(
        `${name} (redis-server on port ${port}) exited: ${await server.exited}\n${tail(join(dir, redisLogName))}`
      )
    }
    if (performance.now() > deadline) {
      await server.kill()
      throw new Error(`${name} (redis-server on port ${port}) did not answer within ${timeoutMillis} ms`)
    }
    await sleep(20)
  }
  return server
}
