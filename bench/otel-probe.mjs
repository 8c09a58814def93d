// What observing locks costs per acquire+release pair on the memory store (both builds):
// nothing subscribed, a do-nothing subscriber on every diagnostics channel, and
// `locksmith-js/otel`'s instrument() over the OpenTelemetry SDK (a MeterProvider with a
// reader, a tracer provider whose spans go nowhere). Rounds interleaved; the median of
// each. A benchmark, not a test. `N=200000 ROUNDS=5 node bench/otel-probe.mjs`
import dc from "node:diagnostics_channel";
import { MeterProvider, InMemoryMetricExporter, AggregationTemporality, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider } from "@opentelemetry/sdk-trace-base";

import * as native from "../js/node.mjs";
import * as wasm from "../js/wasm.mjs";
import { instrument } from "../js/otel.mjs";

const N = Number(process.env.N ?? 200_000);
const ROUNDS = Number(process.env.ROUNDS ?? 5);

async function pairs(ls) {
  const l = new ls.Lock("invoice:42", 30_000, new ls.MemoryLockStore());
  const started = performance.now();
  for (let i = 0; i < N; i++) {
    await l.acquire();
    await l.release();
  }
  return ((performance.now() - started) * 1e6) / N; // ns per pair
}

const noop = { start() {}, end() {}, asyncStart() {}, asyncEnd() {}, error() {} };
const modes = {
  "nothing subscribed": (run) => run(),
  "a do-nothing subscriber": async (run) => {
    const channels = ["acquire", "release", "extend"].map((n) => dc.tracingChannel(`locksmith:${n}`));
    const lost = () => {};
    for (const c of channels) c.subscribe(noop);
    dc.subscribe("locksmith:lost", lost);
    try {
      return await run();
    } finally {
      for (const c of channels) c.unsubscribe(noop);
      dc.unsubscribe("locksmith:lost", lost);
    }
  },
  "instrument() with the SDK": async (run) => {
    const reader = new PeriodicExportingMetricReader({ exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE), exportIntervalMillis: 60_000 });
    const meterProvider = new MeterProvider({ readers: [reader] });
    const tracerProvider = new BasicTracerProvider();
    const off = instrument({ meterProvider, tracerProvider });
    try {
      return await run();
    } finally {
      off();
      await meterProvider.shutdown();
    }
  },
};

const results = {};
for (let round = 0; round < ROUNDS; round++) {
  for (const [build, ls] of [
    ["native", native],
    ["wasm", wasm],
  ]) {
    for (const [mode, around] of Object.entries(modes)) {
      const key = `${build}: ${mode}`;
      (results[key] ??= []).push(await around(() => pairs(ls)));
    }
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`${N} acquire+release pairs per run, ${ROUNDS} rounds, median ns per pair (Node ${process.version}):`);
for (const build of ["native", "wasm"]) {
  const base = median(results[`${build}: nothing subscribed`]);
  for (const mode of Object.keys(modes)) {
    const m = median(results[`${build}: ${mode}`]);
    const extra = mode === "nothing subscribed" ? "" : `  (+${Math.round(m - base)} ns)`;
    console.log(`  ${`${build}, ${mode}`.padEnd(40)} ${Math.round(m).toString().padStart(7)} ns${extra}`);
  }
}
