// locksmith-js/otel: instrument() over the real OpenTelemetry SDK (in-memory metric and
// span exporters), on the memory store, a user's own store and a real redis-server, in
// the build under test; the Prometheus example run as a child process; the entry's
// options, its CommonJS form, and that nothing else in the package loads OpenTelemetry.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import dc from "node:diagnostics_channel";
import { readdirSync, readFileSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { createRequire } from "node:module";
import { join, relative } from "node:path";
import { afterEach, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { context, trace, SpanStatusCode } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import * as packageApi from "locksmith-js";
import { instrument, VERSION } from "locksmith-js/otel";

import { failingStore } from "./support/js-stores.mjs";
import { redisStore } from "./support/server-stores.mjs";
import { failOnUnhandledRejections, ls, sleep, TARGET, uniqueKey } from "./support/target.mjs";
import { until } from "./support/wait.mjs";

await failOnUnhandledRejections();

const root = fileURLToPath(new URL("..", import.meta.url));
const run = promisify(execFile);

// Parents and children need a context manager (an SDK's NodeSDK registers this one).
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

/**
 * instrument() with providers of its own: `metrics()` collects every metric (cumulative)
 * by name, `spans()` the finished spans.
 */
function instrumented(options = {}) {
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const spanExporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spanExporter)] });
  const uninstrument = instrument({ meterProvider, tracerProvider, ...options });
  return {
    uninstrument,
    tracerProvider,
    async metrics() {
      await reader.forceFlush();
      const byName = new Map();
      const last = metricExporter.getMetrics().at(-1);
      for (const scope of last?.scopeMetrics ?? []) {
        for (const metric of scope.metrics) byName.set(metric.descriptor.name, { ...metric, scope: scope.scope });
      }
      return byName;
    },
    spans: () => spanExporter.getFinishedSpans(),
    async close() {
      uninstrument();
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
    },
  };
}

/** The data points of `name` whose attributes include `match`. */
function points(metrics, name, match = {}) {
  return (metrics.get(name)?.dataPoints ?? []).filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v));
}
/** A counter's (or up-down counter's) value for `match`, summed over its points; 0 without any. */
const total = (metrics, name, match) => points(metrics, name, match).reduce((sum, p) => sum + p.value, 0);
/** A histogram's count for `match`. */
const count = (metrics, name, match) => points(metrics, name, match).reduce((sum, p) => sum + p.value.count, 0);
const spansNamed = (spans, name) => spans.filter((s) => s.name === name);

const failing = failingStore();

/** The scenarios every store runs: `name` as the channels report it. */
function scenarios(name, getStore) {
  let otel;
  afterEach(async () => {
    await otel?.close();
    otel = undefined;
  });

  it("records an acquire and its release: durations, outcome, kind, store, held +1 then -1, two spans", async () => {
    otel = instrumented();
    const lock = new ls.Lock(uniqueKey("otel-basic"), 5_000, getStore());
    assert.equal(await lock.acquire(), true);
    const token = lock.fencingToken;
    assert.notEqual(token, null, "every shipped store gives fencing tokens");
    let metrics = await otel.metrics();
    assert.equal(total(metrics, "locksmith.held", { "locksmith.kind": "lock", "locksmith.store": name }), 1, "held while held");
    assert.equal(count(metrics, "locksmith.acquire.duration", { "locksmith.outcome": "acquired", "locksmith.kind": "lock", "locksmith.store": name }), 1);
    assert.equal(count(metrics, "locksmith.hold.duration"), 0, "no hold ended yet");
    await sleep(30);
    assert.equal(await lock.release(), true);
    metrics = await otel.metrics();
    assert.equal(total(metrics, "locksmith.held", { "locksmith.kind": "lock", "locksmith.store": name }), 0, "back to 0");
    const [hold] = points(metrics, "locksmith.hold.duration", { "locksmith.outcome": "released", "locksmith.kind": "lock", "locksmith.store": name });
    assert.equal(hold?.value.count, 1);
    assert.ok(hold.value.sum >= 0.025 && hold.value.sum < 5, `held for ${hold.value.sum} s`);
    assert.equal(metrics.get("locksmith.acquire.duration").descriptor.unit, "s");
    assert.equal(metrics.get("locksmith.hold.duration").descriptor.unit, "s");
    assert.deepEqual(
      { name: metrics.get("locksmith.held").scope.name, version: metrics.get("locksmith.held").scope.version },
      { name: "locksmith-js", version: VERSION },
    );

    const spans = otel.spans();
    const [acquireSpan] = spansNamed(spans, "locksmith acquire");
    const [holdSpan] = spansNamed(spans, "locksmith hold");
    assert.ok(acquireSpan && holdSpan, spans.map((s) => s.name).join());
    assert.equal(acquireSpan.instrumentationScope.name, "locksmith-js");
    assert.equal(acquireSpan.attributes["locksmith.outcome"], "acquired");
    assert.equal(acquireSpan.attributes["locksmith.kind"], "lock");
    assert.equal(acquireSpan.attributes["locksmith.store"], name);
    assert.equal(acquireSpan.attributes["locksmith.attempts"], 1);
    // A number, as lock.fencingToken is (every store's tokens are safe integers).
    assert.equal(acquireSpan.attributes["locksmith.fencing_token"], token);
    assert.equal(holdSpan.attributes["locksmith.fencing_token"], token);
    assert.equal(acquireSpan.status.code, SpanStatusCode.UNSET);
    assert.equal(holdSpan.attributes["locksmith.outcome"], "released");
    assert.equal(holdSpan.status.code, SpanStatusCode.UNSET);
    assert.deepEqual(
      holdSpan.links.map((l) => l.context.spanId),
      [acquireSpan.spanContext().spanId],
      "the hold links to its acquire",
    );
    for (const span of spans) assert.equal(span.attributes["locksmith.key"], undefined, "no key without recordKeys");
  });

  it("puts a lockAll() hold's fencing tokens on its spans, in the order of its keys", async () => {
    otel = instrumented({ recordKeys: true });
    const base = uniqueKey("otel-all");
    const all = ls.lockAll([`${base}:b`, `${base}:a`], 5_000, getStore());
    assert.equal(await all.acquire(), true);
    const tokens = all.keys.map((key) => all.fencingTokens[key]);
    assert.ok(
      tokens.every((t) => typeof t === "number"),
      JSON.stringify(all.fencingTokens),
    );
    assert.equal(await all.release(), true);
    const [acquireSpan] = spansNamed(otel.spans(), "locksmith acquire");
    const [holdSpan] = spansNamed(otel.spans(), "locksmith hold");
    for (const span of [acquireSpan, holdSpan]) {
      assert.equal(span.attributes["locksmith.kind"], "multi");
      assert.deepEqual(span.attributes["locksmith.fencing_tokens"], tokens, span.name);
      assert.deepEqual(span.attributes["locksmith.keys"], [...all.keys], span.name);
      assert.equal(span.attributes["locksmith.fencing_token"], undefined, "one token has no meaning for several keys");
    }
  });

  it("records busy and timeout, with a timeout's attempts and wait", async () => {
    otel = instrumented();
    const key = uniqueKey("otel-busy");
    const holder = new ls.Lock(key, 5_000, getStore());
    await holder.acquire();
    const other = new ls.Lock(key, 5_000, getStore());
    assert.equal(await other.acquire(), false);
    assert.equal(await other.acquire({ timeout: 120, retryDelay: 30 }), false);
    await holder.release();
    const metrics = await otel.metrics();
    const where = { "locksmith.kind": "lock", "locksmith.store": name };
    assert.equal(count(metrics, "locksmith.acquire.duration", { ...where, "locksmith.outcome": "busy" }), 1);
    const [timedOut] = points(metrics, "locksmith.acquire.duration", { ...where, "locksmith.outcome": "timeout" });
    assert.equal(timedOut?.value.count, 1);
    assert.ok(timedOut.value.sum >= 0.1, `a 120 ms wait took ${timedOut.value.sum} s`);
    const outcomes = spansNamed(otel.spans(), "locksmith acquire").map((s) => s.attributes["locksmith.outcome"]);
    assert.deepEqual(outcomes, ["acquired", "busy", "timeout"]);
    const timeoutSpan = spansNamed(otel.spans(), "locksmith acquire")[2];
    assert.ok(timeoutSpan.attributes["locksmith.attempts"] >= 2, `attempts ${timeoutSpan.attributes["locksmith.attempts"]}`);
    assert.equal(total(metrics, "locksmith.held", where), 0, "only the holder counted, and it released");
  });

  it("counts a hold lost to its TTL, ends its span with ERROR, and a release after it changes nothing", async () => {
    otel = instrumented();
    const lock = new ls.Lock(uniqueKey("otel-lost"), "100ms", getStore());
    assert.equal(await lock.acquire(), true);
    const where = { "locksmith.kind": "lock", "locksmith.store": name };
    await until("the loss", async () => total(await otel.metrics(), "locksmith.lost", where) > 0, 3_000);
    let metrics = await otel.metrics();
    assert.equal(total(metrics, "locksmith.lost", { ...where, "locksmith.reason": "LOCK_NOT_HELD" }), 1);
    assert.equal(total(metrics, "locksmith.held", where), 0, "held back to 0 on the loss");
    assert.equal(count(metrics, "locksmith.hold.duration", { ...where, "locksmith.outcome": "lost" }), 1);
    const [holdSpan] = spansNamed(otel.spans(), "locksmith hold");
    assert.equal(holdSpan.status.code, SpanStatusCode.ERROR);
    assert.equal(holdSpan.attributes["locksmith.outcome"], "lost");
    assert.equal(holdSpan.attributes["locksmith.lost_reason"], "LOCK_NOT_HELD");
    assert.ok(
      holdSpan.events.some((e) => e.name === "locksmith.lost" && e.attributes["locksmith.reason"] === "LOCK_NOT_HELD"),
      holdSpan.events.map((e) => e.name).join(),
    );
    // The release that follows a loss: no second end, held never below 0.
    await lock.release();
    await assert.rejects(lock.extend(), { code: "LOCK_NOT_HELD" });
    metrics = await otel.metrics();
    assert.equal(total(metrics, "locksmith.held", where), 0, "still 0 after the release");
    assert.equal(total(metrics, "locksmith.lost", where), 1, "lost once");
    assert.equal(count(metrics, "locksmith.hold.duration", where), 1, "one hold, ended once");
    assert.equal(spansNamed(otel.spans(), "locksmith hold").length, 1);
    assert.equal(total(metrics, "locksmith.extends", { ...where, "locksmith.outcome": "not-held" }), 1);
  });

  it("counts extends by outcome and marks them on the hold span", async () => {
    otel = instrumented();
    const lock = new ls.Lock(uniqueKey("otel-extend"), 5_000, getStore());
    await lock.acquire();
    await lock.extend("8s");
    await lock.extend();
    await lock.release();
    await assert.rejects(lock.extend(), { code: "LOCK_NOT_HELD" });
    const metrics = await otel.metrics();
    const where = { "locksmith.kind": "lock", "locksmith.store": name };
    assert.equal(total(metrics, "locksmith.extends", { ...where, "locksmith.outcome": "extended" }), 2);
    assert.equal(total(metrics, "locksmith.extends", { ...where, "locksmith.outcome": "not-held" }), 1);
    const [holdSpan] = spansNamed(otel.spans(), "locksmith hold");
    assert.deepEqual(
      holdSpan.events.filter((e) => e.name === "locksmith.extend").map((e) => [e.attributes["locksmith.outcome"], e.attributes["locksmith.ttl_ms"]]),
      [
        ["extended", 8_000],
        ["extended", 5_000],
      ],
    );
  });

  it("puts keys on spans only with recordKeys: true, and never on metrics", async () => {
    otel = instrumented({ recordKeys: true });
    const key = uniqueKey("otel-keys");
    const [ran] = await new ls.Lock(key, 5_000, getStore()).run(async () => "done");
    assert.equal(ran, true);
    const spans = otel.spans();
    assert.deepEqual(
      spans.map((s) => [s.name, s.attributes["locksmith.key"]]),
      [
        ["locksmith acquire", key],
        ["locksmith hold", key],
      ],
    );
    for (const metric of (await otel.metrics()).values()) {
      for (const point of metric.dataPoints) assert.equal(point.attributes["locksmith.key"], undefined, metric.descriptor.name);
    }
  });

  it("records semaphore permits and read and write locks under their kinds", async () => {
    otel = instrumented();
    const key = uniqueKey("otel-kinds");
    const [a, b, c] = [1, 2, 3].map(() => ls.semaphore(key, 2, 5_000, getStore()));
    assert.equal(await a.acquire(), true);
    assert.equal(await b.acquire(), true);
    assert.equal(await c.acquire(), false);
    const rw = ls.readWriteLock(`${key}:rw`, 5_000, getStore());
    const [r1, r2, writer] = [rw.readLock(), rw.readLock(), rw.writeLock()];
    assert.equal(await r1.acquire(), true);
    assert.equal(await r2.acquire(), true);
    assert.equal(await writer.acquire(), false);
    let metrics = await otel.metrics();
    const held = (kind) => total(metrics, "locksmith.held", { "locksmith.kind": kind, "locksmith.store": name });
    assert.deepEqual([held("semaphore"), held("read"), held("write")], [2, 2, 0]);
    const outcomes = (kind) =>
      ["acquired", "busy"].map((o) => count(metrics, "locksmith.acquire.duration", { "locksmith.kind": kind, "locksmith.outcome": o }));
    assert.deepEqual(
      [outcomes("semaphore"), outcomes("read"), outcomes("write")],
      [
        [2, 1],
        [2, 0],
        [0, 1],
      ],
    );
    for (const h of [a, b, r1, r2]) assert.equal(await h.release(), true);
    assert.equal(await writer.acquire(), true);
    assert.equal(await writer.release(), true);
    metrics = await otel.metrics();
    assert.deepEqual([held("semaphore"), held("read"), held("write")], [0, 0, 0]);
    assert.equal(count(metrics, "locksmith.hold.duration", { "locksmith.kind": "semaphore", "locksmith.outcome": "released" }), 2);
    assert.equal(count(metrics, "locksmith.hold.duration", { "locksmith.kind": "write", "locksmith.outcome": "released" }), 1);
  });

  it("follows a handle acquired again after its release as a new hold", async () => {
    otel = instrumented();
    const lock = new ls.Lock(uniqueKey("otel-again"), 5_000, getStore());
    for (let i = 0; i < 3; i++) {
      assert.equal(await lock.acquire(), true);
      assert.equal(await lock.release(), true);
    }
    const metrics = await otel.metrics();
    assert.equal(count(metrics, "locksmith.hold.duration", { "locksmith.outcome": "released", "locksmith.store": name }), 3);
    assert.equal(total(metrics, "locksmith.held", { "locksmith.store": name }), 0);
    assert.equal(spansNamed(otel.spans(), "locksmith hold").length, 3);
  });

  it("stops recording once uninstrumented, and closes what was open", async () => {
    otel = instrumented();
    const still = new ls.Lock(uniqueKey("otel-open"), 5_000, getStore());
    await still.acquire();
    const before = await otel.metrics();
    assert.equal(total(before, "locksmith.held", { "locksmith.store": name }), 1);
    otel.uninstrument();
    otel.uninstrument(); // twice: harmless
    const spansThen = otel.spans().length;
    const metricsThen = await otel.metrics();
    assert.equal(total(metricsThen, "locksmith.held", { "locksmith.store": name }), 0, "the open hold no longer counts");
    const lock = new ls.Lock(uniqueKey("otel-off"), 5_000, getStore());
    await lock.acquire();
    await lock.extend();
    await lock.release();
    await still.release();
    const after = await otel.metrics();
    assert.equal(count(after, "locksmith.acquire.duration"), count(metricsThen, "locksmith.acquire.duration"));
    assert.equal(count(after, "locksmith.hold.duration"), count(metricsThen, "locksmith.hold.duration"));
    assert.equal(total(after, "locksmith.extends"), 0);
    assert.equal(total(after, "locksmith.held", { "locksmith.store": name }), 0);
    assert.equal(otel.spans().length, spansThen, "no span after uninstrument()");
  });

  it("makes both spans children of the caller's span", async () => {
    otel = instrumented();
    const tracer = otel.tracerProvider.getTracer("app");
    const parent = tracer.startSpan("request");
    await context.with(trace.setSpan(context.active(), parent), () => new ls.Lock(uniqueKey("otel-parent"), 5_000, getStore()).run(async () => {}));
    parent.end();
    const spans = otel.spans();
    const [acquireSpan] = spansNamed(spans, "locksmith acquire");
    const [holdSpan] = spansNamed(spans, "locksmith hold");
    const parentOf = (span) => span.parentSpanContext?.spanId ?? span.parentSpanId;
    assert.equal(parentOf(acquireSpan), parent.spanContext().spanId);
    assert.equal(parentOf(holdSpan), parent.spanContext().spanId);
    assert.equal(acquireSpan.spanContext().traceId, parent.spanContext().traceId);
  });
}

describe("locksmith-js/otel on the memory store", () => {
  const store = new ls.MemoryLockStore();
  scenarios("memory", () => store);

  it("counts pending acquires, a fair queue's waiters with locksmith.fair, back to 0 once answered", async () => {
    const otel = instrumented();
    try {
      const key = uniqueKey("otel-fair");
      const holder = ls.lock(key, 5_000, store, { fair: true });
      assert.equal(await holder.acquire(), true);
      const waiters = [ls.lock(key, 5_000, store, { fair: true }), ls.lock(key, 5_000, store, { fair: true })];
      const waits = waiters.map((w) => w.acquire({ timeout: 5_000 }));
      await sleep(50);
      const fair = { "locksmith.kind": "lock", "locksmith.store": "memory", "locksmith.fair": true };
      let metrics = await otel.metrics();
      assert.equal(total(metrics, "locksmith.acquire.pending", fair), 2, "two in the queue");
      assert.equal(total(metrics, "locksmith.held", fair), 1);
      // A lock that is not fair carries no locksmith.fair.
      const plain = new ls.Lock(uniqueKey("otel-plain"), 5_000, store);
      await plain.acquire();
      metrics = await otel.metrics();
      assert.deepEqual(
        points(metrics, "locksmith.held", { "locksmith.kind": "lock" })
          .map((p) => p.attributes["locksmith.fair"])
          .sort(),
        [true, undefined],
      );
      await plain.release();
      await holder.release();
      assert.equal(await waits[0], true);
      await waiters[0].release();
      assert.equal(await waits[1], true);
      await waiters[1].release();
      metrics = await otel.metrics();
      assert.equal(total(metrics, "locksmith.acquire.pending", fair), 0, "all answered");
      const spans = spansNamed(otel.spans(), "locksmith acquire");
      assert.deepEqual(
        spans.map((s) => String(s.attributes["locksmith.fair"])).sort(),
        ["true", "true", "true", "undefined"],
        "the fair handles' acquire spans say so",
      );
      // Uninstrumented while one waits: the count goes back down.
      const last = ls.lock(key, 5_000, store, { fair: true });
      await last.acquire();
      const waiting = ls.lock(key, 5_000, store, { fair: true }).acquire({ timeout: 200 });
      await sleep(30);
      assert.equal(total(await otel.metrics(), "locksmith.acquire.pending", fair), 1);
      otel.uninstrument();
      assert.equal(total(await otel.metrics(), "locksmith.acquire.pending", fair), 0);
      assert.equal(await waiting, false);
      await last.release();
    } finally {
      await otel.close();
    }
  });

  it("records a failing store's acquire as an error span with the exception, on a user's own store", async () => {
    const otel = instrumented();
    try {
      await assert.rejects(new ls.Lock(uniqueKey("otel-broken"), 5_000, failing).acquire(), /disk on fire/);
      const metrics = await otel.metrics();
      assert.equal(count(metrics, "locksmith.acquire.duration", { "locksmith.outcome": "error", "locksmith.store": "custom" }), 1);
      assert.equal(total(metrics, "locksmith.held"), 0);
      const [span] = spansNamed(otel.spans(), "locksmith acquire");
      assert.equal(span.status.code, SpanStatusCode.ERROR);
      assert.match(span.status.message, /disk on fire/);
      const exception = span.events.find((e) => e.name === "exception");
      assert.match(String(exception?.attributes["exception.message"]), /disk on fire/);
      assert.equal(spansNamed(otel.spans(), "locksmith hold").length, 0);
    } finally {
      await otel.close();
    }
  });

  it("records an acquire rejected for bad options as an error", async () => {
    const otel = instrumented();
    try {
      await assert.rejects(new ls.Lock(uniqueKey("otel-bad"), 5_000, store).acquire({ timeout: "soon" }), { code: "INVALID_ARGUMENT" });
      const metrics = await otel.metrics();
      assert.equal(count(metrics, "locksmith.acquire.duration", { "locksmith.outcome": "error", "locksmith.store": "memory" }), 1);
      assert.equal(spansNamed(otel.spans(), "locksmith acquire")[0]?.status.code, SpanStatusCode.ERROR);
    } finally {
      await otel.close();
    }
  });

  it("ends a hold whose release finds it gone, with no loss reported first, as lost", async () => {
    const otel = instrumented();
    try {
      const own = new ls.MemoryLockStore();
      const lock = new ls.Lock(uniqueKey("otel-cleared"), 5_000, own);
      await lock.acquire();
      own.clear();
      assert.equal(await lock.release(), false);
      const metrics = await otel.metrics();
      assert.equal(total(metrics, "locksmith.held", { "locksmith.store": "memory" }), 0);
      assert.equal(total(metrics, "locksmith.lost", { "locksmith.reason": "LOCK_NOT_HELD", "locksmith.store": "memory" }), 1);
      assert.equal(count(metrics, "locksmith.hold.duration", { "locksmith.outcome": "lost" }), 1);
      assert.equal(spansNamed(otel.spans(), "locksmith hold")[0]?.status.code, SpanStatusCode.ERROR);
    } finally {
      await otel.close();
    }
  });

  it("keeps a hold whose release failed until it ends (here by its loss)", async () => {
    const otel = instrumented();
    try {
      const holds = new Map();
      const live = (key) => (holds.get(key)?.until ?? 0) > performance.now();
      const unreachable = {
        async acquire(key, owner, ttlMs) {
          if (live(key)) return false;
          holds.set(key, { owner, until: performance.now() + ttlMs });
          return true;
        },
        async release() {
          throw new Error("network down");
        },
        async extend(key, owner, ttlMs) {
          if (!live(key) || holds.get(key).owner !== owner) return false;
          holds.get(key).until = performance.now() + ttlMs;
          return true;
        },
        isLocked: async (key) => live(key),
        remainingTime: async (key) => (live(key) ? holds.get(key).until - performance.now() : null),
      };
      const lock = new ls.Lock(uniqueKey("otel-release-fails"), "150ms", unreachable);
      await lock.acquire();
      await assert.rejects(lock.release(), /network down/);
      assert.equal(total(await otel.metrics(), "locksmith.held", { "locksmith.store": "custom" }), 1, "still held as far as anyone knows");
      await until("the loss", async () => total(await otel.metrics(), "locksmith.lost", { "locksmith.store": "custom" }) === 1, 3_000);
      const metrics = await otel.metrics();
      assert.equal(total(metrics, "locksmith.held", { "locksmith.store": "custom" }), 0);
      assert.equal(count(metrics, "locksmith.hold.duration", { "locksmith.outcome": "lost", "locksmith.store": "custom" }), 1);
    } finally {
      await otel.close();
    }
  });

  it("counts the loss of a hold granted before instrument(), and leaves held alone", async () => {
    // Someone else watches losses, so this hold's is published although it was granted first.
    const watcher = () => {};
    dc.subscribe("locksmith:lost", watcher);
    const lock = new ls.Lock(uniqueKey("otel-earlier"), "100ms", store);
    await lock.acquire();
    const otel = instrumented();
    try {
      await until("the loss", async () => total(await otel.metrics(), "locksmith.lost", { "locksmith.store": "memory" }) === 1, 3_000);
      await lock.release();
      const metrics = await otel.metrics();
      assert.equal(total(metrics, "locksmith.held"), 0, "never below 0");
      assert.equal(count(metrics, "locksmith.hold.duration"), 0);
      assert.equal(otel.spans().length, 0);
    } finally {
      dc.unsubscribe("locksmith:lost", watcher);
      await otel.close();
    }
  });

  it("ends the acquire span of a traced call that throws before returning a promise", async () => {
    const otel = instrumented();
    try {
      const channel = dc.tracingChannel("locksmith:acquire");
      const traced = { key: "k", kind: "lock", store: "custom", ttlMs: 1_000, lock: {} };
      assert.throws(
        () =>
          channel.tracePromise(() => {
            throw new Error("thrown at once");
          }, traced),
        /thrown at once/,
      );
      const [span] = spansNamed(otel.spans(), "locksmith acquire");
      assert.equal(span?.status.code, SpanStatusCode.ERROR);
      assert.equal(span.attributes["locksmith.outcome"], "error");
      assert.equal(count(await otel.metrics(), "locksmith.acquire.duration", { "locksmith.outcome": "error" }), 1);
    } finally {
      await otel.close();
    }
  });

  it("ends the right hold when its loss is reported after the handle was granted again", async () => {
    const otel = instrumented();
    try {
      const lock = new ls.Lock(uniqueKey("otel-regrant"), "50ms", store);
      await lock.acquire();
      // The event loop is busy past the TTL; the next grant of the same handle can come
      // before the first hold's loss is reported.
      const until = performance.now() + 120;
      while (performance.now() < until) {}
      assert.equal(await lock.acquire(), true);
      await lock.extend("5s");
      await sleep(100);
      let metrics = await otel.metrics();
      assert.equal(total(metrics, "locksmith.held"), 1, "the second hold is held");
      assert.equal(total(metrics, "locksmith.lost"), 1, "the first hold was lost, once");
      assert.equal(await lock.release(), true);
      metrics = await otel.metrics();
      assert.equal(total(metrics, "locksmith.held"), 0);
      assert.equal(total(metrics, "locksmith.lost"), 1);
      assert.deepEqual(
        spansNamed(otel.spans(), "locksmith hold").map((s) => s.attributes["locksmith.outcome"]),
        ["lost", "released"],
      );
    } finally {
      await otel.close();
    }
  });

  it("counts a loss once when it is reported after a release found the key gone", async () => {
    const otel = instrumented();
    try {
      const lock = new ls.Lock(uniqueKey("otel-late-loss"), "50ms", store);
      await assert.rejects(
        lock.run(() => {
          const until = performance.now() + 120;
          while (performance.now() < until) {}
        }),
        { code: "LOCK_NOT_HELD" },
      );
      await sleep(150);
      const metrics = await otel.metrics();
      assert.equal(total(metrics, "locksmith.lost"), 1);
      assert.equal(total(metrics, "locksmith.held"), 0);
    } finally {
      await otel.close();
    }
  });

  it("ends a hold it never saw end when its handle is granted again, so held does not drift", async () => {
    const otel = instrumented();
    try {
      // Two grants of one handle with nothing between them, published as the API would.
      const channel = dc.tracingChannel("locksmith:acquire");
      const handle = {};
      for (let i = 0; i < 2; i++) {
        const traced = { key: "k", kind: "lock", store: "custom", ttlMs: 1_000, lock: handle, hold: i + 1 };
        await channel.tracePromise(async () => {
          traced.outcome = "acquired";
          return true;
        }, traced);
      }
      const metrics = await otel.metrics();
      assert.equal(total(metrics, "locksmith.held"), 1);
      assert.equal(total(metrics, "locksmith.lost", { "locksmith.reason": "LOCK_NOT_HELD" }), 1, "a handle granted again had lost its earlier hold");
      const holds = spansNamed(otel.spans(), "locksmith hold");
      assert.equal(holds.length, 1, "the first hold's span ended");
    } finally {
      await otel.close();
    }
  });

  it("uses the global providers by default", async () => {
    const { metrics } = await import("@opentelemetry/api");
    const otel = instrumented();
    // Registered globally, then instrument() with no options.
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
    const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
    const meterProvider = new MeterProvider({ readers: [reader] });
    assert.equal(trace.setGlobalTracerProvider(provider), true);
    assert.equal(metrics.setGlobalMeterProvider(meterProvider), true);
    const uninstrument = instrument();
    try {
      await new ls.Lock(uniqueKey("otel-global"), 5_000, store).run(async () => {});
      assert.deepEqual(
        exporter.getFinishedSpans().map((s) => [s.name, s.instrumentationScope.name]),
        [
          ["locksmith acquire", "locksmith-js"],
          ["locksmith hold", "locksmith-js"],
        ],
      );
      await reader.forceFlush();
      const names = metricExporter
        .getMetrics()
        .at(-1)
        .scopeMetrics.flatMap((s) => s.metrics.map((m) => m.descriptor.name));
      assert.ok(names.includes("locksmith.acquire.duration") && names.includes("locksmith.held"), names.join());
    } finally {
      uninstrument();
      trace.disable();
      metrics.disable();
      await otel.close();
      await provider.shutdown();
      await meterProvider.shutdown();
    }
  });
});

describe("locksmith-js/otel on a real redis-server", () => {
  scenarios("redis", redisStore());
});

describe("instrument()'s options", () => {
  const refused = (options, message) => {
    assert.throws(
      () => instrument(options),
      (err) => {
        assert.ok(err instanceof packageApi.InvalidArgumentError, `an InvalidArgumentError: ${err}`);
        assert.equal(err.code, "INVALID_ARGUMENT");
        assert.match(err.message, /^locksmith: /);
        assert.match(err.message, message);
        return true;
      },
    );
  };

  it("refuses unknown options, naming a close one", () => {
    refused({ meter: {} }, /unknown option `meter` for instrument\(\); did you mean `meterProvider`\?/);
    refused({ recordKey: true }, /did you mean `recordKeys`\?/);
    refused({ bogus: 1 }, /the options are meterProvider, tracerProvider, recordKeys/);
  });

  it("refuses options of the wrong type", () => {
    refused(null, /takes an options object; got null/);
    refused("fast", /got string/);
    refused([], /got an array/);
    refused({ meterProvider: {} }, /meterProvider must be an OpenTelemetry MeterProvider/);
    refused({ tracerProvider: 42 }, /tracerProvider must be an OpenTelemetry TracerProvider.*got number/);
    refused({ recordKeys: "yes" }, /recordKeys must be a boolean; got string/);
  });

  it("accepts each option alone and undefined ones", () => {
    for (const options of [undefined, {}, { recordKeys: false }, { meterProvider: undefined }, { tracerProvider: trace.getTracerProvider() }]) {
      const stop = instrument(options);
      assert.equal(typeof stop, "function");
      stop();
    }
  });

  it("reports the package's version", () => {
    assert.equal(VERSION, JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version);
  });
});

describe("the otel entry's packaging", () => {
  it("is the same instrument() from require(), with the package's errors", () => {
    const require = createRequire(import.meta.url);
    const cjs = require("locksmith-js/otel");
    assert.equal(typeof cjs.instrument, "function");
    assert.equal(cjs.VERSION, VERSION);
    assert.throws(
      () => cjs.instrument({ bogus: 1 }),
      (err) => err instanceof require("locksmith-js").InvalidArgumentError,
    );
    const stop = cjs.instrument();
    stop();
  });

  it("is the only module of the package that imports @opentelemetry/api", () => {
    const js = join(root, "js");
    const files = readdirSync(js, { recursive: true }).filter((f) => /\.(mjs|cjs|js)$/.test(f) && !/^(native|wasm)\//.test(f));
    const importers = files.filter((f) => /["']@opentelemetry\//.test(readFileSync(join(js, f), "utf8"))).map((f) => relative(root, join(js, f)));
    assert.deepEqual(importers.sort(), ["js/gen/otel.cjs", "js/otel.mjs"]);
    const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
    assert.equal(manifest.peerDependenciesMeta["@opentelemetry/api"]?.optional, true);
    assert.ok(!manifest.dependencies?.["@opentelemetry/api"], "not a dependency");
    for (const [name, version] of Object.entries(manifest.devDependencies)) {
      if (name.startsWith("@opentelemetry/")) assert.match(version, /^\d+\.\d+\.\d+$/, `${name} is pinned exactly`);
    }
  });

  it("type-checks where @opentelemetry/api is not installed (skipLibCheck: false): its types stand alone", async () => {
    // A project of its own outside this repository, so no node_modules above it holds the API.
    const dir = await mkdtemp(join(tmpdir(), "locksmith-otel-types-"));
    try {
      await mkdir(join(dir, "types"));
      await copyFile(join(root, "js/types/otel.d.ts"), join(dir, "types/otel.d.ts"));
      await writeFile(
        join(dir, "use.ts"),
        [
          'import { instrument, VERSION, type InstrumentOptions } from "locksmith-js/otel";',
          "const options: InstrumentOptions = { recordKeys: true };",
          "const stop: () => void = instrument(options);",
          "// A provider is anything with getMeter / getTracer, as OpenTelemetry's are.",
          "instrument({ meterProvider: { getMeter: (name: string, version?: string) => ({ name, version }) } });",
          "// @ts-expect-error recordKeys is a boolean",
          'instrument({ recordKeys: "yes" });',
          "stop();",
          "export const version: string = VERSION;",
          "",
        ].join("\n"),
      );
      await writeFile(
        join(dir, "tsconfig.json"),
        JSON.stringify({
          compilerOptions: {
            strict: true,
            noEmit: true,
            skipLibCheck: false,
            target: "ES2022",
            module: "ESNext",
            moduleResolution: "bundler",
            types: [],
            lib: ["ES2022"],
            paths: { "locksmith-js/otel": ["./types/otel.d.ts"] },
          },
          files: ["use.ts"],
        }),
      );
      const tsc = join(root, "node_modules/typescript/bin/tsc");
      const checked = await run(process.execPath, [tsc, "-p", join(dir, "tsconfig.json")]).then(
        () => ({ code: 0, stdout: "" }),
        (err) => ({ code: err.code, stdout: `${err.stdout}${err.stderr}` }),
      );
      assert.equal(checked.code, 0, checked.stdout);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("loads no OpenTelemetry module when only the main entry is imported", async () => {
    // A resolve hook that reports every specifier resolved, then the main entry.
    const hook = `data:text/javascript,${encodeURIComponent(
      `export async function resolve(s, c, next) { if (s.includes("@opentelemetry")) process.stdout.write("LOADED " + s + "\\n"); return next(s, c); }`,
    )}`;
    const register = `import { register } from "node:module"; register(${JSON.stringify(hook)});`;
    const code = `const ls = await import("locksmith-js"); await ls.lock("k").run(() => {}); console.log("done", ls.backend);`;
    const { stdout } = await run(process.execPath, ["--import", `data:text/javascript,${encodeURIComponent(register)}`, "--input-type=module", "-e", code], {
      cwd: root,
      env: { ...process.env, LOCKSMITH_FORCE_WASM: TARGET === "wasm" ? "1" : "" },
    });
    assert.match(stdout, /^done (native|wasm)\n$/);
    // And the check can see an import: the otel entry's.
    const seen = await run(
      process.execPath,
      ["--import", `data:text/javascript,${encodeURIComponent(register)}`, "--input-type=module", "-e", `await import("locksmith-js/otel");`],
      {
        cwd: root,
      },
    );
    assert.match(seen.stdout, /LOADED @opentelemetry\/api/);
  });
});

describe("examples/otel-prometheus.mjs", () => {
  it("serves locksmith's metrics as Prometheus text", async () => {
    const { stdout } = await run(process.execPath, [join(root, "examples/otel-prometheus.mjs"), "--once"], {
      cwd: root,
      env: { ...process.env, PORT: "0", LOCKSMITH_FORCE_WASM: TARGET === "wasm" ? "1" : "" },
      timeout: 30_000,
    });
    assert.match(stdout, /^Serving Prometheus metrics at http:\/\/127\.0\.0\.1:\d+\/metrics$/m);
    const lines = stdout.split("\n");
    assert.ok(
      lines.some((l) => /^locksmith_acquire_duration\w*_count\{[^}]*locksmith_outcome="acquired"[^}]*\} [1-9]/.test(l)),
      stdout,
    );
    assert.ok(
      lines.some((l) => /^locksmith_acquire_duration\w*_count\{[^}]*locksmith_outcome="busy"[^}]*\} [1-9]/.test(l)),
      stdout,
    );
    assert.ok(
      lines.some((l) => /^locksmith_hold_duration\w*_count\{[^}]*locksmith_outcome="released"/.test(l)),
      stdout,
    );
    assert.ok(
      lines.some((l) => /^locksmith_held\{[^}]*locksmith_kind="semaphore"[^}]*\} 0/.test(l)),
      stdout,
    );
  });
});
