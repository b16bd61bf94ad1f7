/**
 * The deployments in `deploy/` are checked, not only shipped: the systemd
 * unit passes `systemd-analyze verify` and stays below a fixed exposure
 * (`systemd-analyze security --offline`); each Kubernetes manifest hangs
 * together (probes, Service, PodDisruptionBudget and ServiceMonitor name
 * ports and labels that exist), and its container's arguments start the
 * service (on loopback ports, against a test Redis for the shared one),
 * whose probe paths then answer 200.
 */
import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process"
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join, resolve } from "node:path"
import { promisify } from "node:util"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { parseAllDocuments } from "yaml"
import { freePort, redisForTests } from "../adapters/redis/redisServer.ts"

const run = promisify(execFile)
const root = resolve(import.meta.dirname, "../..")
const redis = redisForTests()
const hasSystemd = spawnSync("systemd-analyze", ["--version"]).status === 0

let scratch: string
const children: Array<ChildProcess> = []

beforeAll(async () => {
  scratch = await mkdtemp(join(tmpdir(), "discovery-deploy-"))
})

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL")
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true })
})

describe("the systemd unit", () => {
  it.skipIf(!hasSystemd)("verifies, and its exposure stays low", async () => {
    const unit = await readFile(join(root, "deploy/systemd/discovery-service.service"), "utf8")
    assert.include(unit, "ExecStart=/usr/local/bin/discovery-service ")
    // the binary is not installed here: verify the unit with one that is
    const checked = join(scratch, "discovery-service.service")
    await writeFile(checked, unit.replaceAll("/usr/local/bin/discovery-service", process.execPath))
    await run("systemd-analyze", ["verify", checked])
    const { stdout } = await run("systemd-analyze", ["security", "--offline=true", checked])
    const exposure = Number(/Overall exposure level for \S+: ([\d.]+)/.exec(stdout)?.[1])
    assert.isAtMost(exposure, 2, stdout.split("\n").slice(-3).join("\n"))
  })
})

interface Manifest {
  readonly kind: string
  readonly metadata: { readonly name: string; readonly labels?: Record<string, string> }
  // biome-ignore lint/suspicious/noExplicitAny: each kind has its own spec, read as the test needs
  readonly spec: any
}

const manifestsOf = async (file: string): Promise<ReadonlyArray<Manifest>> =>
  parseAllDocuments(await readFile(join(root, "deploy/kubernetes", file), "utf8")).map(
    (document) => document.toJS() as Manifest
  )

const matches = (selector: Record<string, string>, labels: Record<string, string> | undefined) =>
  Object.entries(selector).every(([key, value]) => labels?.[key] === value)

describe.each(["single-instance.yaml", "redis-instances.yaml"])("the Kubernetes manifests %s", (file) => {
  it("name ports and labels that exist", async () => {
    const manifests = await manifestsOf(file)
    const kinds = (kind: string) => manifests.filter((manifest) => manifest.kind === kind)
    const [deployment] = kinds("Deployment")
    assert.isDefined(deployment)
    const pod = deployment!.spec.template
    assert.isTrue(
      matches(deployment!.spec.selector.matchLabels, pod.metadata.labels),
      "the Deployment selects its pods"
    )
    const container = pod.spec.containers[0]
    const portNames = new Set((container.ports as Array<{ name: string }>).map((port) => port.name))
    for (const probe of ["readinessProbe", "livenessProbe"]) {
      assert.isTrue(portNames.has(container[probe].httpGet.port), `${probe} names a container port`)
    }
    assert.strictEqual(container.readinessProbe.httpGet.path, "/readyz")
    assert.strictEqual(container.livenessProbe.httpGet.path, "/healthz")
    const volumes = new Set(((pod.spec.volumes ?? []) as Array<{ name: string }>).map((volume) => volume.name))
    for (const mount of container.volumeMounts ?? []) assert.isTrue(volumes.has(mount.name), `volume ${mount.name}`)
    const [service] = kinds("Service")
    assert.isTrue(matches(service!.spec.selector, pod.metadata.labels), "the Service selects the pods")
    for (const port of service!.spec.ports) assert.isTrue(portNames.has(port.targetPort), `Service port ${port.name}`)
    for (const budget of kinds("PodDisruptionBudget")) {
      assert.isTrue(matches(budget.spec.selector.matchLabels, pod.metadata.labels), "the budget selects the pods")
      assert.isBelow(budget.spec.minAvailable, deployment!.spec.replicas, "a pod may still be moved")
    }
    const [monitor] = kinds("ServiceMonitor")
    assert.isTrue(
      matches(monitor!.spec.selector.matchLabels, service!.metadata.labels),
      "the monitor selects the Service"
    )
    const servicePorts = new Set((service!.spec.ports as Array<{ name: string }>).map((port) => port.name))
    for (const endpoint of monitor!.spec.endpoints) assert.isTrue(servicePorts.has(endpoint.port), endpoint.port)
    // the alerting rules' job is the one the monitor names
    const rules = await readFile(join(root, "deploy/prometheus/discovery-alerts.yaml"), "utf8")
    assert.include(rules, `job="${service!.metadata.labels?.[monitor!.spec.jobLabel]}"`)
  })

  it("start the service with the container's arguments, and its probes answer", { timeout: 60_000 }, async () => {
    const [deployment] = (await manifestsOf(file)).filter((manifest) => manifest.kind === "Deployment")
    const container = deployment!.spec.template.spec.containers[0]
    const ports = new Map<number, number>()
    for (const port of container.ports) ports.set(port.containerPort, await freePort())
    const args = (container.args as ReadonlyArray<string>).map((arg) =>
      arg
        .replace(
          /^(--[a-z-]+-?addr)=:(\d+)$/,
          (_, flag: string, port: string) => `${flag}=127.0.0.1:${ports.get(Number(port))}`
        )
        .replace(/^--snapshot-path=.*$/, `--snapshot-path=${join(scratch, `${file}.binpb`)}`)
        .replace(/^--state=redis:\/\/.*$/, `--state=${redis.server.url}`)
    )
    const env: Record<string, string> = { ...(process.env as Record<string, string>) }
    for (const variable of container.env ?? []) env[variable.name] = ""
    const child = spawn(process.execPath, ["src/cli/main.ts", ...args], { cwd: root, env, stdio: "ignore" })
    children.push(child)
    const probePort = (name: string) => {
      const declared = (container.ports as Array<{ name: string; containerPort: number }>).find((p) => p.name === name)!
      return ports.get(declared.containerPort)!
    }
    for (const probe of ["readinessProbe", "livenessProbe"]) {
      const { path, port } = container[probe].httpGet
      let status = 0
      for (let i = 0; i < 200 && status !== 200; i++) {
        status = await fetch(`http://127.0.0.1:${probePort(port)}${path}`).then(
          (response) => response.status,
          () => 0
        )
        if (status !== 200) await new Promise((r) => setTimeout(r, 50))
      }
      assert.strictEqual(status, 200, `${probe} ${path}`)
    }
    child.kill("SIGTERM")
  })
})
