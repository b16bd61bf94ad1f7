/**
 * Waiting helpers for the cluster's processes: a plain sleep and a poll
 * that retries a check until it holds or a deadline passes, naming what it
 * waited for and the last thing it saw when it gives up.
 */

/** Resolves after `millis` milliseconds. */
export const sleep = (millis: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, millis))

/**
 * Calls `check` every `intervalMillis` until it returns a value other than
 * `undefined` (thrown errors count as not yet) and returns that value;
 * rejects after `timeoutMillis` with `what` and the last error seen.
 */
export const waitFor = async <A>(
  what: string,
  check: () => Promise<A | undefined> | A | undefined,
  options: { readonly timeoutMillis?: number; readonly intervalMillis?: number } = {}
): Promise<A> => {
  const timeoutMillis = options.timeoutMillis ?? 30_000
  const deadline = performance.now() + timeoutMillis
  let last = "no answer yet"
  for (;;) {
    try {
      const value = await check()
      if (value !== undefined) return value
      last = "not yet"
    } catch (error) {
      last = error instanceof Error ? error.message : String(error)
    }
    if (performance.now() > deadline)
      throw new Error(`timed out after ${timeoutMillis} ms waiting for ${what}: ${last}`)
    await sleep(options.intervalMillis ?? 50)
  }
}
