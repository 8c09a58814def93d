// A fair queue whose head dies: a waiter in a child process takes its place at the head
// of a fair lock's queue (or a fair semaphore's, of one permit) while this process holds
// the key, a second waiter here queues behind it, the child is SIGKILLed and the key
// released. The dead waiter's place lasts its lease (the TTL from its latest attempt), so
// the second waiter is granted once that has run out, and no sooner. js-tests/fair-stores.test.mjs holds each store with fair
// queues to the bound; the stores are support/takeover.mjs's rows marked `fair`.
import { spawn } from "node:child_process";
import { setTimeout as sleep } from "node:timers/promises";

import { openStore } from "../histories/client.mjs";

/** The waiters' retry delay. */
export const RETRY_MS = 50;

const CLIENT = new URL("../histories/client.mjs", import.meta.url).href;

/** A fair handle of `kind` on `key`: a lock, or a semaphore of one permit. */
const fairHandle = (ls, kind, key, ttl, store) =>
  kind === "semaphore" ? ls.semaphore(key, 1, ttl, store, { fair: true }) : ls.lock(key, ttl, store, { fair: true });

// The head of the queue: says it waits, then waits (a minute at most) for the fair lock or semaphore.
const HEAD = `
const ls = await import(process.argv[1]);
const { openStore } = await import(process.argv[2]);
const [key, ttl, retryDelay, spec, kind] = [process.argv[3], Number(process.argv[4]), Number(process.argv[5]), JSON.parse(process.argv[6]), process.argv[7]];
const { store } = await openStore(ls, spec);
const waiter = (${fairHandle})(ls, kind, key, ttl, store);
console.log(JSON.stringify({ waiting: true }));
console.log(JSON.stringify({ granted: await waiter.acquire({ timeout: 60_000, retryDelay }) }));
setInterval(() => {}, 1_000);
`;

/** Resolves once `child` has said it waits; rejects if it exits first or says it was granted. */
function waiting(child) {
  let out = "";
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the head of the queue did not start within 20 s:\n${err}`)), 20_000);
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes('"granted"')) reject(new Error(`the head of the queue was granted while the key was held: ${out}`));
      if (out.includes('"waiting"')) {
        clearTimeout(timer);
        resolve(() => out);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`the head of the queue exited with ${code}\n${err}`));
    });
  });
}

/**
 * The scenario above on the store `spec` (histories/client.mjs openStore) with leases of
 * `ttlMs`, for a fair lock or semaphore (`kind`). Resolves to `{ ms, waited, headGranted }`: from the kill until the second
 * waiter was granted; whether it still waited when the head was killed (it must: the key
 * was held); whether the head ever said it was granted.
 */
export async function nextAfterHeadKilled(build, { key, spec, ttlMs, kind = "lock", retryMs = RETRY_MS, headStartMs = 300, waitMs = 200 }) {
  const { ls } = build;
  const opened = await openStore(ls, spec);
  const args = ["--input-type=module", "-e", HEAD, build.entry, CLIENT, key, String(ttlMs), String(retryMs), JSON.stringify(spec), kind];
  let child;
  try {
    const holder = fairHandle(ls, kind, key, 60_000, opened.store);
    if (!(await holder.acquire())) throw new Error(`the key ${key} was not free`);
    child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
    const said = await waiting(child);
    // Its first attempt (its place) reaches the store.
    await sleep(headStartMs);
    const next = fairHandle(ls, kind, key, ttlMs, opened.store);
    let settled = false;
    const standing = next.acquire({ timeout: 2 * ttlMs + 20_000, retryDelay: retryMs }).finally(() => (settled = true));
    await sleep(waitMs);
    const waited = !settled;
    const killedAt = performance.now();
    child.kill("SIGKILL");
    await holder.release();
    const granted = await standing;
    const ms = performance.now() - killedAt;
    if (!granted) throw new Error("the second waiter timed out");
    await next.release();
    return { ms, waited, headGranted: said().includes('"granted":true') };
  } finally {
    child?.kill("SIGKILL");
    await opened.close().catch(() => {});
  }
}
