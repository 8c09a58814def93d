// Where the Redis time goes: what the server spends per pair (INFO cpu: its CPU time;
// INFO commandstats: each command type's calls and time, a script's inner commands
// counted under their own names as well as inside the script's), the commands a
// client's pair sends (as MONITOR shows them), and the bare floor: those same commands
// replayed from a minimal RESP client on a plain socket, so that the client's share and
// the server's share of a pair are measured, not guessed.
import net from "node:net";

import { countRequests } from "./round-trips.mjs";

/** Command types that run a script: their time includes their inner commands'. */
export const SCRIPT_COMMANDS = ["eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"];

/** The server's CPU time so far (user + system, s) and each command type's `{ calls, usec }`. */
export async function sampleServer(admin) {
  const info = await admin.call("INFO", "cpu", "commandstats");
  const field = (name) => Number(new RegExp(`^${name}:([0-9.]+)`, "m").exec(info)?.[1] ?? Number.NaN);
  const commands = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) commands[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  return { cpuSeconds: field("used_cpu_user") + field("used_cpu_sys"), commands };
}

/**
 * What the server spent between two samples, per unit (a pair, a critical section):
 * `cpuUs` (INFO cpu), `commands` (each command type's calls and µs; `info`, the
 * samples' own, left out) and `scriptsUs` (the script commands' µs, their inner
 * commands included).
 */
export function serverCost(before, after, units) {
  const commands = {};
  for (const [name, v] of Object.entries(after.commands)) {
    if (name === "info") continue;
    const was = before.commands[name] ?? { calls: 0, usec: 0 };
    if (v.calls === was.calls) continue;
    commands[name] = { calls: (v.calls - was.calls) / units, usec: (v.usec - was.usec) / units };
  }
  const scriptsUs = SCRIPT_COMMANDS.reduce((sum, name) => sum + (commands[name]?.usec ?? 0), 0);
  return { cpuUs: ((after.cpuSeconds - before.cpuSeconds) * 1e6) / units, scriptsUs, commands };
}

/**
 * The commands one pair sends: `prepare()` opens and warms up the client (unmeasured),
 * `run()` makes one pair. `commands` are the pair's requests in order (arguments as
 * latin1 strings, to be written back as latin1), `scripted` the names of the commands its
 * scripts ran.
 */
export async function capturePair(admin, port, prepare, run) {
  const counted = await countRequests(admin, port, prepare, run, { keep: true });
  return {
    commands: counted.lines.filter((l) => l.source !== "lua").map((l) => l.args),
    scripted: counted.lines.filter((l) => l.source === "lua").map((l) => l.args[0].toLowerCase()),
  };
}

/**
 * A minimal RESP2 client on one socket, nothing between the caller and the write:
 * `send(args)` writes one command and resolves with its reply (simple and bulk strings,
 * integers, arrays, `null` for nil), or rejects with an error reply's text. Replies come
 * in order, so several commands may be in flight.
 */
export function respClient(port, host = "127.0.0.1") {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host);
    socket.setNoDelay(true);
    socket.setEncoding("latin1");
    const waiting = [];
    let rest = "";
    socket.on("data", (chunk) => {
      rest += chunk;
      for (;;) {
        const parsed = parseReply(rest, 0);
        if (parsed === undefined) return;
        rest = rest.slice(parsed.end);
        const w = waiting.shift();
        if (parsed.value instanceof Error) w.reject(parsed.value);
        else w.resolve(parsed.value);
      }
    });
    const failAll = (err) => {
      for (const w of waiting.splice(0)) w.reject(err);
    };
    socket.on("error", (err) => {
      failAll(err);
      reject(err);
    });
    socket.on("close", () => failAll(new Error("locksmith bench: the RESP connection closed")));
    socket.once("connect", () =>
      resolve({
        send(args) {
          let out = `*${args.length}\r\n`;
          for (const a of args) {
            const s = String(a);
            out += `$${Buffer.byteLength(s, "latin1")}\r\n${s}\r\n`;
          }
          return new Promise((resolveReply, rejectReply) => {
            waiting.push({ resolve: resolveReply, reject: rejectReply });
            socket.write(out, "latin1");
          });
        },
        close: () => socket.destroy(),
      }),
    );
  });
}

/** One RESP2 reply at `at` in `text`: `{ value, end }`, or undefined when it is not all there. */
function parseReply(text, at) {
  const eol = text.indexOf("\r\n", at);
  if (eol < 0) return undefined;
  const head = text.slice(at + 1, eol);
  const next = eol + 2;
  switch (text[at]) {
    case "+":
      return { value: head, end: next };
    case "-":
      return { value: new Error(head), end: next };
    case ":":
      return { value: Number(head), end: next };
    case "$": {
      const len = Number(head);
      if (len < 0) return { value: null, end: next };
      if (text.length < next + len + 2) return undefined;
      return { value: text.slice(next, next + len), end: next + len + 2 };
    }
    case "*": {
      const len = Number(head);
      if (len < 0) return { value: null, end: next };
      const items = [];
      let end = next;
      for (let i = 0; i < len; i++) {
        const item = parseReply(text, end);
        if (item === undefined) return undefined;
        items.push(item.value);
        end = item.end;
      }
      return { value: items, end };
    }
    default:
      throw new Error(`locksmith bench: an unexpected RESP reply: ${JSON.stringify(text.slice(at, at + 40))}`);
  }
}

/** Sends `commands` one after the other, each after the previous one's reply (as a pair does). */
export async function replay(client, commands) {
  for (const args of commands) await client.send(args);
}
