// locksmith's metrics for Prometheus: locksmith-js/otel over an OpenTelemetry MeterProvider
// whose reader is @opentelemetry/exporter-prometheus, served at /metrics.
//
//   npm install locksmith-js @opentelemetry/api @opentelemetry/sdk-metrics @opentelemetry/exporter-prometheus
//   node examples/otel-prometheus.mjs            # serves on PORT (default 9464) until stopped
//   PORT=0 node examples/otel-prometheus.mjs     # any free port (it prints the URL)
//   node examples/otel-prometheus.mjs --once     # fetches its own /metrics once, prints it, exits
//
// Then point a Prometheus scrape job at the printed URL.
import { createServer } from "node:http";
import { PrometheusExporter } from "@opentelemetry/exporter-prometheus";
import { MeterProvider } from "@opentelemetry/sdk-metrics";
import { lock, semaphore } from "locksmith-js";
import { instrument } from "locksmith-js/otel";

const once = process.argv.includes("--once") || process.env.LOCKSMITH_EXAMPLE_ONCE === "1";
const port = Number(process.env.PORT ?? 9464);
const host = process.env.HOST ?? "127.0.0.1";

// The exporter is the MeterProvider's reader; its request handler answers the scrapes,
// here on a server of our own (so that port 0 works and the URL can be printed).
const exporter = new PrometheusExporter({ preventServerStart: true });
const meterProvider = new MeterProvider({ readers: [exporter] });
const uninstrument = instrument({ meterProvider });

const server = createServer((req, res) => {
  if (req.url === "/metrics") exporter.getMetricsRequestHandler(req, res);
  else res.writeHead(404).end("try /metrics\n");
});
await new Promise((resolve) => server.listen(port, host, resolve));
const url = `http://${host}:${server.address().port}/metrics`;
console.log(`Serving Prometheus metrics at ${url}`);

// Some locks to see: two workers racing for one invoice (one runs, one is turned away),
// a waiter, and a few semaphore permits.
const work = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function takeSomeLocks() {
  await Promise.all([lock("invoice:42").run(() => work(50)), lock("invoice:42").run(() => work(50))]);
  const holder = lock("report");
  await holder.acquire();
  setTimeout(() => holder.release(), 30);
  await lock("report").run(() => work(10), { timeout: 1_000 });
  // Three exports, at most two at a time: one handle each.
  await Promise.all([1, 2, 3].map(() => semaphore("exports", 2).run(() => work(20), { timeout: 1_000 })));
}

await takeSomeLocks();
if (once) {
  process.stdout.write(await (await fetch(url)).text());
  uninstrument();
  await meterProvider.shutdown();
  server.close();
} else {
  // Keep taking locks, so the numbers move between scrapes.
  setInterval(takeSomeLocks, 5_000);
}
