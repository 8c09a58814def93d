// `npx locksmith-js list|inspect|watch|release` end to end: the command as a process
// against a real redis-server, a real Redis Cluster (three masters), a real PostgreSQL and
// a real etcd, and a real MariaDB, on locks, semaphores and read-write locks that
// RedisLockStore, a client store, PostgresLockStore, EtcdLockStore and MySqlLockStore hold. In the wasm pass the command runs with
// LOCKSMITH_FORCE_WASM=1, so its RESP pieces come from the WebAssembly engine.
//
// Exit codes: 0 done (inspect: held; watch: stopped by a signal), 1 nothing matched
// (inspect: free), 2 a usage error or a store that could not be reached, was lost or refused.
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import net from "node:net";
import { existsSync, readFileSync } from "node:fs";
import { cp, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";

import { Cluster, Redis } from "ioredis";
import pg from "pg";

import { DEFAULT_KEY_PREFIX, ELECTION_KEY_PREFIX } from "../js/api/defaults.mjs";
import { EtcdLockStore } from "../js/stores/etcd.mjs";
import { IoRedisLockStore } from "../js/stores/ioredis.mjs";
import { MySqlLockStore } from "../js/stores/mysql.mjs";
import { PostgresLockStore } from "../js/stores/postgres.mjs";
import { requireEtcd, startEtcd } from "./support/etcd-server.mjs";
import { requireMysql, startMysql } from "./support/mysql-server.mjs";
import { requirePostgres, startPostgres } from "./support/postgres-server.mjs";
import { freePort, startRedis } from "./support/redis-server.mjs";
import { clusterSlots, command, startCluster } from "./support/redis-topology.mjs";
import { storeOnServer } from "./support/server-stores.mjs";
import { ls, sleep, TARGET, uniqueKey } from "./support/target.mjs";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLI = join(ROOT, "js/cli/cli.mjs");

const { Client } = pg;

const ENV = { ...process.env, ...(TARGET === "wasm" ? { LOCKSMITH_FORCE_WASM: "1" } : {}) };
// The store URL the command reads from the environment: set only by the tests about it.
delete ENV.LOCKSMITH_STORE_URL;

/**
 * Runs the command (`cli` is its file), with `env` added to its environment; resolves to
 * { code, stdout, stderr } whatever its exit code.
 */
async function run(cli, args, extraEnv = {}) {
  const env = { ...ENV, ...extraEnv };
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [cli, ...args], { env, timeout: 30_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    if (typeof err.code !== "number") throw err;
    return { code: err.code, stdout: err.stdout, stderr: err.stderr };
  }
}
const cli = (...args) => run(CLI, args);
/** The command with LOCKSMITH_STORE_URL set to `url`. */
const cliWithUrl = (url, ...args) => run(CLI, args, { LOCKSMITH_STORE_URL: url });

// The warning of a password given on the command line, where ps and the shell's history show it.
const PASSWORD_WARNING = /^locksmith: warning: the store URL argument holds a password/;
/** `stderr` of a run given a password in its URL argument: the warning (once, first), then the rest. */
function afterPasswordWarning(stderr) {
  const [first, ...rest] = stderr.split("\n");
  assert.match(first, PASSWORD_WARNING, stderr);
  assert.equal(rest.filter((line) => PASSWORD_WARNING.test(line)).length, 0, `one warning:\n${stderr}`);
  return rest.join("\n");
}

const fingerprint = (owner) => createHash("sha256").update(owner).digest("hex").slice(0, 8);
const ownerOf = (lock) => JSON.parse(lock.serialize()).owner;
const listed = (stdout) =>
  stdout
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line))
    .sort((x, y) => x.key.localeCompare(y.key) || x.kind.localeCompare(y.kind) || x.owner.localeCompare(y.owner));
const byOwner = (a, b) => a.owner.localeCompare(b.owner);

/**
 * `locksmith <args>` as a running process (`watch`): `lines` as they come, `until(check)`
 * resolves with the first line (from `from` on) that `check` accepts, `exit` with
 * `{ code, signal, stdout, stderr }`.
 */
function started(args, { timeoutMs = 20_000 } = {}) {
  const child = spawn(process.execPath, [CLI, ...args], { env: ENV, stdio: ["ignore", "pipe", "pipe"] });
  const lines = [];
  let stdout = "";
  let stderr = "";
  let partial = "";
  const waiting = new Set();
  child.stdout.on("data", (chunk) => {
    stdout += chunk;
    partial += chunk;
    const parts = partial.split("\n");
    partial = parts.pop();
    lines.push(...parts);
    for (const w of waiting) w();
  });
  child.stderr.on("data", (chunk) => {
    stderr += chunk;
  });
  const killer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  const exit = new Promise((resolve) =>
    child.on("exit", (code, signal) => {
      clearTimeout(killer);
      for (const w of waiting) w();
      resolve({ code, signal, stdout, stderr });
    }),
  );
  return {
    child,
    lines,
    exit,
    until(what, check, from = 0) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(look);
          reject(new Error(`no line ${what} within ${timeoutMs} ms; stdout:\n${stdout}\nstderr:\n${stderr}`));
        }, timeoutMs);
        const look = () => {
          const at = lines.findIndex((line, i) => i >= from && check(line));
          if (at >= 0) {
            clearTimeout(timer);
            waiting.delete(look);
            resolve({ line: lines[at], at });
          } else if (child.exitCode !== null || child.signalCode !== null) {
            clearTimeout(timer);
            waiting.delete(look);
            reject(new Error(`the command ended before a line ${what}; stdout:\n${stdout}\nstderr:\n${stderr}`));
          }
        };
        waiting.add(look);
        look();
      });
    },
  };
}

/** A line of `watch --json` as an object, or undefined when it is not one. */
const event = (line) => {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
};
/** A check for `until`: a JSON line with every field of `want`. */
const eventLike = (want) => (line) => {
  const e = event(line);
  return e !== undefined && Object.entries(want).every(([k, v]) => e[k] === v);
};

/**
 * A hold taken just after a watch started: "acquired", or "held" when the watch's first
 * read came after it (a slow start on a loaded machine).
 */
const appeared = (want) => (line) => {
  const e = event(line);
  return e !== undefined && (e.event === "acquired" || e.event === "held") && Object.entries(want).every(([k, v]) => e[k] === v);
};

/**
 * Weighted semaphore holds on `store` (at `url`, the command's further `args`): a holder of
 * 3 of a limit of 5 and one of 1, beside a lock. `list` and `inspect` give each semaphore
 * holder its `permits` (a lock none), their text shows "semaphore ×3", inspect counts 4 of 5
 * permits; `watch --json`'s events for them carry their permits; `release` says "×3".
 * `released(key)` looks at the store just after the command freed the semaphore.
 */
async function weightedPermits(store, url, base, { args = [], released = async () => {} } = {}) {
  const key = `${base}:sem`;
  const watching = started(["watch", url, `${base}:*`, "--json", "--interval", "100", ...args]);
  try {
    await sleep(500);
    const big = ls.semaphore(key, 5, 30_000, store);
    const small = ls.semaphore(key, 5, 30_000, store);
    const lock = new ls.Lock(`${base}:lock`, 30_000, store);
    assert.equal(await big.acquire({ permits: 3 }), true);
    assert.equal(await small.acquire(), true);
    assert.equal(await lock.acquire(), true);
    const [bigOwner, smallOwner] = [fingerprint(ownerOf(big)), fingerprint(ownerOf(small))];
    const weights = (holders) =>
      holders
        .filter((h) => h.kind === "semaphore")
        .sort((a, b) => (a.owner === bigOwner ? -1 : b.owner === bigOwner ? 1 : 0))
        .map((h) => [h.owner, h.permits]);
    const want = [
      [bigOwner, 3],
      [smallOwner, 1],
    ];

    for (const owner of [bigOwner, smallOwner]) {
      const seen = event((await watching.until(`for the holder ${owner}`, appeared({ key, kind: "semaphore", owner }))).line);
      assert.equal(seen.permits, owner === bigOwner ? 3 : 1, "watch --json: a semaphore hold's event carries its permits");
    }
    const lockSeen = event((await watching.until("for the lock", appeared({ key: `${base}:lock`, kind: "lock" }))).line);
    assert.ok(!("permits" in lockSeen), "a lock's event has no permits");

    const inspected = await cli("inspect", url, key, "--json", ...args);
    assert.equal(inspected.code, 0, inspected.stderr);
    const report = JSON.parse(inspected.stdout);
    assert.deepEqual([report.kind, report.limit], ["semaphore", 5]);
    assert.deepEqual(weights(report.holders), want, "inspect --json: each holder's permits");
    assert.deepEqual(
      report.holders.map((h) => h.permits).sort((a, b) => b - a),
      [3, 1],
    );
    const text = await cli("inspect", url, key, ...args);
    assert.match(text.stdout, /is held \(semaphore, 4 of 5 permits\)/, "the permits held, not the holders");
    assert.match(text.stdout, new RegExp(`^semaphore ×3\\s+\\d+\\.\\d s\\s+\\S+\\s+${bigOwner}$`, "m"));
    assert.match(text.stdout, new RegExp(`^semaphore\\s+\\d+\\.\\d s\\s+\\S+\\s+${smallOwner}$`, "m"), "one permit: no ×1");

    const list = await cli("list", url, `${base}:*`, "--json", ...args);
    assert.equal(list.code, 0, list.stderr);
    const holds = listed(list.stdout);
    assert.deepEqual(weights(holds), want, "list --json: each holder's permits");
    assert.deepEqual(
      holds.filter((h) => h.kind === "lock").map((h) => "permits" in h),
      [false],
      "a lock has no permits",
    );
    const listText = await cli("list", url, `${base}:*`, ...args);
    assert.match(listText.stdout, new RegExp(`^${key}\\s+semaphore ×3\\s+\\d+\\.\\d s\\s+\\S+\\s+${bigOwner}$`, "m"));
    assert.match(listText.stdout, new RegExp(`^${key}\\s+semaphore\\s+\\d+\\.\\d s\\s+\\S+\\s+${smallOwner}$`, "m"));

    const from = watching.lines.length;
    const freed = await cli("release", url, key, "--force", ...args);
    assert.equal(freed.code, 0, freed.stderr);
    assert.match(freed.stdout, new RegExp(`^released "${key}" \\(semaphore ×3\\): it was held by ${bigOwner}`, "m"));
    assert.match(freed.stdout, new RegExp(`^released "${key}" \\(semaphore\\): it was held by ${smallOwner}`, "m"));
    const ended = event((await watching.until("for the end of the 3", eventLike({ event: "ended", key, owner: bigOwner }), from)).line);
    assert.equal(ended.permits, 3, "an ended semaphore hold's event carries its permits");
    for (const h of [big, small]) assert.equal(await h.isExpired(), true);
    await released(key);
    // The five are free again: the next holder may take them all.
    const all = ls.semaphore(key, 5, 30_000, store);
    assert.equal(await all.acquire({ permits: 5 }), true);
    await all.release();
    await lock.release();
    watching.child.kill("SIGINT");
    assert.equal((await watching.exit).code, 0);
  } finally {
    watching.child.kill("SIGKILL");
  }
}

/**
 * A lock, both permits of a semaphore of limit 2 and a `rwKind` ("read" or "write") hold of
 * a read-write lock, under `base` (`:lock`, `:sem`, `:rw`) through `store`, all taken:
 * `{ l, permits, rw }`.
 */
async function holdEveryKind(store, base, rwKind) {
  const l = new ls.Lock(`${base}:lock`, 30_000, store);
  const permits = [ls.semaphore(`${base}:sem`, 2, 30_000, store), ls.semaphore(`${base}:sem`, 2, 30_000, store)];
  const rwLock = ls.readWriteLock(`${base}:rw`, 30_000, store);
  const rw = rwKind === "read" ? rwLock.readLock() : rwLock.writeLock();
  for (const h of [l, ...permits, rw]) assert.equal(await h.acquire(), true);
  return { l, permits, rw };
}

/** The key, kind, owner and fencing token of each listed hold. */
const listedFields = (holds) => holds.map(({ key, kind, owner, fencingToken }) => ({ key, kind, owner, fencingToken }));

/** What `list --json` shows of holdEveryKind()'s holds, in its order. */
const everyKindListed = (base, { l, permits, rw }, rwKind) => [
  { key: `${base}:lock`, kind: "lock", owner: fingerprint(ownerOf(l)), fencingToken: l.fencingToken },
  { key: `${base}:rw`, kind: rwKind, owner: fingerprint(ownerOf(rw)), fencingToken: rw.fencingToken },
  ...permits.map((h) => ({ key: `${base}:sem`, kind: "semaphore", owner: fingerprint(ownerOf(h)), fencingToken: h.fencingToken })).sort(byOwner),
];

/**
 * `inspect` of `base`'s read-write lock while a reader (through `readers`) holds it and a
 * writer (through `writers`, retrying every `retryDelay` ms) waits: the reader holds, the
 * writer waits (and holds nothing), and `watching` (a `watch` of `base`'s keys) sees both
 * and the reader's end; `checkReport(got, reader)` checks more of inspect's answer before
 * the reader leaves.
 */
async function inspectWaitingWriter(watching, url, base, { readers, writers, retryDelay, checkReport = () => {} }) {
  const reader = ls.readWriteLock(`${base}:rw`, 30_000, readers).readLock();
  assert.equal(await reader.acquire(), true);
  const readerOwner = fingerprint(ownerOf(reader));
  await watching.until("for the reader", appeared({ key: `${base}:rw`, kind: "read", owner: readerOwner }));
  const writer = ls.readWriteLock(`${base}:rw`, 30_000, writers).writeLock();
  const writing = writer.acquire({ timeout: 20_000, retryDelay });
  await watching.until("for the waiting writer", eventLike({ event: "waiters", key: `${base}:rw`, waiters: 1, previousWaiters: 0 }));

  const got = await cli("inspect", url, `${base}:rw`, "--json");
  assert.equal(got.code, 0, got.stderr);
  const report = JSON.parse(got.stdout);
  assert.deepEqual([report.key, report.held, report.kind, report.waiters], [`${base}:rw`, true, "read", 1]);
  assert.deepEqual(
    report.holders.map((h) => [h.kind, h.owner, h.fencingToken]),
    [["read", readerOwner, reader.fencingToken]],
    "the waiting writer holds nothing",
  );
  assert.deepEqual(
    report.waiting.map((w) => w.kind),
    ["write"],
  );
  checkReport(got, reader);
  await reader.release();
  assert.equal(await writing, true);
  assert.equal(report.waiting[0].owner, fingerprint(ownerOf(writer)));
  await watching.until("for the reader's end", eventLike({ event: "ended", key: `${base}:rw`, kind: "read", owner: readerOwner }));
  await writer.release();
}

/** `inspect` of a plain lock under `base` held through `store`: its holder, its waiters unknown (null); free once released, as `watching` sees. */
async function inspectPlainLock(watching, url, base, store) {
  const l = new ls.Lock(`${base}:lock`, 30_000, store);
  assert.equal(await l.acquire(), true);
  const plain = await cli("inspect", url, `${base}:lock`, "--json");
  assert.equal(plain.code, 0, plain.stderr);
  const held = JSON.parse(plain.stdout);
  assert.deepEqual(
    [held.held, held.kind, held.waiters, held.holders[0].owner, held.holders[0].fencingToken],
    [true, "lock", null, fingerprint(ownerOf(l)), l.fencingToken],
  );
  assert.match((await cli("inspect", url, `${base}:lock`)).stdout, /^waiters: unknown \(/m);
  await l.release();
  const free = await cli("inspect", url, `${base}:lock`, "--json");
  assert.equal(free.code, 1, free.stderr);
  assert.equal(JSON.parse(free.stdout).held, false);
  await watching.until("for the lock's end", eventLike({ event: "ended", key: `${base}:lock`, kind: "lock" }));
}

/**
 * A fair lock's queue and a fair semaphore's as `inspect` lists them on `store` (at `url`):
 * two lock waiters with 20 s and 10 s TTLs in the order they asked, each place with the
 * time it is kept for (`gapMs` between the asks: long enough for a place to land), a
 * semaphore waiter first in its own line; `list` counts holds only; nothing once the waits
 * are aborted. `waitersWhileHeld`: what `waiters` says while a fair handle holds the key and
 * nobody is in line (0 where the store marks fair holds, null where it does not);
 * `waitersQueued`: what it says with the three in line (Redis counts the connections
 * subscribed to each of the key's release channels: one to the lock's, one to the
 * semaphore's here).
 */
async function fairQueueCase(store, url, { prefix, gapMs, waitersWhileHeld, waitersQueued = 3 }) {
  const key = uniqueKey(prefix);
  const holder = ls.lock(key, 30_000, store, { fair: true });
  assert.equal(await holder.acquire(), true);
  const held = JSON.parse((await cli("inspect", url, key, "--json")).stdout);
  assert.deepEqual([held.waiters, held.waiting], [waitersWhileHeld, []], "a fair key held, nobody in line");
  const controller = new AbortController();
  const waiters = [ls.lock(key, 20_000, store, { fair: true }), ls.lock(key, 10_000, store, { fair: true })];
  const waits = [];
  for (const w of waiters) {
    waits.push(w.acquire({ timeout: 30_000, signal: controller.signal }).catch((err) => err.code));
    // Each takes its place before the next asks.
    await sleep(gapMs);
  }
  // The key's semaphore queues apart from its lock: its waiter is first in its own line.
  const slots = ls.semaphore(key, 1, 30_000, store, { fair: true });
  assert.equal(await slots.acquire(), true);
  const slotWaiter = ls.semaphore(key, 1, 30_000, store, { fair: true });
  waits.push(slotWaiter.acquire({ timeout: 30_000, signal: controller.signal }).catch((err) => err.code));
  await sleep(gapMs);
  const got = await cli("inspect", url, key);
  assert.equal(got.code, 0, got.stderr);
  const lines = got.stdout.split("\n");
  assert.equal(lines.filter((l) => l.startsWith("waiting: 1st in the fair semaphore's queue, ")).length, 1, got.stdout);
  const queue = lines.filter((l) => l.startsWith("waiting: ") && l.includes("fair lock"));
  assert.equal(queue.length, 2, got.stdout);
  // In line in the order they asked: the first with its 20 s TTL, the second with 10 s
  // (to the second on etcd, whose leases count whole seconds).
  assert.match(queue[0], /^waiting: 1st in the fair lock's queue, \S+ \(its place kept for (19|20)(\.\d+)? s\)$/, got.stdout);
  assert.match(queue[1], /^waiting: 2nd in the fair lock's queue, \S+ \(its place kept for (9|10)(\.\d+)? s\)$/, got.stdout);
  assert.ok(
    lines.some((l) => l === `waiters: ${waitersQueued}` || l.startsWith(`waiters: ${waitersQueued} (`)),
    got.stdout,
  );
  const json = JSON.parse((await cli("inspect", url, key, "--json")).stdout);
  assert.deepEqual(
    json.waiting.map((w) => w.kind),
    ["lock", "lock", "semaphore"],
  );
  assert.ok(json.waiting[0].remainingMs > 15_000 && json.waiting[1].remainingMs < 11_000, JSON.stringify(json.waiting));
  // The listing counts holds only.
  const listed = (await cli("list", url, key, "--json")).stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.deepEqual(listed.map((h) => h.kind).sort(), ["lock", "semaphore"]);
  controller.abort();
  assert.deepEqual(
    await Promise.all(waits),
    waits.map(() => "ABORTED"),
  );
  await holder.release();
  await slots.release();
  // Given up at the abort: nobody waits now.
  const after = JSON.parse((await cli("inspect", url, key, "--json")).stdout);
  assert.deepEqual([after.held, after.waiting], [false, []]);
}

/**
 * `locksmith leader <url> <name>` on `store`'s store: no leader (exit 1), then the leader of
 * a campaign (its owner's fingerprint, its term, since when, its value), in text and JSON,
 * and none after its resign; `--watch` follows each change until SIGINT.
 */
async function leaderCase(store, url) {
  const name = uniqueKey("cli-election");
  let { code, stdout } = await cli("leader", url(), name);
  assert.equal(code, 1);
  assert.equal(stdout, `election ${JSON.stringify(name)} has no leader\n`);
  const following = started(["leader", url(), name, "--watch", "--json", "--interval", "50"]);
  const change = (check) => (line) => {
    const e = event(line);
    return e !== undefined && e.name === name && check(e.leader);
  };
  await following.until(
    "for no leader",
    change((l) => l === null),
  );
  const before = Date.now();
  const leadership = await ls.election(name, { store: store() }).campaign({ value: { host: "a.example", port: 8080 } });
  try {
    ({ code, stdout } = await cli("leader", url(), name));
    assert.equal(code, 0, stdout);
    assert.match(
      stdout,
      new RegExp(
        `^election ${JSON.stringify(name)} is led by \\S+, term ${leadership.term}, since \\S+Z \\([\\d.]+ s ago\\), value \\{"host":"a.example","port":8080\\}, with [\\d.]+ s left on its lease \\(a live leader renews it before then; one that died leaves it to run out\\)\\n$`,
      ),
    );
    ({ code, stdout } = await cli("leader", url(), name, "--json"));
    const json = JSON.parse(stdout);
    assert.equal(json.name, name);
    assert.equal(json.leader.term, leadership.term);
    assert.deepEqual(json.leader.value, { host: "a.example", port: 8080 });
    const since = Date.parse(json.leader.since);
    assert.ok(since >= before - 1_000 && since <= Date.now(), stdout);
    assert.ok(json.leader.remainingMs > 0 && json.leader.remainingMs <= 15_000, stdout);
    assert.equal(typeof json.leader.owner, "string");
    await following.until(
      "for the leader",
      change((l) => l?.term === leadership.term && l.value?.host === "a.example"),
    );
    // A new value in the same term: a new line.
    await leadership.proclaim({ host: "b.example" });
    await following.until(
      "for the new value",
      change((l) => l?.term === leadership.term && l.value?.host === "b.example"),
    );
    // list names the leader's hold by the election's name, of kind "election".
    const listed = (await cli("list", url(), "*", "--json")).stdout
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line))
      .filter((h) => h.key === name);
    assert.deepEqual(
      listed.map((h) => [h.kind, h.fencingToken]),
      [["election", leadership.term]],
    );
    // A lock of the same name is another thing: its key is free.
    assert.equal((await cli("inspect", url(), name)).code, 1);
    // --election names the election: inspect shows its leader, release ends a stuck one.
    const inspected = await cli("inspect", url(), name, "--election", "--json");
    assert.equal(inspected.code, 0, inspected.stderr);
    const report = JSON.parse(inspected.stdout);
    assert.deepEqual([report.key, report.kind, report.holders[0].fencingToken], [name, "election", leadership.term]);
    assert.match((await cli("release", url(), name, "--election")).stderr, /ends the election .* leadership, whoever leads/);
    const freed = await cli("release", url(), name, "--election", "--force");
    assert.equal(freed.code, 0, freed.stderr);
    assert.match(
      freed.stdout,
      new RegExp(`^released the election ${JSON.stringify(name)}: it was held by \\S+ with [\\d.]+ s left \\(fencing token ${leadership.term}\\)`),
    );
    assert.equal((await cli("leader", url(), name)).code, 1, "no leader once released");
  } finally {
    assert.equal(await leadership.resign(), false, "the leader's hold was ended by the release");
  }
  const ended = await following.until(
    "for the end of the term",
    change((l) => l === null),
    2,
  );
  following.child.kill("SIGINT");
  const exit = await following.exit;
  assert.equal(exit.code, 0, exit.stderr);
  // A line per change, each of this term (the first may show it before its value is kept).
  const leaders = following.lines.slice(0, ended.at + 1).map((line) => event(line).leader);
  assert.ok(leaders.length >= 4 && leaders.length <= 5, exit.stdout);
  assert.deepEqual(
    leaders.filter((l) => l !== null).map((l) => l.term),
    leaders.filter((l) => l !== null).map(() => leadership.term),
  );
  assert.equal((await cli("leader", url(), name)).code, 1);
  // A name election() would refuse is a usage error, not "no leader".
  const bad = await cli("leader", url(), "a\u0001b");
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /not an election's name/);
}

describe("locksmith on Redis", () => {
  let server;
  let native;
  let client;
  let viaClient;
  before(async () => {
    server = await startRedis();
    native = await ls.RedisLockStore.connect(server.url);
    client = new Redis(server.url);
    viaClient = new IoRedisLockStore(client);
  });
  after(async () => {
    await native?.close();
    await viaClient?.close();
    await client?.quit();
    await server?.stop();
  });

  it("leader: who leads an election (owner, term, since, value, lease left), --watch; exit 1 when none", () =>
    leaderCase(
      () => native,
      () => server.url,
    ));

  it("inspect lists a fair lock's queue in order, each waiter with the time its place is kept for", () =>
    // Waiters: the connections subscribed to the key's releases (the store's one).
    fairQueueCase(native, server.url, { prefix: "cli-redis-fair", gapMs: 100, waitersWhileHeld: 0, waitersQueued: 2 }));

  it("lists held locks with remaining time, fencing token and an owner fingerprint, never the token", async () => {
    const base = uniqueKey("cli");
    const a = new ls.Lock(`${base}:a`, 30_000, native);
    const b = new ls.Lock(`${base}:b`, 60_000, viaClient);
    const other = new ls.Lock(uniqueKey("elsewhere"), 30_000, native);
    await Promise.all([a.acquire(), b.acquire(), other.acquire()]);
    const { code, stdout, stderr } = await cli("list", server.url, `${base}:*`, "--json");
    assert.equal(code, 0, stderr);
    const locks = listed(stdout);
    assert.deepEqual(
      locks.map((l) => l.key),
      [`${base}:a`, `${base}:b`],
    );
    assert.deepEqual(
      locks.map((l) => l.kind),
      ["lock", "lock"],
    );
    assert.deepEqual(
      locks.map((l) => l.fencingToken),
      [a.fencingToken, b.fencingToken],
    );
    assert.deepEqual(
      locks.map((l) => l.owner),
      [fingerprint(ownerOf(a)), fingerprint(ownerOf(b))],
    );
    assert.ok(locks[0].remainingMs > 20_000 && locks[0].remainingMs <= 30_000, `${locks[0].remainingMs}`);
    assert.ok(locks[1].remainingMs > 50_000);
    assert.ok(!stdout.includes(ownerOf(a)) && !stdout.includes(ownerOf(b)), "owner tokens stay secret");

    const text = await cli("list", server.url, `${base}:*`);
    assert.match(text.stdout, /^KEY\s+KIND\s+REMAINING\s+FENCING TOKEN\s+OWNER\n/);
    assert.match(text.stdout, new RegExp(`${base}:a\\s+lock\\s+\\d+\\.\\d s\\s+${a.fencingToken}\\s+${fingerprint(ownerOf(a))}`));
    await Promise.all([a.release(), b.release(), other.release()]);
    const none = await cli("list", server.url, `${base}:*`);
    assert.equal(none.stdout, "no locks held\n");
    assert.equal(none.code, 1, "nothing matched");
  });

  it("lists semaphore permits and read-write holds, each holder on its own line", async () => {
    const base = uniqueKey("cli-permits");
    const permits = [ls.semaphore(`${base}:sem`, 3, 30_000, native), ls.semaphore(`${base}:sem`, 3, 30_000, native)];
    const readers = [ls.readWriteLock(`${base}:rw`, 40_000, native).readLock(), ls.readWriteLock(`${base}:rw`, 40_000, native).readLock()];
    const writer = ls.readWriteLock(`${base}:w`, 50_000, native).writeLock();
    for (const h of [...permits, ...readers, writer]) assert.equal(await h.acquire(), true);
    const { code, stdout, stderr } = await cli("list", server.url, `${base}:*`, "--json");
    assert.equal(code, 0, stderr);
    const got = listed(stdout);
    const want = [
      ...readers.map((h) => ({ key: `${base}:rw`, kind: "read", owner: fingerprint(ownerOf(h)) })).sort(byOwner),
      ...permits.map((h) => ({ key: `${base}:sem`, kind: "semaphore", owner: fingerprint(ownerOf(h)) })).sort(byOwner),
      { key: `${base}:w`, kind: "write", owner: fingerprint(ownerOf(writer)) },
    ];
    assert.deepEqual(
      got.map(({ key, kind, owner }) => ({ key, kind, owner })),
      want,
    );
    for (const entry of got) {
      const ttl = { read: 40_000, semaphore: 30_000, write: 50_000 }[entry.kind];
      assert.ok(entry.remainingMs > ttl - 10_000 && entry.remainingMs <= ttl, `${entry.kind}: ${entry.remainingMs}`);
    }
    const text = await cli("list", server.url, `${base}:*`);
    assert.match(text.stdout, new RegExp(`${base}:sem\\s+semaphore\\s+\\d+\\.\\d s`));
    assert.match(text.stdout, new RegExp(`${base}:w\\s+write\\s+\\d+\\.\\d s`));
    for (const h of [...permits, ...readers, writer]) await h.release();
  });

  it("release --force frees a semaphore's permits and a read-write lock's holds, and wakes their waiters", async () => {
    const key = uniqueKey("cli-sem-release");
    const held = [ls.semaphore(key, 2, 30_000, native), ls.semaphore(key, 2, 30_000, native)];
    for (const h of held) assert.equal(await h.acquire(), true);
    const waiter = ls.semaphore(key, 2, 30_000, native);
    const got = waiter.acquire({ timeout: 20_000, retryDelay: 5_000 });
    await sleep(100);
    const start = performance.now();
    const done = await cli("release", server.url, key, "--force");
    assert.equal(done.code, 0, done.stderr);
    for (const h of held) {
      assert.match(done.stdout, new RegExp(`^released "${key}" \\(semaphore\\): it was held by ${fingerprint(ownerOf(h))} with \\d+\\.\\d s left`, "m"));
    }
    assert.equal(await got, true);
    assert.ok(performance.now() - start < 3_000, "the waiter was woken, not left to its 5 s retry");
    for (const h of held) assert.equal(await h.isExpired(), true);
    await waiter.release();

    const rwKey = uniqueKey("cli-rw-release");
    const writer = ls.readWriteLock(rwKey, 30_000, native).writeLock();
    assert.equal(await writer.acquire(), true);
    const reader = ls.readWriteLock(rwKey, 30_000, native).readLock();
    const reading = reader.acquire({ timeout: 20_000, retryDelay: 5_000 });
    await sleep(100);
    const freed = await cli("release", server.url, rwKey, "--force");
    assert.equal(freed.code, 0, freed.stderr);
    assert.match(freed.stdout, new RegExp(`^released "${rwKey}" \\(write\\): it was held by ${fingerprint(ownerOf(writer))}`));
    assert.equal(await reading, true);
    assert.equal(await writer.isExpired(), true);
    await reader.release();
    const again = await cli("release", server.url, rwKey, "--force");
    assert.equal(again.code, 1);
    assert.match(again.stdout, /was not held: nothing to release/);
  });

  it("release needs --force, then frees the lock, says what it did, and wakes a waiter", async () => {
    const key = uniqueKey("cli-release");
    const holder = new ls.Lock(key, 30_000, native);
    await holder.acquire();
    const refused = await cli("release", server.url, key);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /^locksmith: release frees .* Add --force/);
    assert.equal(await holder.isExpired(), false, "nothing happened without --force");

    const waiter = new ls.Lock(key, 30_000, native);
    const got = waiter.acquire({ timeout: 20_000, retryDelay: 5_000 });
    const start = performance.now();
    const done = await cli("release", server.url, key, "--force");
    assert.equal(done.code, 0, done.stderr);
    assert.match(
      done.stdout,
      new RegExp(`^released "${key}": it was held by ${fingerprint(ownerOf(holder))} with \\d+\\.\\d s left \\(fencing token ${holder.fencingToken}\\)`),
    );
    assert.equal(await got, true);
    assert.ok(performance.now() - start < 3_000, "the waiter was woken, not left to its 5 s retry");
    assert.equal(await holder.isExpired(), true);
    await waiter.release();

    const again = await cli("release", server.url, key, "--force");
    assert.equal(again.code, 1);
    assert.match(again.stdout, /was not held: nothing to release/);
  });

  it("release --force of an election's key deletes its leader's value with the hold", async () => {
    const key = `${ELECTION_KEY_PREFIX}${uniqueKey("cli-election-release")}`;
    const redisKey = `${DEFAULT_KEY_PREFIX}{${key}}`;
    assert.notEqual(await native.acquire(key, "leader", 30_000), false);
    assert.equal(await native.proclaim(key, "leader", '{"host":"a"}', 1), true);
    assert.equal(await client.exists(`${redisKey}:value`), 1);
    const done = await cli("release", server.url, key, "--force");
    assert.equal(done.code, 0, done.stderr);
    assert.equal(await client.exists(redisKey, `${redisKey}:value`), 0, "the lock and its value are gone");
  });

  it("needs no Redis client package: it runs from a copy of the package without ioredis or redis beside it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "locksmith-cli-"));
    try {
      await cp(join(ROOT, "js"), join(dir, "js"), { recursive: true });
      await cp(join(ROOT, "package.json"), join(dir, "package.json"));
      const key = uniqueKey("cli-alone");
      const holder = new ls.Lock(key, 30_000, native);
      await holder.acquire();
      const alone = await run(join(dir, "js/cli/cli.mjs"), ["list", server.url, key, "--json"]);
      assert.equal(alone.code, 0, alone.stderr);
      assert.deepEqual(
        listed(alone.stdout).map((l) => [l.key, l.owner]),
        [[key, fingerprint(ownerOf(holder))]],
      );
      const freed = await run(join(dir, "js/cli/cli.mjs"), ["release", server.url, key, "--force"]);
      assert.equal(freed.code, 0, freed.stderr);
      assert.equal(await holder.isExpired(), true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("says what is wrong with its input: usage errors exit 2 with the usage", async () => {
    for (const [args, message] of [
      [["list"], /usage: locksmith list/],
      [["list", "http://example.com"], /unsupported store URL scheme http:/],
      [["list", "not a url"], /not a store URL/],
      [["frobnicate", server.url], /unknown command "frobnicate"/],
      [["list", server.url, "--prefix", "a{"], /--prefix must not contain/],
      [["list", server.url, "--bogus"], /^locksmith: unknown option --bogus\n/],
      [["list", server.url, "-x"], /^locksmith: unknown option -x\n/],
      [["list", server.url, "--prefix"], /^locksmith: --prefix needs a value\n/],
      [["list", server.url, "--json=yes"], /^locksmith: --json takes no value\n/],
      [["inspect", server.url], /usage: locksmith inspect <store-url> <key>/],
      [["inspect", server.url, "a", "b"], /usage: locksmith inspect/],
      [["watch"], /usage: locksmith watch <store-url> \[pattern\]/],
      [["watch", server.url, "--interval", "soon"], /--interval must be whole milliseconds from 10 to 3600000; got soon/],
      [["watch", server.url, "--interval", "0"], /--interval must be whole milliseconds/],
      [["watch", server.url, "--interval"], /^locksmith: --interval needs a value\n/],
      [["list", server.url, "--interval", "100"], /--interval goes with watch/],
    ]) {
      const { code, stderr } = await cli(...args);
      assert.equal(code, 2, `${args.join(" ")}: ${stderr}`);
      assert.match(stderr, /^locksmith: /);
      assert.match(stderr, message);
      assert.doesNotMatch(stderr, /To specify a positional argument|ERR_PARSE_ARGS/, "no raw parser text");
    }
    for (const args of [["list", server.url, "--bogus"], []]) {
      const { code, stdout, stderr } = await cli(...args);
      assert.equal(code, 2, `${JSON.stringify(args)} exits 2`);
      assert.match(stderr, /usage:\n\s+locksmith list <store-url>/, `${JSON.stringify(args)} shows the usage`);
      assert.equal(stdout, "");
    }
    const help = await cli("--help");
    assert.equal(help.code, 0);
    assert.match(help.stdout, /usage:\n\s+locksmith list <store-url>/);
    assert.match(help.stdout, /exit codes/i);
    const version = await cli("--version");
    assert.equal(version.code, 0);
    assert.equal(version.stdout, `locksmith-js ${JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version}\n`);
  });

  it("a mistyped command gets the nearest one: did you mean list?", async () => {
    for (const [typed, meant] of [
      ["lsit", "list"],
      ["lst", "list"],
      ["inpsect", "inspect"],
      ["wacth", "watch"],
      ["relase", "release"],
      ["List", "list"],
    ]) {
      const { code, stdout, stderr } = await cli(typed, server.url);
      assert.equal(code, 2, `${typed}: ${stderr}`);
      assert.equal(stdout, "");
      assert.match(stderr, new RegExp(`^locksmith: unknown command "${typed}": did you mean ${meant}\\?`), typed);
    }
    const far = await cli("frobnicate", server.url);
    assert.doesNotMatch(far.stderr, /did you mean/);
    // The store URL where the command goes: the order is the hint.
    const swapped = await cli(server.url, "list");
    assert.equal(swapped.code, 2);
    assert.match(swapped.stderr, /^locksmith: unknown command "redis:\/\/127\.0\.0\.1:\d+": the command comes first: locksmith list <store-url>/);
    const option = await cli("list", server.url, "--jsno");
    assert.match(option.stderr, /^locksmith: unknown option --jsno: did you mean --json\?/);
  });

  it("--help shows both ways to run it, npx locksmith-js and locksmith, once, and names LOCKSMITH_STORE_URL", async () => {
    const { code, stdout } = await cli("--help");
    assert.equal(code, 0);
    assert.equal(stdout.split("npx locksmith-js <command>").length - 1, 1, stdout);
    assert.match(stdout, /npx locksmith-js <command> ….*locksmith <command> …/s);
    assert.match(stdout, /usage:\n\s+locksmith list <store-url>/);
    assert.match(stdout, /LOCKSMITH_STORE_URL +the store URL when the command is given none/);
  });

  it("takes the store URL from LOCKSMITH_STORE_URL when the arguments give none; an argument URL wins", async () => {
    const base = uniqueKey("cli-env");
    const held = new ls.Lock(`${base}:a`, 30_000, native);
    assert.equal(await held.acquire(), true);
    const listedByEnv = await cliWithUrl(server.url, "list", `${base}:*`, "--json");
    assert.equal(listedByEnv.code, 0, listedByEnv.stderr);
    assert.equal(listedByEnv.stderr, "");
    assert.deepEqual(
      listed(listedByEnv.stdout).map((l) => [l.key, l.owner]),
      [[`${base}:a`, fingerprint(ownerOf(held))]],
    );
    const everything = await cliWithUrl(server.url, "list", "--json");
    assert.equal(everything.code, 0, everything.stderr);
    assert.ok(listed(everything.stdout).some((l) => l.key === `${base}:a`));
    const inspected = await cliWithUrl(server.url, "inspect", `${base}:a`, "--json");
    assert.equal(inspected.code, 0, inspected.stderr);
    assert.equal(JSON.parse(inspected.stdout).key, `${base}:a`);
    // An argument URL wins over the variable (here: a port nobody listens on).
    const unreachable = `redis://127.0.0.1:${await freePort()}`;
    const explicit = await cliWithUrl(unreachable, "list", server.url, `${base}:*`, "--json");
    assert.equal(explicit.code, 0, explicit.stderr);
    const viaEnvDown = await cliWithUrl(unreachable, "list", `${base}:*`);
    assert.equal(viaEnvDown.code, 2);
    assert.match(viaEnvDown.stderr, /^locksmith: could not reach Redis at 127\.0\.0\.1:/);
    const freed = await cliWithUrl(server.url, "release", `${base}:a`, "--force");
    assert.equal(freed.code, 0, freed.stderr);
    assert.equal(await held.isExpired(), true);
    // Neither: the usage error says where a URL may come from.
    const none = await cli("list", `${base}:*`);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /not a store URL: .*: give the store URL after the command, or set LOCKSMITH_STORE_URL/);
    const nothing = await cli("list");
    assert.equal(nothing.code, 2);
    assert.match(nothing.stderr, /usage: locksmith list <store-url> \[pattern\] \(or set LOCKSMITH_STORE_URL\)/);
  });

  it("warns once when a password arrives in a command-line argument, never with the password; not from LOCKSMITH_STORE_URL", async () => {
    const guarded = await startRedis(["--requirepass", "pw-in-args"]);
    try {
      const url = `redis://:pw-in-args@127.0.0.1:${guarded.port}`;
      const argument = await cli("list", url);
      assert.equal(argument.code, 1, argument.stderr);
      assert.equal(argument.stdout, "no locks held\n");
      assert.equal(afterPasswordWarning(argument.stderr), "");
      assert.match(argument.stderr, /ps and the shell's history show it.*LOCKSMITH_STORE_URL/);
      assert.ok(!argument.stderr.includes("pw-in-args"), "the warning never shows the password");
      const fromEnv = await cliWithUrl(url, "list");
      assert.equal(fromEnv.code, 1, fromEnv.stderr);
      assert.equal(fromEnv.stderr, "");
      const user = await cli("list", `postgres://someone:pw@127.0.0.1:${await freePort()}/db?sslmode=disable`);
      afterPasswordWarning(user.stderr);
      const query = await cli("list", `postgres://someone@127.0.0.1:${await freePort()}/db?password=pw`);
      afterPasswordWarning(query.stderr);
      const noPassword = await cli("list", `redis://someone@127.0.0.1:${guarded.port}`);
      assert.doesNotMatch(noPassword.stderr, /warning/);
    } finally {
      await guarded.stop();
    }
  });

  it("an unreachable server is an error that names the address (exit 2), never the password", async () => {
    const port = await freePort();
    const down = await cli("list", `redis://:secret@127.0.0.1:${port}`);
    assert.equal(down.code, 2, down.stderr);
    assert.match(afterPasswordWarning(down.stderr), new RegExp(`^locksmith: could not reach Redis at 127\\.0\\.0\\.1:${port}`));
    assert.ok(!down.stderr.includes("secret"));
    const release = await cli("release", `redis://127.0.0.1:${port}`, "k", "--force");
    assert.equal(release.code, 2);
    assert.match(release.stderr, new RegExp(`could not reach Redis at 127\\.0\\.0\\.1:${port}`));
  });

  it("a server that accepts and never answers, or answers in another protocol, is an error (exit 2), never a hang", async () => {
    const sockets = [];
    const silent = net.createServer((s) => sockets.push(s)); // accepts, reads, never answers
    const http = net.createServer((s) => {
      sockets.push(s);
      s.end("HTTP/1.1 400 Bad Request\r\n\r\n");
    });
    await Promise.all([silent, http].map((srv) => new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve))));
    try {
      const started = performance.now();
      const frozen = await cli("list", `redis://127.0.0.1:${silent.address().port}`);
      assert.equal(frozen.code, 2, frozen.stderr);
      assert.match(frozen.stderr, /no answer within 5 s/);
      assert.ok(performance.now() - started < 20_000, "it gave up");
      const other = await cli("list", `redis://127.0.0.1:${http.address().port}`);
      assert.equal(other.code, 2, other.stderr);
      assert.match(other.stderr, /does not answer in the Redis protocol \(is it a Redis port\?\)/);
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
      http.close();
    }
  });

  it("a wrong or missing password is an error (exit 2), not an empty list", async () => {
    const guarded = await startRedis(["--requirepass", "right-password"]);
    try {
      const wrong = await cli("list", `redis://:wrong-password@127.0.0.1:${guarded.port}`);
      assert.equal(wrong.code, 2, wrong.stdout);
      assert.equal(wrong.stdout, "");
      assert.match(afterPasswordWarning(wrong.stderr), new RegExp(`^locksmith: Redis at 127\\.0\\.0\\.1:${guarded.port} refused the login: WRONGPASS`));
      assert.ok(!wrong.stderr.includes("wrong-password"));
      const missing = await cli("list", guarded.url);
      assert.equal(missing.code, 2);
      assert.match(missing.stderr, new RegExp(`^locksmith: Redis at 127\\.0\\.0\\.1:${guarded.port} .*NOAUTH`));
      const right = await cli("list", `redis://:right-password@127.0.0.1:${guarded.port}`);
      assert.equal(right.code, 1, right.stderr);
      assert.equal(right.stdout, "no locks held\n");
      const release = await cli("release", `redis://:wrong-password@127.0.0.1:${guarded.port}`, "k", "--force");
      assert.equal(release.code, 2);
      assert.match(release.stderr, /refused the login/);
    } finally {
      await guarded.stop();
    }
  });

  it("inspect: the holders of a key (fingerprints, never tokens), fencing token, time left and the processes waiting; exit 1 when free", async () => {
    const key = uniqueKey("cli-inspect");
    const holder = new ls.Lock(key, 30_000, native);
    assert.equal(await holder.acquire(), true);
    const text = await cli("inspect", server.url, key);
    assert.equal(text.code, 0, text.stderr);
    assert.match(
      text.stdout,
      new RegExp(
        `^"${key}" is held \\(lock\\):\\nKIND\\s+REMAINING\\s+FENCING TOKEN\\s+OWNER\\nlock\\s+\\d+\\.\\d s\\s+${holder.fencingToken}\\s+${fingerprint(ownerOf(holder))}\\n`,
      ),
    );
    assert.match(text.stdout, /^waiters: 0 \(connections subscribed to its release messages\)$/m);

    // Another connection waits on the key: subscribed to its release channel, it is a waiter.
    const other = await ls.RedisLockStore.connect(server.url);
    try {
      const waiter = new ls.Lock(key, 30_000, other);
      const waiting = waiter.acquire({ timeout: 20_000, retryDelay: 5_000 });
      await sleep(300);
      const got = await cli("inspect", server.url, key, "--json");
      assert.equal(got.code, 0, got.stderr);
      const report = JSON.parse(got.stdout);
      assert.equal(report.key, key);
      assert.equal(report.held, true);
      assert.equal(report.kind, "lock");
      assert.equal(report.waiters, 1, "one connection subscribed to the key's release channel");
      assert.deepEqual(
        report.holders.map(({ kind, owner, fencingToken }) => ({ kind, owner, fencingToken })),
        [{ kind: "lock", owner: fingerprint(ownerOf(holder)), fencingToken: holder.fencingToken }],
      );
      assert.ok(report.holders[0].remainingMs > 20_000 && report.holders[0].remainingMs <= 30_000, `${report.holders[0].remainingMs}`);
      assert.ok(!got.stdout.includes(ownerOf(holder)), "never the owner token");
      await holder.release();
      assert.equal(await waiting, true);
      await waiter.release();
    } finally {
      await other.close();
    }
    const free = await cli("inspect", server.url, key, "--json");
    assert.equal(free.code, 1, free.stderr);
    assert.deepEqual(
      { ...JSON.parse(free.stdout), waiters: undefined },
      { key, held: false, kind: null, holders: [], limit: null, waiters: undefined, waiting: [] },
    );
    const freeText = await cli("inspect", server.url, key);
    assert.equal(freeText.code, 1);
    assert.match(freeText.stdout, new RegExp(`^"${key}" is free\\n`));
  });

  it("inspect: a semaphore's permits and limit; a read-write lock's readers, and a waiting writer as a waiter, not a holder", async () => {
    const key = uniqueKey("cli-inspect-permits");
    const permits = [ls.semaphore(key, 3, 30_000, native), ls.semaphore(key, 3, 30_000, native)];
    for (const p of permits) assert.equal(await p.acquire(), true);
    const sem = await cli("inspect", server.url, key, "--json");
    assert.equal(sem.code, 0, sem.stderr);
    const report = JSON.parse(sem.stdout);
    assert.equal(report.kind, "semaphore");
    assert.equal(report.limit, 3);
    assert.deepEqual(report.holders.map((h) => h.owner).sort(), permits.map((p) => fingerprint(ownerOf(p))).sort());
    assert.match((await cli("inspect", server.url, key)).stdout, /is held \(semaphore, 2 of 3 permits\)/);
    for (const p of permits) await p.release();

    const rwKey = uniqueKey("cli-inspect-rw");
    const reader = ls.readWriteLock(rwKey, 30_000, native).readLock();
    assert.equal(await reader.acquire(), true);
    const other = await ls.RedisLockStore.connect(server.url);
    try {
      const writer = ls.readWriteLock(rwKey, 30_000, other).writeLock();
      const writing = writer.acquire({ timeout: 20_000, retryDelay: 5_000 });
      await sleep(300);
      const got = await cli("inspect", server.url, rwKey, "--json");
      assert.equal(got.code, 0, got.stderr);
      const rw = JSON.parse(got.stdout);
      assert.equal(rw.kind, "read");
      assert.deepEqual(
        rw.holders.map((h) => [h.kind, h.owner]),
        [["read", fingerprint(ownerOf(reader))]],
      );
      assert.deepEqual(
        rw.waiting.map((w) => w.kind),
        ["write"],
        "the waiting writer's claim",
      );
      assert.equal(rw.waiters, 1);
      await reader.release();
      assert.equal(await writing, true);
      assert.equal(rw.waiting[0].owner, fingerprint(ownerOf(writer)));
      await writer.release();
    } finally {
      await other.close();
    }
  });

  it("weighted permits: list, inspect and watch give each semaphore holder its permits; inspect counts permits; release tidies the weights", async () => {
    const base = uniqueKey("cli-weights");
    await weightedPermits(native, server.url, base, {
      released: async (key) => assert.equal(await client.exists(`${DEFAULT_KEY_PREFIX}{${key}}:semaphore:weights`), 0, "release left no weights behind"),
    });
  });

  it("watch, piped: one JSON line per change (a hold appearing, changing owner, ending; waiters), until SIGINT (exit 0)", async () => {
    const base = uniqueKey("cli-watch");
    const before = new ls.Lock(`${base}:before`, 30_000, native);
    assert.equal(await before.acquire(), true);
    const watching = started(["watch", server.url, `${base}:*`, "--json", "--interval", "100"]);
    try {
      const first = event((await watching.until("for the lock held at the start", eventLike({ event: "held", key: `${base}:before` }))).line);
      assert.deepEqual(
        { ...first, time: undefined, remainingMs: undefined },
        {
          time: undefined,
          event: "held",
          key: `${base}:before`,
          kind: "lock",
          owner: fingerprint(ownerOf(before)),
          fencingToken: before.fencingToken,
          remainingMs: undefined,
        },
      );
      assert.ok(!Number.isNaN(Date.parse(first.time)));

      const a = new ls.Lock(`${base}:a`, 30_000, native);
      assert.equal(await a.acquire(), true);
      const acquired = event((await watching.until("for the new lock", eventLike({ event: "acquired", key: `${base}:a` }))).line);
      const tokenA = ownerOf(a);
      assert.equal(acquired.owner, fingerprint(tokenA));
      assert.equal(acquired.fencingToken, a.fencingToken);

      const other = await ls.RedisLockStore.connect(server.url);
      try {
        const b = new ls.Lock(`${base}:a`, 30_000, other);
        const waiting = b.acquire({ timeout: 20_000, retryDelay: 5_000 });
        await watching.until("for the waiter", eventLike({ event: "waiters", key: `${base}:a`, waiters: 1, previousWaiters: 0 }));
        await a.release();
        assert.equal(await waiting, true);
        const handed = event((await watching.until("for the new owner", eventLike({ event: "owner-changed", key: `${base}:a` }))).line);
        const tokenB = ownerOf(b);
        assert.deepEqual([handed.previousOwner, handed.owner], [fingerprint(tokenA), fingerprint(tokenB)]);
        const from = watching.lines.length;
        await b.release();
        await watching.until("for the end of the hold", eventLike({ event: "ended", key: `${base}:a`, kind: "lock", owner: fingerprint(tokenB) }), from);
      } finally {
        await other.close();
      }
      assert.ok(!watching.lines.some((line) => line.includes(tokenA) || line.includes(ownerOf(before))), "never an owner token");
      assert.ok(
        watching.lines.every((line) => event(line) !== undefined),
        "every line is JSON",
      );
      watching.child.kill("SIGINT");
      const { code, stderr } = await watching.exit;
      assert.equal(code, 0, stderr);
    } finally {
      watching.child.kill("SIGKILL");
      await before.release();
    }
  });

  it("watch, piped without --json: a line per change, readable; SIGTERM ends it (exit 0)", async () => {
    const base = uniqueKey("cli-watch-text");
    const watching = started(["watch", server.url, `${base}*`, "--interval", "100"]);
    try {
      await sleep(300);
      const sem = ls.semaphore(`${base}:sem`, 2, 30_000, native);
      assert.equal(await sem.acquire(), true);
      const { line } = await watching.until("for the permit", (l) => l.includes(`${base}:sem`));
      // "held" when the watch's first read came after the acquire (a slow start).
      assert.match(
        line,
        new RegExp(`^\\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z  (acquired {7}|held {11})${base}:sem  semaphore  ${fingerprint(ownerOf(sem))}  \\d+\\.\\d s left$`),
      );
      const owner = fingerprint(ownerOf(sem));
      await sem.release();
      const ended = await watching.until("for the end", (l) => / ended /.test(l));
      assert.match(ended.line, new RegExp(`Z  ended {10}${base}:sem  semaphore  ${owner}$`));
      watching.child.kill("SIGTERM");
      assert.equal((await watching.exit).code, 0);
    } finally {
      watching.child.kill("SIGKILL");
    }
  });

  it("watch in a terminal: a table redrawn in place, the cursor hidden, then shown again when it ends", {
    skip: !existsSync("/usr/bin/script") && process.env.CI !== "true" && "needs script(1) for a terminal",
  }, async () => {
    const key = uniqueKey("cli-watch-tty");
    const holder = new ls.Lock(key, 30_000, native);
    assert.equal(await holder.acquire(), true);
    try {
      // script(1) gives the command a terminal; SIGTERM after a few redraws.
      const command = `${process.execPath} ${CLI} watch ${server.url} '${key}' --interval 100 & pid=$!; sleep 3; kill -TERM $pid; wait $pid; echo "exit=$?"`;
      const { stdout } = await promisify(execFile)("script", ["-qfec", command, "/dev/null"], { env: ENV, timeout: 30_000 });
      assert.ok(stdout.startsWith("\x1b[?25l"), "the cursor is hidden");
      assert.ok(stdout.split("\x1b[H").length > 2, "redrawn in place, more than once");
      assert.match(stdout, /KEY\s+KIND\s+REMAINING\s+FENCING TOKEN\s+OWNER\s+WAITERS/);
      assert.match(stdout, new RegExp(`${key}\\s+lock\\s+\\d+\\.\\d s\\s+${holder.fencingToken}\\s+${fingerprint(ownerOf(holder))}\\s+0`));
      assert.match(stdout, /\x1b\[\?25h\r?\nexit=0/, "the cursor is shown again, and it exits 0");
      assert.ok(!stdout.includes(ownerOf(holder)));
    } finally {
      await holder.release();
    }
  });

  it("watch: a store that goes away ends it with exit 2 and says so, without hanging; one that is not there exits 2 at once", async () => {
    const doomed = await startRedis();
    const watching = started(["watch", doomed.url, "--interval", "100"]);
    try {
      await sleep(500);
      assert.equal(watching.child.exitCode, null, "watching");
      const stopped = performance.now();
      await doomed.stop();
      const { code, stderr } = await watching.exit;
      assert.equal(code, 2, stderr);
      assert.match(stderr, new RegExp(`^locksmith: watch: the store became unreachable: could not reach Redis at 127\\.0\\.0\\.1:${doomed.port}`));
      assert.ok(performance.now() - stopped < 15_000, "it gave up");
    } finally {
      watching.child.kill("SIGKILL");
      await doomed.stop();
    }
    const port = await freePort();
    for (const args of [
      ["watch", `redis://:secret@127.0.0.1:${port}`],
      ["inspect", `redis://:secret@127.0.0.1:${port}`, "k"],
    ]) {
      const down = await cli(...args);
      assert.equal(down.code, 2, `${args[0]}: ${down.stderr}`);
      assert.match(afterPasswordWarning(down.stderr), new RegExp(`^locksmith: could not reach Redis at 127\\.0\\.0\\.1:${port}`));
      assert.ok(!down.stderr.includes("secret"));
    }
  });
});

describe("locksmith on PostgreSQL", await requirePostgres(), () => {
  let server;
  let store;
  storeOnServer(
    startPostgres,
    (postgres) => PostgresLockStore.connect(postgres.url),
    (opened, started) => {
      [store, server] = [opened, started];
    },
  );

  it("leader: who leads an election (owner, term, since, value, lease left), --watch; exit 1 when none", () =>
    leaderCase(
      () => store,
      () => server.url,
    ));

  it("inspect lists a fair lock's queue and a fair semaphore's in order, each place with its lease left", () =>
    fairQueueCase(store, server.url, { prefix: "cli-pg-fair", gapMs: 100, waitersWhileHeld: 0 }));

  it("lists and frees semaphore permits and read-write holds beside locks", async () => {
    const base = uniqueKey("cli-pg");
    const { l, permits, rw: reader } = await holdEveryKind(store, base, "read");
    const { code, stdout, stderr } = await cli("list", server.url, `${base}:*`, "--json");
    assert.equal(code, 0, stderr);
    const got = listed(stdout);
    assert.deepEqual(listedFields(got), everyKindListed(base, { l, permits, rw: reader }, "read"));

    const waiter = ls.semaphore(`${base}:sem`, 2, 30_000, store);
    const waiting = waiter.acquire({ timeout: 20_000, retryDelay: 5_000 });
    await sleep(200);
    const start = performance.now();
    const freed = await cli("release", server.url, `${base}:sem`, "--force");
    assert.equal(freed.code, 0, freed.stderr);
    assert.equal(freed.stdout.trim().split("\n").length, 2, freed.stdout);
    assert.match(
      freed.stdout,
      new RegExp(
        `^released "${base}:sem" \\(semaphore\\): it was held by ${fingerprint(ownerOf(permits[0]))} with \\d+\\.\\d s left \\(fencing token ${permits[0].fencingToken}\\)`,
        "m",
      ),
    );
    assert.equal(await waiting, true);
    assert.ok(performance.now() - start < 3_000, "the waiter was woken by the notification");
    for (const h of permits) assert.equal(await h.isExpired(), true);

    const rw = await cli("release", server.url, `${base}:rw`, "--force");
    assert.equal(rw.code, 0, rw.stderr);
    assert.match(rw.stdout, /\(read\): it was held by/);
    assert.equal(await reader.isExpired(), true);
    for (const h of [l, waiter]) await h.release();
    const none = await cli("release", server.url, `${base}:rw`, "--force");
    assert.equal(none.code, 1);
  });

  it("inspect and watch: the holders, a read-write lock's waiting writer as a waiter (not a hold); a plain lock's waiters unknown (null)", async () => {
    const base = uniqueKey("cli-pg-inspect");
    const other = await PostgresLockStore.connect(server.url);
    const watching = started(["watch", server.url, `${base}:*`, "--json", "--interval", "100"]);
    try {
      await sleep(500);
      await inspectWaitingWriter(watching, server.url, base, {
        readers: store,
        writers: other,
        retryDelay: 5_000,
        checkReport: (got, reader) => assert.ok(!got.stdout.includes(ownerOf(reader))),
      });

      await inspectPlainLock(watching, server.url, base, store);
      watching.child.kill("SIGINT");
      assert.equal((await watching.exit).code, 0);
    } finally {
      watching.child.kill("SIGKILL");
      await other.close();
    }
  });

  it("weighted permits: list, inspect and watch give each semaphore holder its permits (the permits column); inspect counts permits", async () => {
    await weightedPermits(store, server.url, uniqueKey("cli-pg-weights"));
  });

  it("a permits table made before holds had weights (no permits column): each semaphore holder holds 1", async () => {
    const table = `cli_old_${process.pid}`;
    const old = await PostgresLockStore.connect(server.url, { table });
    const pg = new Client({ connectionString: server.url });
    await pg.connect();
    try {
      const key = uniqueKey("cli-pg-old");
      const held = [ls.semaphore(key, 3, 30_000, old), ls.semaphore(key, 3, 30_000, old)];
      for (const h of held) assert.equal(await h.acquire(), true);
      await pg.query(`ALTER TABLE "${table}_permits" DROP COLUMN permits`);
      const list = await cli("list", server.url, "--table", table, "--json");
      assert.equal(list.code, 0, list.stderr);
      assert.deepEqual(
        listed(list.stdout).map((h) => [h.key, h.kind, h.permits]),
        [
          [key, "semaphore", 1],
          [key, "semaphore", 1],
        ],
      );
      const text = await cli("inspect", server.url, key, "--table", table);
      assert.equal(text.code, 0, text.stderr);
      assert.match(text.stdout, /is held \(semaphore, 2 of 3 permits\)/);
      const freed = await cli("release", server.url, key, "--force", "--table", table);
      assert.equal(freed.code, 0, freed.stderr);
      assert.equal(freed.stdout.trim().split("\n").length, 2, freed.stdout);
      for (const h of held) assert.equal(await h.isExpired(), true);
    } finally {
      // The store first: its close() releases what it still holds, in the tables dropped next.
      await old.close();
      await pg.query(`DROP TABLE IF EXISTS "${table}", "${table}_permits"; DROP SEQUENCE IF EXISTS "${table}_fencing"`).catch(() => {});
      await pg.end();
    }
  });

  it("an unreachable server names its address (exit 2)", async () => {
    const port = await freePort();
    const down = await cli("list", `postgres://someone:secret@127.0.0.1:${port}/db`);
    assert.equal(down.code, 2, down.stderr);
    assert.match(afterPasswordWarning(down.stderr), new RegExp(`^locksmith: could not reach PostgreSQL at 127\\.0\\.0\\.1:${port}`));
    assert.ok(!down.stderr.includes("secret"));
  });
});

describe("locksmith on MySQL (MariaDB)", await requireMysql(), () => {
  let server;
  let store;
  storeOnServer(
    startMysql,
    (mysql) => MySqlLockStore.connect(mysql.url),
    (opened, started) => {
      [store, server] = [opened, started];
    },
  );

  it("leader: who leads an election (owner, term, since, value, lease left), --watch; exit 1 when none", () =>
    leaderCase(
      () => store,
      () => server.url,
    ));

  // MySQL's waiters poll at their retryDelay (no NOTIFY): 300 ms between the asks.
  it("inspect lists a fair lock's queue and a fair semaphore's in order, each place with its lease left", () =>
    fairQueueCase(store, server.url, { prefix: "cli-mysql-fair", gapMs: 300, waitersWhileHeld: 0 }));

  it("lists and frees locks, semaphore permits and read-write holds; a freed permit goes to a waiter", async () => {
    const base = uniqueKey("cli-mysql");
    const { l, permits, rw: writer } = await holdEveryKind(store, base, "write");
    const { code, stdout, stderr } = await cli("list", server.url, `${base}:*`, "--json");
    assert.equal(code, 0, stderr);
    assert.deepEqual(listedFields(listed(stdout)), everyKindListed(base, { l, permits, rw: writer }, "write"));
    assert.ok(listed(stdout).every((h) => h.remainingMs > 25_000 && h.remainingMs <= 30_000));

    const waiter = ls.semaphore(`${base}:sem`, 2, 30_000, store);
    const waiting = waiter.acquire({ timeout: 10_000, retryDelay: 50 });
    await sleep(100);
    const freed = await cli("release", server.url, `${base}:sem`, "--force");
    assert.equal(freed.code, 0, freed.stderr);
    assert.equal(freed.stdout.trim().split("\n").length, 2, freed.stdout);
    assert.match(freed.stdout, /^released ".*:sem" \(semaphore\): it was held by [0-9a-f]{8} with \d+\.\d s left \(fencing token \d+\)/m);
    assert.equal(await waiting, true, "the waiter polled its way in");
    for (const h of permits) assert.equal(await h.isExpired(), true);

    // A freed writer's waiting reader takes its turn.
    const reader = ls.readWriteLock(`${base}:rw`, 30_000, store).readLock();
    const reading = reader.acquire({ timeout: 10_000, retryDelay: 50 });
    await sleep(100);
    const rw = await cli("release", server.url, `${base}:rw`, "--force");
    assert.equal(rw.code, 0, rw.stderr);
    assert.match(rw.stdout, /\(write\): it was held by/);
    assert.equal(await reading, true);
    assert.equal(await writer.isExpired(), true);
    const lock = await cli("release", server.url, `${base}:lock`, "--force");
    assert.equal(lock.code, 0, lock.stderr);
    assert.equal(await l.isExpired(), true);
    assert.equal(await new ls.Lock(`${base}:lock`, 1_000, store).acquire(), true, "free for the next holder");
    for (const h of [waiter, reader]) await h.release();
    const none = await cli("release", server.url, `${base}:sem`, "--force");
    assert.equal(none.code, 1);
  });

  it("inspect and watch: the holders, a read-write lock's waiting writer as a waiter (not a hold); a plain lock's waiters unknown (null)", async () => {
    const base = uniqueKey("cli-mysql-inspect");
    const watching = started(["watch", server.url, `${base}:*`, "--json", "--interval", "100"]);
    try {
      await sleep(500);
      await inspectWaitingWriter(watching, server.url, base, { readers: store, writers: store, retryDelay: 50 });

      const s = ls.semaphore(`${base}:sem`, 3, 30_000, store);
      assert.equal(await s.acquire(), true);
      const sem = JSON.parse((await cli("inspect", server.url, `${base}:sem`, "--json")).stdout);
      assert.deepEqual([sem.kind, sem.limit, sem.waiters], ["semaphore", 3, null]);
      await s.release();

      await inspectPlainLock(watching, server.url, base, store);
      watching.child.kill("SIGINT");
      assert.equal((await watching.exit).code, 0);
    } finally {
      watching.child.kill("SIGKILL");
    }
  });

  it("weighted permits: list, inspect and watch give each semaphore holder its permits (the permits column); inspect counts permits", async () => {
    await weightedPermits(store, server.url, uniqueKey("cli-mysql-weights"));
  });

  it("an unreachable server names its address, a refused login says so (exit 2), and the password is never printed", async () => {
    const port = await freePort();
    const down = await cli("list", `mysql://someone:secret@127.0.0.1:${port}/db`);
    assert.equal(down.code, 2, down.stderr);
    assert.match(afterPasswordWarning(down.stderr), new RegExp(`^locksmith: could not reach MySQL at 127\\.0\\.0\\.1:${port}`));
    assert.ok(!down.stderr.includes("secret"));
    const refused = await cli("list", `mysql://someone:secret@127.0.0.1:${server.port}/locksmith`);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(afterPasswordWarning(refused.stderr), new RegExp(`^locksmith: MySQL at 127\\.0\\.0\\.1:${server.port} refused the connection: Access denied`));
    assert.ok(!refused.stderr.includes("secret"));
  });
});

describe("locksmith on etcd", await requireEtcd(), () => {
  let etcd;
  let store;
  let url;
  before(async () => {
    etcd = await startEtcd({ size: 1 });
    store = await EtcdLockStore.connect({ endpoints: etcd.endpoints });
    url = `etcd://${etcd.endpoints.map((e) => new URL(e).host).join(",")}`;
  });
  after(async () => {
    await store?.close();
    await etcd?.dispose();
  });

  it("leader: who leads an election (owner, term, since, value, lease left), --watch; exit 1 when none", () =>
    leaderCase(
      () => store,
      () => url,
    ));

  it("inspect: the holder, its fencing token (the create revision) and time left; waiters null (waiters that are not fair leave no key); exit 1 when free", async () => {
    const key = uniqueKey("cli-etcd");
    const holder = new ls.Lock(key, 30_000, store);
    assert.equal(await holder.acquire(), true);
    const got = await cli("inspect", url, key, "--json");
    assert.equal(got.code, 0, got.stderr);
    const report = JSON.parse(got.stdout);
    assert.deepEqual(
      [report.key, report.held, report.kind, report.waiters, report.holders.map((h) => [h.kind, h.owner, h.fencingToken])],
      [key, true, "lock", null, [["lock", fingerprint(ownerOf(holder)), holder.fencingToken]]],
    );
    assert.ok(report.holders[0].remainingMs > 20_000 && report.holders[0].remainingMs <= 31_000, `${report.holders[0].remainingMs}`);
    assert.ok(!got.stdout.includes(ownerOf(holder)));
    await holder.release();
    const free = await cli("inspect", url, key);
    assert.equal(free.code, 1, free.stderr);
    assert.match(free.stdout, new RegExp(`^"${key}" is free\\nwaiters: unknown`));
  });

  it("inspect lists a fair lock's queue and a fair semaphore's in order, each place with its lease left", () =>
    fairQueueCase(store, url, { prefix: "cli-etcd-fair", gapMs: 300, waitersWhileHeld: 0 }));

  it("watch, piped: a line when a hold appears and when it ends; SIGINT exits 0", async () => {
    const base = uniqueKey("cli-etcd-watch");
    const watching = started(["watch", url, `${base}*`, "--json", "--interval", "100"]);
    try {
      await sleep(500);
      const permit = ls.semaphore(`${base}:sem`, 3, 30_000, store);
      assert.equal(await permit.acquire({ permits: 2 }), true);
      const owner = fingerprint(ownerOf(permit));
      const seen = event((await watching.until("for the permit", appeared({ key: `${base}:sem`, kind: "semaphore" }))).line);
      assert.deepEqual([seen.owner, seen.fencingToken, seen.permits], [owner, permit.fencingToken, 2], "a semaphore hold's event carries its permits");
      await permit.release();
      await watching.until("for its end", eventLike({ event: "ended", key: `${base}:sem`, owner }));
      assert.ok(!watching.lines.some((line) => event(line)?.event === "waiters"), "waiters that are not fair leave no key to count");
      watching.child.kill("SIGINT");
      assert.equal((await watching.exit).code, 0);
    } finally {
      watching.child.kill("SIGKILL");
    }
  });

  it("an unreachable etcd is exit 2 for inspect and watch", async () => {
    const port = await freePort();
    for (const args of [
      ["inspect", `etcd://127.0.0.1:${port}`, "k"],
      ["watch", `etcd://127.0.0.1:${port}`],
    ]) {
      const down = await cli(...args);
      assert.equal(down.code, 2, `${args[0]}: ${down.stderr}`);
      assert.match(down.stderr, new RegExp(`^locksmith: etcd at 127\\.0\\.0\\.1:${port}: `));
    }
  });
});

// The command reads lock files through the native addon; the WebAssembly build has no file store.
describe("locksmith on a lock file (FileLockStore)", { skip: TARGET !== "native" && "run by the native pass" }, () => {
  let dir;
  let store;
  let url;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "locksmith-cli-file-"));
    const path = join(dir, "locks");
    store = await ls.FileLockStore.open(path);
    url = pathToFileURL(path).href;
  });
  after(async () => {
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("leader: who leads an election (owner, term, since, value, lease left), --watch; exit 1 when none", () =>
    leaderCase(
      () => store,
      () => url,
    ));

  it("list, inspect and release --force: locks, weighted permits and read holds, with fencing tokens", async () => {
    const base = uniqueKey("cli-file");
    const lock = new ls.Lock(`${base}:lock`, 30_000, store);
    const permit = ls.semaphore(`${base}:sem`, 3, 30_000, store);
    const reader = ls.readWriteLock(`${base}:rw`, 30_000, store).readLock();
    assert.equal(await lock.acquire(), true);
    assert.equal(await permit.acquire({ permits: 2 }), true);
    assert.equal(await reader.acquire(), true);
    const got = await cli("list", url, `${base}*`, "--json");
    assert.equal(got.code, 0, got.stderr);
    assert.deepEqual(
      listed(got.stdout).map((h) => [h.key, h.kind, h.owner, h.fencingToken, h.permits]),
      [
        [`${base}:lock`, "lock", fingerprint(ownerOf(lock)), lock.fencingToken, undefined],
        [`${base}:rw`, "read", fingerprint(ownerOf(reader)), reader.fencingToken, undefined],
        [`${base}:sem`, "semaphore", fingerprint(ownerOf(permit)), permit.fencingToken, 2],
      ],
    );
    const sem = JSON.parse((await cli("inspect", url, `${base}:sem`, "--json")).stdout);
    assert.deepEqual([sem.held, sem.limit, sem.holders[0].permits], [true, 3, 2]);
    // A waiter in this process wakes at the command's release (it watches the file).
    const waiter = new ls.Lock(`${base}:lock`, 30_000, store);
    const waiting = waiter.acquire({ timeout: 10_000, retryDelay: 8_000 });
    const started = Date.now();
    const freed = await cli("release", url, `${base}:lock`, "--force");
    assert.equal(freed.code, 0, freed.stderr);
    assert.match(freed.stdout, new RegExp(`^released "${base}:lock": it was held by ${fingerprint(ownerOf(lock))}`));
    assert.equal(await waiting, true);
    assert.ok(Date.now() - started < 6_000, "woken by the file's change, not at its retry delay");
    assert.equal(await lock.isExpired(), true);
    await waiter.release();
    await permit.release();
    await reader.release();
    const none = await cli("list", url, `${base}*`);
    assert.equal(none.code, 1, none.stderr);
  });

  it("inspect lists a fair lock's queue in order, each waiter with the time its place is kept for", () =>
    // A lock file does not mark fair holds: with nobody in line, its waiters are unknown.
    fairQueueCase(store, url, { prefix: "cli-fair", gapMs: 100, waitersWhileHeld: null }));

  it("a missing file is exit 2 and is not made; a URL that is not a file URL is a usage error", async () => {
    const missing = pathToFileURL(join(dir, "missing")).href;
    const got = await cli("list", missing);
    assert.equal(got.code, 2);
    assert.match(got.stderr, /^locksmith: no lock file at /);
    assert.equal(existsSync(join(dir, "missing")), false);
    const relative = await cli("list", "file://host/locks");
    assert.equal(relative.code, 2);
  });
});

describe("locksmith on a Redis Cluster", () => {
  let cluster;
  let store;
  before(async () => {
    cluster = await startCluster();
    store = await ls.RedisLockStore.connect({ cluster: cluster.urls.slice(0, 2) });
  });
  after(async () => {
    await store?.close();
    await cluster?.stop();
  });

  /** Names whose keys live on two different masters, and the URL of a replica to start from. */
  async function spread(name) {
    const slots = await clusterSlots(cluster.nodes[0].port);
    const masterOf = async (key) => {
      const slot = await command(cluster.nodes[0].port, "CLUSTER", "KEYSLOT", `locksmith:{${key}}`);
      return slots.find((r) => r.first <= slot && slot <= r.last).port;
    };
    const keys = [];
    const masters = [];
    for (let i = 0; keys.length < 2; i++) {
      const key = uniqueKey(`${name}-${i}`);
      const master = await masterOf(key);
      if (masters.includes(master)) continue;
      keys.push(key);
      masters.push(master);
    }
    const replica = slots.find((r) => !masters.includes(r.port)).replicas[0];
    return { keys, masters, seed: `redis://127.0.0.1:${replica}` };
  }

  it("list, watch and inspect read every master (from any node, a replica too); release goes to the key's master and wakes its waiters", async () => {
    const { keys, masters, seed } = await spread("cli-cluster");
    assert.notEqual(masters[0], masters[1]);
    const holders = keys.map((key) => new ls.Lock(key, 30_000, store));
    for (const h of holders) assert.equal(await h.acquire(), true);
    const tokens = holders.map(ownerOf);

    const listedHolds = await cli("list", seed, "test:cli-cluster*", "--json");
    assert.equal(listedHolds.code, 0, listedHolds.stderr);
    assert.deepEqual(
      listed(listedHolds.stdout).map((h) => [h.key, h.owner, h.fencingToken]),
      keys.map((key, i) => [key, fingerprint(tokens[i]), holders[i].fencingToken]).sort((a, b) => a[0].localeCompare(b[0])),
    );

    const watching = started(["watch", seed, "test:cli-cluster*", "--json", "--interval", "100"]);
    try {
      for (const [i, key] of keys.entries()) {
        const seen = event((await watching.until(`for ${key}`, eventLike({ event: "held", key }))).line);
        assert.equal(seen.owner, fingerprint(tokens[i]));
      }
    } finally {
      watching.child.kill("SIGINT");
    }
    assert.equal((await watching.exit).code, 0);

    // Waiters on the first key: a RedisLockStore (sharded pub/sub, on the key's master)
    // and an IoRedisLockStore over an ioredis Cluster (plain pub/sub, on some node).
    const other = await ls.RedisLockStore.connect({ cluster: cluster.urls.slice(2, 4) });
    const ioCluster = new Cluster(cluster.urls.slice(0, 1).map((url) => ({ host: "127.0.0.1", port: Number(new URL(url).port) })));
    const viaIoredis = new IoRedisLockStore(ioCluster);
    try {
      const waiter = new ls.Lock(keys[0], 30_000, other);
      const waiting = waiter.acquire({ timeout: 20_000, retryDelay: 5_000 });
      const ioWaiter = new ls.Lock(keys[0], 30_000, viaIoredis);
      const ioWaiting = ioWaiter.acquire({ timeout: 20_000, retryDelay: 200 });
      await sleep(500);
      const got = await cli("inspect", seed, keys[0], "--json");
      assert.equal(got.code, 0, got.stderr);
      const report = JSON.parse(got.stdout);
      assert.deepEqual([report.held, report.kind, report.holders.map((h) => h.owner)], [true, "lock", [fingerprint(tokens[0])]]);
      assert.equal(report.waiters, 2, "the sharded subscriber on the key's master and the plain one on its node");
      assert.ok(!got.stdout.includes(tokens[0]));

      const start = performance.now();
      const freed = await cli("release", seed, keys[0], "--force");
      assert.equal(freed.code, 0, freed.stderr);
      assert.match(freed.stdout, new RegExp(`^released "${keys[0]}": it was held by ${fingerprint(tokens[0])}`));
      const winner = await Promise.race([waiting.then((ok) => ok && waiter), ioWaiting.then((ok) => ok && ioWaiter)]);
      assert.ok(performance.now() - start < 3_000, "a waiter was woken, not left to its retry");
      assert.equal(await holders[0].isExpired(), true);
      await winner.release();
      assert.equal(await waiting, true);
      assert.equal(await ioWaiting, true);
      await waiter.release();
      await ioWaiter.release();
    } finally {
      await other.close();
      await viaIoredis.close();
      ioCluster.disconnect();
    }
    const free = await cli("inspect", seed, keys[0]);
    assert.equal(free.code, 1, free.stderr);
    const second = await cli("inspect", seed, keys[1], "--json");
    assert.equal(second.code, 0, second.stderr);
    assert.equal(JSON.parse(second.stdout).holders[0].owner, fingerprint(tokens[1]));
    await holders[1].release();
  });

  it("release on a Cluster wakes RedisLockStore's waiters at once (it publishes on the key's shard too)", async () => {
    const [key] = (await spread("cli-cluster-wake")).keys;
    const holder = new ls.Lock(key, 30_000, store);
    assert.equal(await holder.acquire(), true);
    const other = await ls.RedisLockStore.connect({ cluster: cluster.urls.slice(2, 4) });
    try {
      const waiter = new ls.Lock(key, 30_000, other);
      const waiting = waiter.acquire({ timeout: 20_000, retryDelay: 8_000 });
      await sleep(300);
      const start = performance.now();
      const freed = await cli("release", cluster.urls[0], key, "--force");
      assert.equal(freed.code, 0, freed.stderr);
      assert.equal(await waiting, true);
      assert.ok(performance.now() - start < 3_000, `woken after ${(performance.now() - start).toFixed(0)} ms, not at its 8 s retry`);
      await waiter.release();
    } finally {
      await other.close();
    }
  });
});
