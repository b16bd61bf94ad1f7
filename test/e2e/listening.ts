/**
 * Waits for a started `discovery-service` command to announce its ports.
 */
import type { ChildProcess } from "node:child_process"
import { createInterface } from "node:readline"

/**
 * The annotations of the command's `discovery service listening` line (its
 * ports), and the lines it printed (the array keeps filling afterwards);
 * rejects with those lines when the process exits first.
 */
export const listening = (
  child: ChildProcess
): Promise<{ readonly ports: Record<string, number>; readonly lines: Array<string> }> => {
  const lines: Array<string> = []
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (line) => {
      lines.push(line)
      const entry = JSON.parse(line) as { message: unknown; annotations: Record<string, number> }
      if (entry.message === "discovery service listening") resolve({ ports: entry.annotations, lines })
    })
    child.on("exit", (code) => reject(new Error(`exited with ${code}: ${lines.join("\n")}`)))
  })
}
