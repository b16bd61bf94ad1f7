/**
 * The validators on small histories written by hand: for each, a well-formed
 * history it passes and histories made to break its rule, which it must
 * report. One history reproduces a Redis restarted from an older file that
 * renumbered revisions under the same epoch, and its fixed twin (a new epoch)
 * passes every validator. Others have several checkpoints, a defect showing
 * at one of them only: the validators must name that checkpoint.
 */
import { assert, describe, it } from "@effect/vitest"
import type {
  AffiliateRecord,
  CallRecord,
  FaultRecord,
  FinalRecord,
  GaugeRecord,
  HistoryRecord,
  NodeViewRecord,
  Outcome,
  ProbeRecord,
  QuiesceRecord,
  RunRecord,
  Violation,
  WatchEndRecord,
  WatchMessageRecord,
  WatchOpenRecord
} from "./history.ts"
import { timeOf } from "./history.ts"
import { checkpointsOf, finalOf, type Point, replay, replayAt, runEnd, sameView, viewOf } from "./model.ts"
import { alive } from "./validate/alive.ts"
import { bounded } from "./validate/bounded.ts"
import { convergent } from "./validate/convergent.ts"
import { durable } from "./validate/durable.ts"
import { validate, validators } from "./validate/index.ts"
import { oneHistory } from "./validate/oneHistory.ts"
import { ordered } from "./validate/ordered.ts"
import { reliable } from "./validate/reliable.ts"
import { resumable } from "./validate/resumable.ts"

const cluster = "c"

const runRecord = (overrides: Partial<RunRecord> = {}): RunRecord => ({
  type: "run",
  scenario: "unit",
  seed: 1,
  backend: "redis",
  instances: ["i1", "i2"],
  caps: { maxClusters: 4, maxWatches: 3 },
  clusterCapTolerance: 0,
  lossAllowed: false,
  clockSkewMillis: 0,
  bounds: { convergeMillis: 500, aliveMillis: 300, deliveryMillis: 50 },
  startedAt: "2026-01-01T00:00:00.000Z",
  ...overrides
})

const affiliate = (
  id: string,
  data = `data-${id}`,
  endpoints: ReadonlyArray<string> = [`ep-${id}`]
): AffiliateRecord => ({
  id,
  data,
  endpoints
})

const update = (
  sent: AffiliateRecord,
  start: number,
  end: number,
  options: { readonly outcome?: Outcome; readonly ttlMillis?: number; readonly instance?: string } = {}
): CallRecord => ({
  type: "call",
  client: "traffic",
  instance: options.instance ?? "i1",
  op: "update",
  cluster,
  affiliate: sent.id,
  data: sent.data,
  endpoints: sent.endpoints,
  ttlMillis: options.ttlMillis ?? 60_000,
  start,
  end,
  outcome: options.outcome ?? "ok"
})

const remove = (id: string, start: number, end: number, outcome: Outcome = "ok"): CallRecord => ({
  type: "call",
  client: "traffic",
  instance: "i1",
  op: "delete",
  cluster,
  affiliate: id,
  start,
  end,
  outcome
})

const list = (affiliates: ReadonlyArray<AffiliateRecord>, at: number): CallRecord => ({
  type: "call",
  client: "traffic",
  instance: "i1",
  op: "list",
  cluster,
  start: at - 1,
  end: at,
  outcome: "ok",
  affiliates
})

const open = (
  watch: string,
  watcher: string,
  start: number,
  options: {
    readonly instance?: string
    readonly resume?: Point
    readonly reads?: boolean
    readonly cluster?: string
  } = {}
): WatchOpenRecord => ({
  type: "watch-open",
  watch,
  watcher,
  instance: options.instance ?? "i1",
  cluster: options.cluster ?? cluster,
  ...(options.resume === undefined ? {} : { resume: options.resume }),
  reads: options.reads ?? true,
  start
})

const message = (
  watch: string,
  at: number,
  epoch: string,
  revision: number,
  fields: Partial<Pick<WatchMessageRecord, "snapshot" | "resumed" | "more" | "deleted" | "affiliates">>
): WatchMessageRecord => ({
  type: "watch-msg",
  watch,
  at,
  epoch,
  revision,
  snapshot: false,
  resumed: false,
  more: false,
  deleted: false,
  affiliates: [],
  ...fields
})

const snapshot = (
  watch: string,
  at: number,
  epoch: string,
  revision: number,
  affiliates: ReadonlyArray<AffiliateRecord>,
  more = false
): WatchMessageRecord => message(watch, at, epoch, revision, { snapshot: true, more, affiliates })

const resumed = (watch: string, at: number, epoch: string, revision: number): WatchMessageRecord =>
  message(watch, at, epoch, revision, { resumed: true })

const change = (watch: string, at: number, epoch: string, revision: number, now: AffiliateRecord): WatchMessageRecord =>
  message(watch, at, epoch, revision, { affiliates: [now] })

const deletion = (watch: string, at: number, epoch: string, revision: number, id: string): WatchMessageRecord =>
  message(watch, at, epoch, revision, { deleted: true, affiliates: [{ id, data: "", endpoints: [] }] })

const ended = (watch: string, at: number, by: "client" | "server" = "client", code?: number): WatchEndRecord => ({
  type: "watch-end",
  watch,
  at,
  by,
  ...(code === undefined ? {} : { code })
})

const fault = (name: string, phase: "inject" | "heal", at: number, target?: string): FaultRecord => ({
  type: "fault",
  name,
  phase,
  at,
  ...(target === undefined ? {} : { target })
})

const probe = (instance: string, at: number, readyz: number | null = 200, answered = true): ProbeRecord => ({
  type: "probe",
  instance,
  at,
  readyz,
  answered
})

const gauges = (
  instance: string,
  at: number,
  counts: Pick<GaugeRecord, "clusters" | "affiliates" | "endpoints" | "watches">
): GaugeRecord => ({ type: "gauges", instance, at, ...counts })

const nodeView = (node: string, own: string, at: number, affiliates: ReadonlyArray<string>): NodeViewRecord => ({
  type: "node-view",
  node,
  affiliate: own,
  cluster,
  at,
  affiliates
})

const quiesce = (at: number): QuiesceRecord => ({ type: "quiesce", at })

const finalRecord = (
  at: number,
  affiliates: ReadonlyArray<AffiliateRecord>,
  instances: ReadonlyArray<string> = ["i1", "i2"]
): FinalRecord => ({
  type: "final",
  at,
  lists: Object.fromEntries(instances.map((instance) => [instance, { [cluster]: affiliates }]))
})

/** Records in history order: the run first, then by time, records at one time in the order given. */
const historyOf = (records: ReadonlyArray<HistoryRecord>): ReadonlyArray<HistoryRecord> =>
  [...records].sort((a, b) => (a.type === "run" ? -1 : b.type === "run" ? 1 : timeOf(a) - timeOf(b)))

const reported = (violations: ReadonlyArray<Violation>, validator: string, fragment: string): void => {
  const found = violations.some(
    (violation) => violation.validator === validator && violation.message.includes(fragment)
  )
  assert.isTrue(
    found,
    `expected a ${validator} violation mentioning "${fragment}", got: ${JSON.stringify(violations.map((violation) => violation.message))}`
  )
}

const passes = (violations: ReadonlyArray<Violation>): void =>
  assert.deepStrictEqual(
    violations.map((violation) => violation.message),
    []
  )

const n0 = affiliate("n0")
const n1 = affiliate("n1")
const n2 = affiliate("n2")
const n2b = affiliate("n2", "data-n2-again")
const n3 = affiliate("n3")

/**
 * A healthy run: updates n0, n1, n2, delete n1, n3, a new n2 (revisions 1-6 of
 * epoch e). Watcher A starts on i1 from an empty snapshot, loses i1 to a kill
 * and resumes on i2 at (e, 4); watcher B starts at (e, 5) with a snapshot in
 * two parts. Both are open and current when the run settles.
 */
const healthyRecords: ReadonlyArray<HistoryRecord> = [
  runRecord(),
  open("wA1", "A", 0),
  snapshot("wA1", 1, "e", 0, []),
  update(n0, 1, 2),
  change("wA1", 2, "e", 1, n0),
  update(n1, 3, 4),
  change("wA1", 4, "e", 2, n1),
  update(n2, 5, 6),
  change("wA1", 6, "e", 3, n2),
  remove("n1", 10, 11),
  deletion("wA1", 11, "e", 4, "n1"),
  fault("kill", "inject", 19, "i1"),
  ended("wA1", 20, "server", 14),
  open("wA2", "A", 21, { instance: "i2", resume: { epoch: "e", revision: 4 } }),
  resumed("wA2", 22, "e", 4),
  fault("kill", "heal", 24, "i1"),
  probe("i1", 26),
  probe("i2", 26),
  update(n3, 30, 31, { instance: "i2" }),
  change("wA2", 31, "e", 5, n3),
  open("wB1", "B", 35, { instance: "i2" }),
  snapshot("wB1", 35, "e", 5, [n0], true),
  snapshot("wB1", 36, "e", 5, [n2, n3]),
  list([n0, n2, n3], 38),
  update(n2b, 40, 41),
  change("wA2", 41, "e", 6, n2b),
  change("wB1", 42, "e", 6, n2b),
  quiesce(100),
  nodeView("go1", "n3", 120, ["n0", "n2"]),
  finalRecord(150, [n0, n2b, n3]),
  gauges("i1", 160, { clusters: 1, affiliates: 3, endpoints: 3, watches: 0 }),
  gauges("i2", 160, { clusters: 1, affiliates: 3, endpoints: 3, watches: 2 })
]

const healthy = historyOf(healthyRecords)

/** The healthy history with `replace` applied to every record (return undefined to drop one, an array to add some). */
const edited = (
  replace: (record: HistoryRecord) => HistoryRecord | ReadonlyArray<HistoryRecord> | undefined,
  extra: ReadonlyArray<HistoryRecord> = []
): ReadonlyArray<HistoryRecord> =>
  historyOf([
    ...healthyRecords.flatMap((record) => {
      const replaced = replace(record)
      return replaced === undefined ? [] : Array.isArray(replaced) ? replaced : [replaced as HistoryRecord]
    }),
    ...extra
  ])

const isMessage = (record: HistoryRecord, watch: string, revision: number): boolean =>
  record.type === "watch-msg" && record.watch === watch && record.revision === revision

/**
 * The scenario: n0, n1, n2 are revisions 1-3 of epoch e; an old watcher sees
 * n3 and n4 added at 4 and 5 and disconnects; Redis restarts from an older
 * file (n0-n2 at revision 3); delete n1 and updates n5, n6, n7 become
 * revisions 4-7 under `epochAfter`. A fresh watcher starts from a snapshot at
 * 7; then the old watcher comes back asking for (e, 5): with the bug the
 * epoch is still e and it is resumed and gets 6 and 7; with the fix the epoch
 * is new and it gets a snapshot.
 */
const restartFromOlderFile = (fixed: boolean): ReadonlyArray<HistoryRecord> => {
  const after = fixed ? "f" : "e"
  const [n4, n5, n6, n7] = ["n4", "n5", "n6", "n7"].map((id) => affiliate(id))
  const listed = [n0, n2, n5!, n6!, n7!]
  return historyOf([
    runRecord({ scenario: "redis-restart-older-file", lossAllowed: true }),
    open("old1", "old", 0),
    snapshot("old1", 1, "e", 0, []),
    update(n0, 1, 2),
    change("old1", 2, "e", 1, n0),
    update(n1, 3, 4),
    change("old1", 4, "e", 2, n1),
    update(n2, 5, 6),
    change("old1", 6, "e", 3, n2),
    update(n3, 10, 11),
    change("old1", 11, "e", 4, n3),
    update(n4!, 12, 13),
    change("old1", 13, "e", 5, n4!),
    fault("redis-restart-older-file", "inject", 19, "redis"),
    ended("old1", 20, "server", 14),
    fault("redis-restart-older-file", "heal", 22, "redis"),
    probe("i1", 23),
    probe("i2", 23),
    remove("n1", 25, 26),
    update(n5!, 27, 28),
    update(n6!, 29, 30),
    update(n7!, 31, 32),
    open("fresh1", "fresh", 33, { instance: "i2" }),
    snapshot("fresh1", 34, after, 7, listed),
    open("old2", "old", 40, { resume: { epoch: "e", revision: 5 } }),
    ...(fixed
      ? [snapshot("old2", 41, after, 7, listed)]
      : [resumed("old2", 41, "e", 5), change("old2", 41, "e", 6, n6!), change("old2", 41, "e", 7, n7!)]),
    quiesce(100),
    finalRecord(150, listed)
  ])
}

/**
 * Two checkpoints. Redis is flushed after n0 and n1 were written: at the first
 * checkpoint (150 ms) List is empty, but watcher Q, quiet on i1, still holds
 * n0 and n1, and no new epoch reached it. Then an update of n2 starts epoch f:
 * the server ends Q's watch, Q comes back to a snapshot of f, and at the
 * second checkpoint (350 ms) everything agrees.
 */
const flushedThenHealed = (): ReadonlyArray<HistoryRecord> =>
  historyOf([
    runRecord({ scenario: "redis-flush", lossAllowed: true }),
    open("wQ1", "Q", 0),
    snapshot("wQ1", 1, "e", 0, []),
    update(n0, 1, 2),
    change("wQ1", 2, "e", 1, n0),
    update(n1, 3, 4),
    change("wQ1", 4, "e", 2, n1),
    fault("redis-flush", "inject", 10, "redis"),
    fault("redis-flush", "heal", 12, "redis"),
    probe("i1", 14),
    probe("i2", 14),
    quiesce(100),
    finalRecord(150, []),
    gauges("i1", 160, { clusters: 0, affiliates: 0, endpoints: 0, watches: 1 }),
    gauges("i2", 160, { clusters: 0, affiliates: 0, endpoints: 0, watches: 0 }),
    update(n2, 200, 201),
    ended("wQ1", 202, "server", 14),
    open("wQ2", "Q", 203, { resume: { epoch: "e", revision: 2 } }),
    snapshot("wQ2", 204, "f", 1, [n2]),
    quiesce(300),
    finalRecord(350, [n2]),
    gauges("i1", 360, { clusters: 1, affiliates: 1, endpoints: 1, watches: 1 }),
    gauges("i2", 360, { clusters: 1, affiliates: 1, endpoints: 1, watches: 0 })
  ])

/**
 * The healthy run (loss allowed) goes on after its checkpoint at 150 ms: n4
 * is written and acknowledged at 201 ms (revision 7), a failover loses it, and
 * the second checkpoint (350 ms) lists no n4; then n4 is written again with
 * other data and the third checkpoint (550 ms) lists that. With `announced`
 * the failover starts epoch f before the second checkpoint: the server ends
 * both watches and watcher A comes back to a snapshot of f.
 */
const lostBetweenCheckpoints = (announced: boolean): ReadonlyArray<HistoryRecord> => {
  const n4 = affiliate("n4")
  const n4b = affiliate("n4", "data-n4-again")
  return historyOf([
    ...healthyRecords.map((record) => (record.type === "run" ? runRecord({ lossAllowed: true }) : record)),
    update(n4, 200, 201),
    change("wA2", 201, "e", 7, n4),
    change("wB1", 202, "e", 7, n4),
    fault("failover", "inject", 210, "redis"),
    fault("failover", "heal", 215, "redis"),
    probe("i1", 216),
    probe("i2", 216),
    ...(announced
      ? [
          ended("wA2", 220, "server", 14),
          ended("wB1", 220, "server", 14),
          open("wA3", "A", 221, { resume: { epoch: "e", revision: 7 } }),
          snapshot("wA3", 222, "f", 0, [n0, n2b, n3])
        ]
      : []),
    quiesce(300),
    finalRecord(350, [n0, n2b, n3]),
    update(n4b, 400, 401),
    ...(announced
      ? [change("wA3", 401, "f", 1, n4b)]
      : [change("wA2", 401, "e", 8, n4b), change("wB1", 402, "e", 8, n4b)]),
    quiesce(500),
    finalRecord(550, [n0, n2b, n3, n4b])
  ])
}

/** The messages of one validator's violations. */
const messagesOf = (violations: ReadonlyArray<Violation>, validator: string): Array<string> =>
  violations.filter((violation) => violation.validator === validator).map((violation) => violation.message)

describe("model", () => {
  it("merges snapshot parts, carries a view into a resumed watch and applies deltas", () => {
    const replays = replay(healthy)
    const a = replays.get("wA2")!
    const b = replays.get("wB1")!
    assert.isTrue(a.known && b.known)
    assert.deepStrictEqual(a.point, { epoch: "e", revision: 6 })
    assert.isTrue(sameView(a.view, viewOf([n0, n2b, n3])))
    assert.isTrue(sameView(a.view, b.view))
    assert.strictEqual(b.start, "snapshot")
    assert.strictEqual(a.start, "resumed")
  })

  it("compares endpoints as a set and marks a view unknown after a gap or an unmatched resume", () => {
    assert.isTrue(sameView(viewOf([affiliate("x", "d", ["p", "q"])]), viewOf([affiliate("x", "d", ["q", "p", "q"])])))
    const gap = edited((record) => (isMessage(record, "wB1", 6) ? change("wB1", 42, "e", 7, n2b) : record))
    assert.isFalse(replay(gap).get("wB1")!.known)
    const wrongResume = edited((record) => (isMessage(record, "wA2", 4) ? resumed("wA2", 22, "e", 3) : record))
    assert.isFalse(replay(wrongResume).get("wA2")!.known)
  })

  it("pairs each final record with the latest quiesce before it; the last final is the end of the run", () => {
    const history = lostBetweenCheckpoints(true)
    const checkpoints = checkpointsOf(history)
    assert.deepStrictEqual(
      checkpoints.map((checkpoint) => [
        checkpoint.index,
        checkpoint.quiesce?.at,
        checkpoint.final.at,
        checkpoint.until
      ]),
      [
        [0, 100, 150, 300],
        [1, 300, 350, 500],
        [2, 500, 550, Number.POSITIVE_INFINITY]
      ]
    )
    assert.strictEqual(finalOf(history)?.at, 550)
    assert.strictEqual(runEnd(history), 550)
    assert.strictEqual(
      checkpointsOf(edited((record) => (record.type === "quiesce" ? undefined : record)))[0]?.quiesce,
      undefined
    )
  })

  it("replays every watch as it stood at each time, in one pass", () => {
    const history = lostBetweenCheckpoints(true)
    const [atFirst, atSecond] = replayAt(history, [150, 350])
    assert.isTrue(sameView(atFirst!.get("wA2")!.view, viewOf([n0, n2b, n3])))
    assert.isFalse(atFirst!.has("wA3"))
    assert.isTrue(sameView(atSecond!.get("wA2")!.view, viewOf([n0, n2b, n3, affiliate("n4")])))
    assert.deepStrictEqual(atSecond!.get("wA3")!.point, { epoch: "f", revision: 0 })
    const whole = replay(history)
    const [atEnd] = replayAt(history, [Number.POSITIVE_INFINITY])
    for (const [watch, end] of whole) assert.strictEqual(atEnd!.get(watch)?.fingerprint, end.fingerprint)
  })
})

describe("validators", () => {
  it("pass a healthy history, every one of them", () => {
    passes(validate(healthy))
    assert.strictEqual(validators.length, 8)
    for (const validator of validators) assert.isTrue(validator.statement.length > 0)
  })

  describe("ordered", () => {
    it("reports a gap", () => {
      const gap = edited((record) => (isMessage(record, "wB1", 6) ? change("wB1", 42, "e", 7, n2b) : record))
      reported(ordered(gap), "ordered", "gap: revision 7 came after 5, so 6 never came")
    })

    it("reports a duplicate and a revision going back", () => {
      const twice = edited((record) =>
        isMessage(record, "wA1", 3) ? [record, change("wA1", 7, "e", 3, n2), change("wA1", 8, "e", 2, n1)] : record
      )
      reported(ordered(twice), "ordered", "duplicate: revision 3 came twice")
      reported(ordered(twice), "ordered", "went back: revision 2 came after 3")
    })

    it("reports a delta first, a changed epoch, a delta inside a snapshot and a second start", () => {
      const broken = historyOf([
        runRecord(),
        open("w1", "A", 0),
        change("w1", 1, "e", 1, n0),
        open("w2", "B", 0),
        snapshot("w2", 1, "e", 1, [n0]),
        change("w2", 2, "x", 2, n1),
        open("w3", "C", 0),
        snapshot("w3", 1, "e", 1, [n0], true),
        change("w3", 2, "e", 2, n1),
        open("w4", "D", 0),
        snapshot("w4", 1, "e", 1, [n0], true),
        snapshot("w4", 2, "e", 2, [n1]),
        snapshot("w4", 3, "e", 2, [n1])
      ])
      const violations = ordered(broken)
      reported(violations, "ordered", "its first message is a delta")
      reported(violations, "ordered", "epoch changed from e to x")
      reported(violations, "ordered", "a delta came before the snapshot's last part")
      reported(violations, "ordered", "a snapshot part has revision 2 where the snapshot's first part has 1")
      reported(violations, "ordered", "a snapshot at revision 2 came after the start")
    })
  })

  describe("oneHistory", () => {
    it("reports two watchers given different changes at (e, 5)", () => {
      const forked = edited(
        (record) => record,
        [
          open("wC1", "C", 28, { instance: "i1" }),
          snapshot("wC1", 29, "e", 4, [n0, n2]),
          deletion("wC1", 31, "e", 5, "n0"),
          ended("wC1", 32)
        ]
      )
      reported(oneHistory(forked), "oneHistory", "2 different changes at (e, 5)")
    })

    it("reports two watchers holding different views at one point", () => {
      const stale = edited(
        (record) => record,
        [open("wC1", "C", 50, { instance: "i1" }), snapshot("wC1", 51, "e", 6, [n0, n1, n2b, n3]), ended("wC1", 52)]
      )
      reported(oneHistory(stale), "oneHistory", "n1 only in C's")
    })
  })

  describe("reliable", () => {
    it("reports a reading watch that missed a revision others received", () => {
      const lost = edited((record) => (isMessage(record, "wB1", 6) ? undefined : record))
      reported(reliable(lost), "reliable", "watch wB1 (watcher B, instance i2, cluster c), started at (e, 5)")
      reported(reliable(lost), "reliable", "never received revision 6 of epoch e")
    })

    it("reports a watch the server ended with OK and a watch left hanging without a start", () => {
      const broken = edited(
        (record) => (record.type === "watch-end" ? ended("wA1", 20, "server", 0) : record),
        [open("wH", "H", 60, { instance: "i1" })]
      )
      reported(reliable(broken), "reliable", "was ended by the server at 20 ms with OK")
      reported(
        reliable(broken),
        "reliable",
        "watch wH (watcher H, instance i1, cluster c) opened at 60 ms never got a first message"
      )
    })

    it("reports a non-reading watch still behind at the final record, and not one that caught up", () => {
      const sleeper = [open("wS", "S", 32, { instance: "i1", reads: false }), snapshot("wS", 33, "e", 5, [n0, n2, n3])]
      const behind = edited((record) => record, sleeper)
      reported(reliable(behind), "reliable", "(not reading for a while) was still open at the final record")
      passes(reliable(edited((record) => record, [...sleeper, change("wS", 90, "e", 6, n2b)])))
    })
  })

  describe("resumable", () => {
    it("reports a resumed start at another revision than asked", () => {
      const wrong = edited((record) => (isMessage(record, "wA2", 4) ? resumed("wA2", 22, "e", 3) : record))
      reported(resumable(wrong), "resumable", "asked to resume after (e, 4) but was resumed at (e, 3)")
    })

    it("reports a resume at a point the watcher never reached, and a resume nobody asked for", () => {
      const unreached = edited((record) => {
        if (record.type === "watch-open" && record.watch === "wA2")
          return open("wA2", "A", 21, { instance: "i2", resume: { epoch: "e", revision: 5 } })
        if (isMessage(record, "wA2", 4)) return resumed("wA2", 22, "e", 5)
        return record
      })
      reported(resumable(unreached), "resumable", "was resumed at (e, 5), a point its watcher never reached")
      const unasked = edited((record) =>
        record.type === "watch-open" && record.watch === "wA2" ? open("wA2", "A", 21, { instance: "i2" }) : record
      )
      reported(resumable(unasked), "resumable", "though it asked for no resume point")
    })

    it("allows a snapshot answer to a resume point", () => {
      const fresh = edited((record) => (isMessage(record, "wA2", 4) ? snapshot("wA2", 22, "e", 4, [n0, n2]) : record))
      passes(validate(fresh))
    })
  })

  describe("convergent", () => {
    it("reports a watch view that differs from List at quiescence", () => {
      const differs = edited((record) => (isMessage(record, "wB1", 6) ? change("wB1", 42, "e", 6, n2) : record))
      reported(convergent(differs), "convergent", "watch wB1 (watcher B, instance i2, cluster c) holds n0, n2, n3")
      reported(convergent(differs), "convergent", "n2 with other data or endpoints")
    })

    it("reports instances that list differently, a Go node that sees another list and gauges that count wrong", () => {
      const broken = edited((record) => {
        if (record.type === "final") return { ...record, lists: { ...record.lists, i2: { [cluster]: [n0, n2b] } } }
        if (record.type === "node-view") return nodeView("go1", "n3", 120, ["n0"])
        if (record.type === "gauges" && record.instance === "i1") return { ...record, affiliates: 4 }
        return record
      })
      const violations = convergent(broken)
      reported(violations, "convergent", "cluster c: instance i2's final list differs from i1's: n3 only in i1")
      reported(violations, "convergent", "Go node go1 (affiliate n3, cluster c) last saw n0")
      reported(violations, "convergent", "instance i1's gauges at 160 ms show affiliates 4 where the lists hold 3")
    })

    it("reports a run that never settled, or settled too late", () => {
      reported(
        convergent(edited((record) => (record.type === "quiesce" ? undefined : record))),
        "convergent",
        "the run never settled"
      )
      reported(
        convergent(edited((record) => (record.type === "quiesce" ? quiesce(-400) : record))),
        "convergent",
        "checkpoint 1 (final record at 150 ms): the run took 550 ms from quiescence (-400 ms) to its final record (150 ms), over the 500 ms bound"
      )
      reported(
        convergent(edited((record) => record, [quiesce(400)])),
        "convergent",
        "the run never settled: the quiesce record at 400 ms has no final record after it"
      )
    })

    it("names the checkpoint a stale watch shows at, and passes the later one where everything agrees", () => {
      const violations = messagesOf(validate(flushedThenHealed()), "convergent")
      assert.deepStrictEqual(violations, [
        "checkpoint 1 (final record at 150 ms): watch wQ1 (watcher Q, instance i1, cluster c) holds n0, n1 at the final record but the list is none: n0, n1 only in the watch"
      ])
    })

    it("compares lists, views and gauges only at checkpoints, not while traffic runs between them", () => {
      const history = lostBetweenCheckpoints(true)
      passes(convergent(history))
      const busyGauges = historyOf([
        ...history,
        gauges("i1", 250, { clusters: 1, affiliates: 9, endpoints: 9, watches: 1 }),
        nodeView("go1", "n3", 250, [])
      ])
      passes(convergent(busyGauges))
      const wrongGauges = historyOf([
        ...history,
        gauges("i1", 351, { clusters: 1, affiliates: 9, endpoints: 9, watches: 1 })
      ])
      reported(
        convergent(wrongGauges),
        "convergent",
        "checkpoint 2 (final record at 350 ms): instance i1's gauges at 351 ms show affiliates 9 where the lists hold 3"
      )
    })
  })

  describe("durable", () => {
    it("reports a lost acknowledged update when no new epoch announced a loss", () => {
      const lost = edited((record) => (record.type === "final" ? finalRecord(150, [n0, n2b]) : record))
      reported(durable(lost), "durable", "affiliate n3: the last word was an acknowledged update")
      const allowed = edited((record) =>
        record.type === "run"
          ? runRecord({ lossAllowed: true })
          : record.type === "final"
            ? finalRecord(150, [n0, n2b])
            : record
      )
      reported(durable(allowed), "durable", "no new epoch announced a loss after 31 ms")
    })

    it("excuses a lost update when a new epoch came after it and the run allows loss", () => {
      const announced = edited(
        (record) =>
          record.type === "run"
            ? runRecord({ lossAllowed: true })
            : record.type === "final"
              ? finalRecord(150, [n0, n2b])
              : record,
        [open("wN", "N", 60, { instance: "i1" }), snapshot("wN", 61, "e2", 1, [n0, n2b]), ended("wN", 62)]
      )
      passes(durable(announced))
    })

    it("reports a deleted affiliate that came back and data no possible last change set", () => {
      const zombie = edited((record) => (record.type === "final" ? finalRecord(150, [n0, n1, n2b, n3]) : record))
      reported(durable(zombie), "durable", "affiliate n1: the last word was an acknowledged delete")
      const stale = edited((record) => (record.type === "final" ? finalRecord(150, [n0, n2, n3]) : record))
      reported(durable(stale), "durable", "affiliate n2: the last word was an acknowledged update (data data-n2-again")
    })

    it("judges only what the merge rules fix", () => {
      const concurrent = historyOf([
        runRecord(),
        update(affiliate("x", "d1"), 1, 10),
        update(affiliate("x", "d2"), 2, 9),
        remove("y", 1, 2, "unknown"),
        update(affiliate("y", "dy"), 5, 6),
        update(affiliate("z", "dz"), 1, 2),
        update(affiliate("z", ""), 3, 4),
        update(affiliate("short", "ds"), 1, 2, { ttlMillis: 10 }),
        update(affiliate("v", "dv1"), 1, 3),
        update(affiliate("v", "dv2"), 2, 4, { outcome: "unknown" }),
        quiesce(100),
        finalRecord(150, [affiliate("x", "d1"), affiliate("z", "dz"), affiliate("v", "dv2")])
      ])
      passes(durable(concurrent))
      const other = historyOf(
        concurrent.map((record) => (record.type === "final" ? finalRecord(150, [affiliate("x", "d0")]) : record))
      )
      reported(durable(other), "durable", "affiliate x: the changes that could be last are")
      reported(durable(other), "durable", "but the final list (150 ms) shows data d0")
      reported(
        durable(other),
        "durable",
        "affiliate v: the changes that could be last are acknowledged update (data dv1"
      )
      reported(durable(other), "durable", "so it cannot expire before 60001 ms, but the affiliate is missing")
    })
  })

  describe("durable across checkpoints", () => {
    it("reports a flush at the checkpoint that shows it, once, and not at the later one", () => {
      const violations = messagesOf(validate(flushedThenHealed()), "durable")
      assert.strictEqual(violations.length, 2)
      for (const [index, id] of ["n0", "n1"].entries())
        assert.include(
          violations[index],
          `checkpoint 1 (final record at 150 ms): cluster c, affiliate ${id}: the last word was an acknowledged update`
        )
      assert.include(violations[0], "and no new epoch announced a loss after 2 ms and by 150 ms")
    })

    it("only convergent and durable find anything wrong with the flush", () => {
      const found = new Set(validate(flushedThenHealed()).map((violation) => violation.validator))
      assert.deepStrictEqual([...found].sort(), ["convergent", "durable"])
    })

    it("reports an update lost between checkpoints at the next one, not again after it is overwritten", () => {
      const violations = messagesOf(durable(lostBetweenCheckpoints(false)), "durable")
      assert.strictEqual(violations.length, 1)
      assert.include(
        violations[0],
        "checkpoint 2 (final record at 350 ms): cluster c, affiliate n4: the last word was an acknowledged update (data data-n4"
      )
      assert.include(violations[0], "no new epoch announced a loss after 201 ms and by 350 ms")
    })

    it("excuses that loss when a new epoch was announced before the checkpoint", () => {
      passes(validate(lostBetweenCheckpoints(true)))
    })

    it("does not excuse a loss with an epoch first seen only after the checkpoint", () => {
      const late = historyOf([
        ...lostBetweenCheckpoints(false),
        open("wL", "L", 360, { instance: "i2" }),
        snapshot("wL", 361, "g", 0, [n0, n2b, n3]),
        ended("wL", 362)
      ])
      reported(durable(late), "durable", "checkpoint 2 (final record at 350 ms): cluster c, affiliate n4")
    })

    it("judges at every checkpoint a key that passed before", () => {
      const lostLater = historyOf(
        lostBetweenCheckpoints(false).map((record) =>
          record.type === "final" && record.at === 550
            ? finalRecord(550, [n2b, n3, affiliate("n4", "data-n4-again")])
            : record
        )
      )
      reported(durable(lostLater), "durable", "checkpoint 3 (final record at 550 ms): cluster c, affiliate n0")
    })

    it("treats a call still running at the quiesce as one of unknown outcome at that checkpoint", () => {
      const straggler = historyOf([
        runRecord(),
        update(n0, 1, 2),
        remove("n0", 90, 120),
        quiesce(100),
        finalRecord(150, [n0]),
        quiesce(300),
        finalRecord(350, [])
      ])
      passes(durable(straggler))
    })
  })

  describe("bounded", () => {
    it("reports more watches open on one instance than the cap", () => {
      const crowded = edited(
        (record) => record,
        [
          ...["w1", "w2"].flatMap((watch, index) => [
            open(watch, watch, 50 + index, { instance: "i2" }),
            snapshot(watch, 51 + index, "e", 6, [n0, n2b, n3])
          ])
        ]
      )
      reported(bounded(crowded), "bounded", "instance i2 had 4 watches open at 52 ms (cap 3)")
    })

    it("reports too many clusters watched, gauges over the caps, and lists over the protocol's limits", () => {
      const wide = affiliate(
        "wide",
        "d",
        Array.from({ length: 65 }, (_, index) => `ep${index}`)
      )
      const many = Array.from({ length: 1025 }, (_, index) => affiliate(`m${index}`))
      const broken = edited(
        (record) => record,
        [
          ...["c2", "c3", "c4", "c5"].flatMap((name, index) => [
            open(`x${name}`, `x${name}`, 60 + index, { cluster: name }),
            snapshot(`x${name}`, 61 + index, "e", 0, [])
          ]),
          gauges("i1", 70, { clusters: 5, affiliates: 0, endpoints: 0, watches: 4 }),
          list([wide], 80),
          list(many, 81)
        ]
      )
      const violations = bounded(broken)
      reported(violations, "bounded", "5 clusters had a watch open at 64 ms (cap 4 + tolerance 0)")
      reported(
        violations,
        "bounded",
        "instance i1's gauges at 70 ms show 5 clusters (cap 4 + tolerance 0) and 4 watches (cap 3)"
      )
      reported(violations, "bounded", "holds affiliate wide with 65 endpoints (over 64)")
      reported(violations, "bounded", "holds 1025 affiliates (over 1024)")
    })

    it("counts a watch of a cluster a flush wiped only until the flush", () => {
      const watchesAcross = (records: ReadonlyArray<HistoryRecord>) =>
        edited(
          (record) => record,
          [
            ...["c2", "c3", "c4"].flatMap((name, index) => [
              open(`x${name}`, `x${name}`, 60 + index, { cluster: name }),
              snapshot(`x${name}`, 61 + index, "e", 0, [])
            ]),
            ...records,
            open("xc5", "xc5", 66, { cluster: "c5" }),
            snapshot("xc5", 67, "f", 0, [])
          ]
        )
      reported(bounded(watchesAcross([])), "bounded", "5 clusters had a watch open at 67 ms (cap 4 + tolerance 0)")
      assert.deepStrictEqual(
        bounded(
          watchesAcross([fault("redis-flushall", "inject", 64, "redis"), fault("redis-flushall", "heal", 65, "redis")])
        ).filter((violation) => violation.message.includes("clusters had a watch open")),
        []
      )
    })
  })

  describe("alive", () => {
    it("reports an instance not ready after a heal", () => {
      const down = edited((record) =>
        record.type === "probe" && record.instance === "i1" ? probe("i1", 26, 503, true) : record
      )
      reported(
        alive(down),
        "alive",
        "instance i1 was not ready and answering within 300 ms of the heal of fault kill on i1 at 24 ms"
      )
    })

    it("takes the final reading for a heal that came during it, once probes stopped", () => {
      const lateHeal = [fault("pause", "inject", 100, "i2"), fault("pause", "heal", 148, "i2")]
      passes(alive(edited((record) => record, lateHeal)))
      const i2Silent = edited(
        (record) => (record.type === "final" ? finalRecord(150, [n0, n2b, n3], ["i1"]) : record),
        lateHeal
      )
      reported(
        alive(i2Silent),
        "alive",
        "instance i2 was not ready and answering within 300 ms of the heal of fault pause"
      )
    })

    it("does not judge a heal that another fault follows within the bound", () => {
      const overlapped = edited(
        (record) => (record.type === "probe" && record.instance === "i1" ? undefined : record),
        [fault("pause", "inject", 40, "i2"), fault("pause", "heal", 45, "i2"), probe("i1", 46), probe("i2", 46)]
      )
      passes(alive(overlapped))
    })
  })

  describe("a Redis restarted from an older file", () => {
    it("is caught when revisions are renumbered under the same epoch", () => {
      const history = restartFromOlderFile(false)
      const violations = validate(history)
      reported(violations, "oneHistory", "watcher old (watch old2 on i1) stands at (e, 7) at 41 ms")
      reported(violations, "oneHistory", "n1, n3, n4 only in old's; n5 only in fresh's")
      reported(violations, "durable", "affiliate n3: the last word was an acknowledged update")
      reported(violations, "durable", "affiliate n4: the last word was an acknowledged update")
      reported(
        violations,
        "convergent",
        "watch old2 (watcher old, instance i1, cluster c) holds n0, n1, n2, n3, n4, n6, n7"
      )
      passes(resumable(history))
    })

    it("passes every validator with a new epoch after the restart", () => {
      passes(validate(restartFromOlderFile(true)))
    })
  })
})
