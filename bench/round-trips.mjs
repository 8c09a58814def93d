// Client round trips, counted by the server. A MONITOR connection sees every command a
// client sends — each a request answered by a reply, pipelined or not, on a subscribed
// connection too (SUBSCRIBE, UNSUBSCRIBE, PING) — and shows the commands a Lua script runs
// with `lua` in place of a client address; those are not round trips. (Checked on
// redis-server 7.0.) MONITOR does not show commands flagged admin (CONFIG, ...) nor calls
// the server rejects, and a monitor that falls behind or drops would undercount, so every
// count is checked against the server's own counters and a count that cannot be trusted
// throws instead of being reported.
import { randomUUID } from "node:crypto";
import net from "node:net";

// `+1796057241.723967 [0 127.0.0.1:51336] "HELLO" "3"`; an IPv6 source is `[::1]:port`.
const LINE = /^\+\d+\.\d+ \[\d+ (.+?)\] "/;

const ESCAPES = { n: "\n", r: "\r", t: "\t", a: "\x07", b: "\b", '"': '"', "\\": "\\" };

/**
 * A MONITOR line's source (`127.0.0.1:51336`, or `lua` for a script's commands) and its
 * arguments, unquoted as the server quoted them (`\"`, `\\`, `\n`, `\xHH`, ...): each
 * argument's bytes as a latin1 string. `null` for a line that is not a command.
 */
export function monitorArgs(line) {
  const m = LINE.exec(line);
  if (!m) return null;
  const args = [];
  for (const [, quoted] of line.slice(m[0].length - 1).matchAll(/"((?:[^"\\]|\\.)*)"/g)) {
    args.push(
      quoted.replace(/\\(x[0-9a-fA-F]{2}|.)/g, (_, e) =>
        e[0] === "x" && e.length === 3 ? String.fromCharCode(Number.parseInt(e.slice(1), 16)) : (ESCAPES[e] ?? e),
      ),
    );
  }
  return { source: m[1], args };
}

/** A MONITOR connection to `port` on loopback; resolves once the server confirmed it. */
function openMonitor(port) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.setEncoding("latin1");
    const monitor = { socket, onLine: () => {}, error: null, close: () => socket.destroy() };
    let confirmed = false;
    let rest = "";
    const fail = (err) => {
      monitor.error ??= err;
      if (!confirmed) reject(err);
      monitor.onLine(null);
    };
    socket.on("data", (chunk) => {
      rest += chunk;
      for (let i = rest.indexOf("\r\n"); i >= 0; i = rest.indexOf("\r\n")) {
        const line = rest.slice(0, i);
        rest = rest.slice(i + 2);
        if (confirmed) monitor.onLine(line);
        else if (line === "+OK") {
          confirmed = true;
          resolve(monitor);
        } else fail(new Error(`locksmith bench: MONITOR answered ${line}`));
      }
    });
    socket.on("error", fail);
    socket.on("close", () => fail(new Error("locksmith bench: the MONITOR connection closed")));
    socket.write("MONITOR\r\n");
  });
}

/** The addresses of the server's client connections (as MONITOR shows them). */
async function clientAddresses(admin) {
  const list = await admin.call("CLIENT", "LIST");
  return new Set([...list.matchAll(/\baddr=(\S+)/g)].map((m) => m[1]));
}

/** total_commands_processed and the sum of rejected_calls over every command. */
async function serverCounters(admin) {
  const info = await admin.call("INFO", "stats", "commandstats");
  const processed = /total_commands_processed:(\d+)/.exec(info);
  if (!processed) throw new Error("locksmith bench: INFO has no total_commands_processed");
  const rejected = [...info.matchAll(/rejected_calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
  return { processed: Number(processed[1]), rejected };
}

/**
 * Counts the requests sent by the connections that `prepare()` and `run()` open: every
 * connection the server already has (`admin`'s, other clients') is left out. `prepare()`
 * opens and warms up the contender, unmeasured; `run()` is measured, between two markers
 * that `admin` sends. Resolves with `run()`'s result, `requests` (the new connections'
 * commands), `scripted` (the commands their scripts ran), `connections` (how many new
 * connections sent any) and `others` (commands from connections that were already open).
 * With `keep`, also `lines`: the new connections' commands in order, `{ source, args }`
 * (`source` is `lua` for a script's commands).
 * Throws when MONITOR missed anything the server counted or the server rejected a call.
 */
export async function countRequests(admin, port, prepare, run, { keep = false } = {}) {
  const monitor = await openMonitor(port);
  try {
    const known = await clientAddresses(admin);
    await prepare();
    const start = `locksmith-bench:start:${randomUUID()}`;
    const end = `locksmith-bench:end:${randomUUID()}`;
    const bySource = new Map();
    let phase = "before";
    let lines = 0;
    const kept = [];
    let scriptOwner = null;
    let wake = () => {};
    const reached = (want) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`locksmith bench: MONITOR did not show the ${want} marker within 10 s`)), 10_000);
        wake = () => {
          if (monitor.error) reject(monitor.error);
          else if (phase === want) resolve();
          else return;
          clearTimeout(timer);
        };
        wake();
      });
    monitor.onLine = (line) => {
      if (line !== null) {
        if (line.includes(start)) phase = "counting";
        else if (line.includes(end)) phase = "done";
        else if (phase === "counting") {
          const m = LINE.exec(line);
          if (!m) {
            monitor.error ??= new Error(`locksmith bench: an unexpected MONITOR line: ${line.slice(0, 200)}`);
          } else {
            lines += 1;
            // A script's commands follow its EVAL/EVALSHA/FCALL line: they are its client's.
            const scripted = m[1] === "lua";
            if (!scripted) scriptOwner = m[1];
            if (keep) kept.push({ owner: scriptOwner, line });
            const counts = bySource.get(scriptOwner) ?? { requests: 0, scripted: 0 };
            if (scripted) counts.scripted += 1;
            else counts.requests += 1;
            bySource.set(scriptOwner, counts);
          }
        }
      }
      wake();
    };
    const before = await serverCounters(admin);
    await admin.call("ECHO", start);
    await reached("counting");
    const result = await run();
    await admin.call("ECHO", end);
    await reached("done");
    const after = await serverCounters(admin);
    if (monitor.error) throw monitor.error;
    // Between the two INFO calls the server ran the first INFO, the two ECHOs and what
    // MONITOR showed between the ECHOs: anything else went unseen.
    const unseen = after.processed - before.processed - 3 - lines;
    if (unseen !== 0) {
      throw new Error(
        `locksmith bench: the server processed ${after.processed - before.processed - 3} commands while MONITOR showed ${lines}: the round-trip count cannot be trusted`,
      );
    }
    if (after.rejected !== before.rejected) {
      throw new Error(
        `locksmith bench: the server rejected ${after.rejected - before.rejected} calls, which MONITOR does not show: the round-trip count cannot be trusted`,
      );
    }
    const totals = { requests: 0, scripted: 0, connections: 0, others: 0 };
    for (const [source, counts] of bySource) {
      if (source === null) throw new Error("locksmith bench: MONITOR showed script commands with no client before them");
      if (known.has(source)) {
        totals.others += counts.requests;
      } else {
        totals.requests += counts.requests;
        totals.scripted += counts.scripted;
        totals.connections += 1;
      }
    }
    if (totals.requests === 0) throw new Error("locksmith bench: MONITOR saw no command from the measured client: the round-trip count would be zero");
    if (!keep) return { result, ...totals };
    return { result, ...totals, lines: kept.filter(({ owner }) => !known.has(owner)).map(({ line }) => monitorArgs(line)) };
  } finally {
    monitor.close();
  }
}

/**
 * Known traffic for checking `countRequests`: `open(makeClient)` opens a plain and a
 * subscriber connection; `run()` sends `sets` SETs and `scripts` two-command scripts on
 * the plain one, two pipelined GETs, SUBSCRIBE, PING and UNSUBSCRIBE on the subscriber,
 * and one SET on `bystander`, a connection opened before the count. `want` is what the
 * count must say.
 */
export function knownTraffic(bystander, { sets, scripts }) {
  let plain;
  let sub;
  return {
    async open(makeClient) {
      plain = makeClient();
      sub = makeClient();
      await Promise.all([plain.ping(), sub.ping()]);
    },
    async run() {
      for (let i = 0; i < sets; i++) await plain.set(`k${i}`, "v");
      // Each script runs two commands.
      for (let i = 0; i < scripts; i++) await plain.eval("redis.call('get', KEYS[1]); return redis.call('get', KEYS[1])", 1, "k0");
      // Pipelined, still two requests.
      await Promise.all([plain.get("k1"), plain.get("k2")]);
      await sub.subscribe("known-traffic");
      await sub.ping();
      await sub.unsubscribe("known-traffic");
      await bystander.set("bystander", "1");
    },
    want: { requests: sets + scripts + 5, scripted: 2 * scripts, connections: 2, others: 1 },
  };
}
