#!/usr/bin/env node
// `npx locksmith-js`: see, watch and free the locks, semaphore permits and read-write holds
// in a Redis (one server or a Cluster), PostgreSQL, MySQL/MariaDB or etcd store, or a
// FileLockStore's lock file.
//
//   locksmith list <store-url> [pattern] [--prefix P | --table T] [--json]
//   locksmith inspect <store-url> <key> [--prefix P | --table T] [--json]
//   locksmith watch <store-url> [pattern] [--interval MS] [--prefix P | --table T] [--json]
//   locksmith release <store-url> <key> --force [--prefix P | --table T]
//
// The store URL may come from LOCKSMITH_STORE_URL instead (the arguments then start after
// the command with the pattern or key), which keeps a password out of `ps` and the shell's
// history; a password in an argument gets a warning.
//
// It prints a short fingerprint of each owner token, never the token itself: the token is
// a bearer secret (whoever has it can release or extend the lock).
//
// `watch` reads the store every --interval: in a terminal it redraws a table in place;
// piped (or with --json) it prints one line per change: a hold that appeared, ended or
// changed owner, a key whose count of waiters changed.
//
// Redis needs no client package: the command speaks RESP over Node's own socket with the
// package's own pieces (the Redis engine's encoder and decoder, from the addon or the
// WebAssembly engine; the URL parsing of the store's driver; the store's Lua scripts).
// On a Redis Cluster (found by CLUSTER SLOTS on the server named) it reads every master:
// `list` and `watch` scan each, `inspect` and `release` go to the master of the key's slot.
import { createHash } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { createRequire } from "node:module";
import net from "node:net";
import tls from "node:tls";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import { SCRIPTS } from "../gen/redis-scripts.mjs";
import { DEFAULT_KEY_PREFIX } from "../api/defaults.mjs";
import { authCommands, parseRedisUrl } from "../redis/topology.mjs";

// etcd's default key prefix (js/stores/etcd.mjs).
const ETCD_KEY_PREFIX = "locksmith/";
const DEFAULT_INTERVAL_MS = 1_000;

const USAGE = `run it as npx locksmith-js <command> …, or where locksmith-js is installed as locksmith <command> … (below)

usage:
  locksmith list <store-url> [pattern] [options]          the held locks, semaphore permits and read-write holds
                                                          (pattern: a glob on lock names, default *)
  locksmith inspect <store-url> <key> [options]           who holds <key>: kind, owners, fencing token, time left, waiters
  locksmith watch <store-url> [pattern] [options]         the holds and waiters, live, until Ctrl-C: a table redrawn
                                                          in a terminal; piped, one line per change
  locksmith release <store-url> <key> --force [options]   free every hold on <key>, whoever holds it

store URLs:
  redis://[user:password@]host:port[/db], rediss://…      one server, or any node of a Redis Cluster
  postgres://user:password@host:port/database           (needs pg installed)
  mysql://user:password@host:port/database              MySQL or MariaDB (needs mysql2 installed)
  etcd://[user:password@]host:port[,host:port…], etcds://… (TLS)
  file:///path/to/lock-file                             a FileLockStore's file (needs the native addon)

environment:
  LOCKSMITH_STORE_URL   the store URL when the command is given none (locksmith list [pattern]):
                        a password there stays out of ps and the shell's history, where an
                        argument's shows (which gets a warning). A URL argument wins over it.

options:
  --prefix <p>     key prefix (Redis: default "${DEFAULT_KEY_PREFIX}"; etcd: "${ETCD_KEY_PREFIX}")
  --table <t>      PostgreSQL or MySQL table (default "locksmith_locks")
  --json           list: one object per hold; inspect: one object; watch: one object per change
  --interval <ms>  watch: how often to read the store (default ${DEFAULT_INTERVAL_MS})
  --force          required by release: it frees holds that other processes have
  -h, --help       this text
  -v, --version    the package version

exit codes: 0 done (inspect: the key is held; watch: stopped by Ctrl-C or SIGTERM),
            1 nothing matched (no holds listed, nothing to release, inspect: the key is free),
            2 a usage error, or the store could not be reached (watch: was lost) or refused the request
`;

const OPTIONS = {
  prefix: { type: "string" },
  table: { type: "string", default: "locksmith_locks" },
  json: { type: "boolean", default: false },
  interval: { type: "string" },
  force: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
  version: { type: "boolean", short: "v", default: false },
};

/** Wrong input: the message, then (with `usage`) the usage text. Exit 2. */
class UsageError extends Error {
  constructor(message, { usage = false } = {}) {
    super(message);
    this.usage = usage;
  }
}

/** The store could not be reached, refused the login, or failed the request. Exit 2. */
class StoreError extends Error {}

/** The first 8 hex digits of the owner token's SHA-256: enough to tell holders apart. */
const fingerprint = (owner) => createHash("sha256").update(String(owner)).digest("hex").slice(0, 8);

/**
 * A hold as the command reports it: the owner as its fingerprint; a semaphore hold with
 * its `permits` (how many of the limit it holds), other kinds without.
 */
const hold = (key, kind, remainingMs, fencingToken, owner, permits) => ({
  key,
  kind,
  ...(kind === "semaphore" && { permits: Number(permits ?? 1) }),
  remainingMs,
  fencingToken,
  owner: fingerprint(owner),
});

const redact = (url) => url.replace(/\/\/[^/@]*@/, "//***@");
const address = (host, port) => `${host.includes(":") ? `[${host}]` : host}:${port}`;

const CONNECT_TIMEOUT_MS = 5_000;

/** Runs `work`; an error that is not already the command's own becomes a StoreError naming `where`. */
async function storeCall(where, work) {
  try {
    return await work();
  } catch (err) {
    if (err instanceof StoreError || err instanceof UsageError) throw err;
    throw new StoreError(`${where}: ${err?.message ?? err}`);
  }
}

// ---------------------------------------------------------------------------------
// Redis

let codec;
/**
 * The package's RESP encoder and decoder: the native addon's, or where it does not load
 * (or LOCKSMITH_FORCE_WASM=1), the WebAssembly Redis engine's. The same functions the
 * store's driver uses for its own short exchanges.
 */
function respCodec() {
  codec ??= (async () => {
    if (process.env.LOCKSMITH_FORCE_WASM !== "1") {
      try {
        const addon = createRequire(import.meta.url)("../native-loader.cjs").loadAddon();
        return { encode: (args) => addon.redisCommand(args), decode: (bytes) => addon.redisDecode(bytes) ?? undefined };
      } catch (err) {
        if (err?.code !== "LOCKSMITH_NATIVE_UNAVAILABLE") throw err;
      }
    }
    const engine = await import("../wasm/locksmith_wasm_redis.js");
    engine.initSync({ module: await readFile(new URL("../wasm/locksmith_wasm_redis_bg.wasm", import.meta.url)) });
    return { encode: (args) => Buffer.from(engine.redisCommand(args)), decode: (bytes) => engine.redisDecode(bytes) ?? undefined };
  })();
  return codec;
}

/**
 * One connection to one Redis server: commands are pipelined, replies come back in
 * order. Logs in (AUTH, SELECT) and checks that it may run commands (PING) before
 * `open()` resolves, so a wrong password or a server that wants one is an error here.
 */
class RedisConnection {
  #socket;
  #codec;
  #pending = [];
  #input = Buffer.alloc(0);
  #failure;
  #ready = false;

  static open(url) {
    return RedisConnection.connect(parseRedisUrl(url, (message) => new UsageError(message)));
  }

  /** A connection to `target` (`{ host, port, tls, user, password, db }`), logged in. */
  static async connect(target) {
    const connection = new RedisConnection(target, await respCodec());
    try {
      await connection.#connect();
    } catch (err) {
      connection.#socket?.destroy();
      throw err;
    }
    connection.#ready = true;
    return connection;
  }

  constructor(target, codec) {
    this.target = target;
    this.where = address(target.host, target.port);
    this.#codec = codec;
  }

  /** Whether the connection failed (or was closed): its calls reject at once. */
  get failed() {
    return this.#failure !== undefined;
  }

  #connect() {
    const { host, port } = this.target;
    return new Promise((resolve, reject) => {
      let connected = false;
      const onConnect = () => {
        connected = true;
        resolve();
      };
      this.#socket = this.target.tls
        ? tls.connect({ host, port, servername: net.isIP(host) ? undefined : host }, onConnect)
        : net.connect({ host, port }, onConnect);
      // Connecting, and every reply after: a server that accepts and never answers (a
      // frozen process) fails the command instead of hanging it. An idle connection (a
      // watch between two reads) is no failure.
      this.#socket.setTimeout(CONNECT_TIMEOUT_MS, () => {
        if (this.#ready && this.#pending.length === 0) return;
        this.#socket.destroy(new Error(`no answer within ${CONNECT_TIMEOUT_MS / 1000} s`));
      });
      this.#socket.on("data", (chunk) => this.#receive(chunk));
      this.#socket.on("error", (err) => {
        const failure = new StoreError(
          connected ? `the connection to Redis at ${this.where} failed: ${err.message}` : `could not reach Redis at ${this.where}: ${err.message}`,
        );
        if (!connected) reject(failure);
        this.#fail(failure);
      });
      this.#socket.on("close", () => this.#fail(new StoreError(`Redis at ${this.where} closed the connection`)));
    }).then(() => this.#login());
  }

  async #login() {
    const { db } = this.target;
    try {
      await Promise.all(authCommands(this.target).map((args) => this.call(...args)));
    } catch (err) {
      if (this.#failure) throw this.#failure;
      throw new StoreError(`Redis at ${this.where} refused the login: ${err.message}`);
    }
    try {
      if (db !== 0) await this.call("SELECT", String(db));
      await this.call("PING");
    } catch (err) {
      if (this.#failure) throw this.#failure; // the connection itself failed: say that
      const hint = /NOAUTH/.test(err.message) ? " (put the password in the URL: redis://:password@host:port)" : "";
      throw new StoreError(`Redis at ${this.where} refused the connection: ${err.message}${hint}`);
    }
  }

  #receive(chunk) {
    this.#input = this.#input.length === 0 ? chunk : Buffer.concat([this.#input, chunk]);
    try {
      for (let next = this.#codec.decode(this.#input); next !== undefined; next = this.#codec.decode(this.#input)) {
        const [value, used] = next;
        this.#input = this.#input.subarray(used);
        const call = this.#pending.shift();
        if (call === undefined) continue;
        if (value !== null && typeof value === "object" && !Array.isArray(value)) call.reject(new StoreError(value.error));
        else call.resolve(value);
      }
    } catch {
      this.#socket.destroy();
      this.#fail(new StoreError(`${this.where} does not answer in the Redis protocol (is it a Redis port?)`));
    }
  }

  #fail(err) {
    this.#failure ??= err;
    for (const call of this.#pending.splice(0)) call.reject(this.#failure);
  }

  /** Sends one command; resolves with its reply, rejects with an error reply. */
  call(...args) {
    if (this.#failure) return Promise.reject(this.#failure);
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject });
      this.#socket.write(this.#codec.encode(args.map(String)));
    });
  }

  close() {
    this.#failure ??= new StoreError("closed");
    this.#socket.end();
  }
}

const globEscape = (s) => s.replace(/[\\*?[\]]/g, "\\$&");
const regexEscape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** A Redis glob (`*`, `?`, `[...]`, `\` escapes) as a RegExp over whole names. */
function globRegExp(glob) {
  let source = "";
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "\\" && i + 1 < glob.length) source += regexEscape(glob[++i]);
    else if (c === "*") source += "[\\s\\S]*";
    else if (c === "?") source += "[\\s\\S]";
    else if (c === "[") {
      const end = glob.indexOf("]", i + 2);
      if (end === -1) source += "\\[";
      else {
        const body = glob.slice(i + 1, end);
        source += `[${body.startsWith("^") ? `^${body.slice(1).replace(/\\/g, "\\\\")}` : body.replace(/\\/g, "\\\\")}]`;
        i = end;
      }
    } else source += regexEscape(c);
  }
  return new RegExp(`^${source}$`);
}

/** The server's clock in milliseconds (permit expiries are scored on it). */
async function serverNow(redis) {
  const [seconds, micros] = await redis.call("TIME");
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

// The key layout (redis/src/lib.rs): a lock is `prefix{key}` (a string: its owner token),
// with `prefix{key}:fence`; a semaphore's holders are the sorted set `prefix{key}:semaphore`
// (its limit `…:semaphore:limit`; the permits of a holder of more than one in the hash
// `…:semaphore:weights`, owner token → permits, a holder missing from it holds 1), a read-write lock's `prefix{key}:rw` (owner token scored
// by its expiry, server ms), the writer named by `prefix{key}:rw:writer`; a waiting writer's
// claim is `prefix{key}:rw:claim` (its owner token), the waiting readers and the readers
// whose turn it is are the sorted sets `…:rw:readers` and `…:rw:turn`. Every key of a name
// shares its `{key}` hash tag: one Cluster slot.
const HOLDERS_SUFFIX = { semaphore: ":semaphore", rw: ":rw" };
// rwlock_release.lua's KEYS after the holders, in its order (a script that reads fewer
// ignores the rest): the writer, a waiting writer's claim, the waiting readers, their turn.
const RW_COMPANIONS = ["writer", "claim", "readers", "turn"];
// The release scripts publish on `<holders key>:released` (PUBLISH; on a Cluster,
// RedisLockStore's SPUBLISH on the key's shard), where a waiter of that name subscribes.
const CHANNEL_SUFFIXES = [":released", ":semaphore:released", ":rw:released"];

/** The live members of a sorted set scored by expiry (server ms): `[{ owner, expiresAt }]`. */
async function liveMembers(redis, set, now) {
  const flat = await redis.call("ZRANGEBYSCORE", set, `(${now}`, "+inf", "WITHSCORES");
  const out = [];
  for (let i = 0; i < flat.length; i += 2) out.push({ owner: String(flat[i]), expiresAt: Number(flat[i + 1]) });
  return out;
}

/** The hold of the plain lock at `redisKey` (named `name`): `[]` or `[hold]`. */
async function lockHolds(redis, redisKey, name) {
  const [owner, remaining, fence] = await Promise.all([redis.call("GET", redisKey), redis.call("PTTL", redisKey), redis.call("GET", `${redisKey}:fence`)]);
  if (owner === null || Number(remaining) === -2) return []; // free, or expired meanwhile
  return [hold(name, "lock", Number(remaining) >= 0 ? Number(remaining) : null, fence === null ? null : Number(fence), owner)];
}

/** `HGETALL`'s `[field, value, …]` as a Map. */
function hashOf(flat) {
  const map = new Map();
  for (let i = 0; i < flat.length; i += 2) map.set(String(flat[i]), Number(flat[i + 1]));
  return map;
}

/**
 * The live holders of a semaphore (`set` ":semaphore") or read-write lock (":rw") at
 * `holdersKey`; a semaphore holder's with its `permits` (from `…:weights`; absent there: 1).
 */
async function permitHolds(redis, holdersKey, name, set, now) {
  const semaphore = set === ":semaphore";
  const [holders, writer, weights] = await Promise.all([
    liveMembers(redis, holdersKey, now),
    semaphore ? null : redis.call("GET", `${holdersKey}:writer`),
    semaphore ? redis.call("HGETALL", `${holdersKey}:weights`).then(hashOf) : null,
  ]);
  // A permit's fencing token is not kept per holder in Redis (only the last one minted).
  return holders.map((h) =>
    semaphore
      ? hold(name, "semaphore", Math.max(0, h.expiresAt - now), null, h.owner, weights.get(h.owner) ?? 1)
      : hold(name, h.owner === writer ? "write" : "read", Math.max(0, h.expiresAt - now), null, h.owner),
  );
}

/** A reply that says the key is served elsewhere now (a slot moved, or is moving). */
const redirected = (err) => /^(MOVED|ASK) /.test(err?.message ?? "");

/** Sums `PUBSUB NUMSUB`'s or `SHARDNUMSUB`'s `[channel, count, …]` by the name each channel is of. */
function addCounts(counts, flat, nameOf) {
  for (let i = 0; i < flat.length; i += 2) {
    const name = nameOf(String(flat[i]));
    if (name !== undefined) counts.set(name, (counts.get(name) ?? 0) + Number(flat[i + 1]));
  }
}

/**
 * A Redis store as the command sees it: one server (or a Sentinel-managed master by its
 * address), or a Redis Cluster found from the node named, whose masters it reads.
 */
class RedisStore {
  #seed;
  #prefix;
  #cluster = false;
  #ranges = []; // Cluster: [{ first, last, master, replicas }], nodes as { host, port }
  #connections = new Map(); // Cluster: address → Promise<RedisConnection>

  static async open(url, { prefix }) {
    const seed = await RedisConnection.open(url);
    const store = new RedisStore(seed, prefix);
    try {
      await storeCall(`Redis at ${seed.where}`, () => store.#discover());
    } catch (err) {
      store.close();
      throw err;
    }
    return store;
  }

  constructor(seed, prefix) {
    this.#seed = seed;
    this.#prefix = prefix;
  }

  get cluster() {
    return this.#cluster;
  }

  /** Whether the server is a Cluster node; if so, the slot map. */
  async #discover() {
    let slots;
    try {
      slots = await this.#seed.call("CLUSTER", "SLOTS");
    } catch (err) {
      if (this.#seed.failed) throw err;
      return; // "cluster support disabled" (or a server without CLUSTER): one server
    }
    this.#cluster = true;
    if (this.#seed.target.db !== 0) throw new UsageError("a Redis Cluster has only database 0: drop the /db from the URL");
    this.#setSlots(slots, this.#seed);
  }

  #setSlots(slots, via) {
    if (!Array.isArray(slots) || slots.length === 0) throw new StoreError(`the Redis Cluster node at ${via.where} serves no slots (is the cluster formed?)`);
    // A node's host is "" or "?" when the node does not know its own address: it is the one asked.
    const node = ([host, port]) => ({ host: host && host !== "?" ? String(host) : via.target.host, port: Number(port) });
    this.#ranges = slots.map(([first, last, master, ...replicas]) => ({
      first: Number(first),
      last: Number(last),
      master: node(master),
      replicas: replicas.map(node),
    }));
  }

  /** Reads the slot map again, from whichever known node answers. */
  async #refreshSlots() {
    const problems = [];
    for (const via of [this.#seed, ...(await Promise.all([...this.#connections.values()].map((c) => c.catch(() => undefined))))]) {
      if (via === undefined || via.failed) continue;
      try {
        return this.#setSlots(await via.call("CLUSTER", "SLOTS"), via);
      } catch (err) {
        problems.push(`${via.where}: ${err.message}`);
      }
    }
    throw new StoreError(`no Redis Cluster node answered CLUSTER SLOTS (${problems.join("; ") || "every connection failed"})`);
  }

  /** The connection to a Cluster node (`{ host, port }`), with the seed's scheme and login; made again if it failed. */
  async #connection({ host, port }) {
    const where = address(host, port);
    if (where === this.#seed.where && !this.#seed.failed) return this.#seed;
    const known = this.#connections.get(where);
    if (known !== undefined) {
      const connection = await known.catch(() => undefined);
      if (connection !== undefined && !connection.failed) return connection;
    }
    const made = RedisConnection.connect({ ...this.#seed.target, host, port });
    this.#connections.set(where, made);
    return made;
  }

  /** The masters' connections: the one server, or every master of the Cluster. */
  async #masters() {
    if (!this.#cluster) return [this.#seed];
    await this.#refreshSlots();
    const masters = new Map(this.#ranges.map((r) => [address(r.master.host, r.master.port), r.master]));
    return Promise.all([...masters.values()].map((m) => this.#connection(m)));
  }

  /** Every node's connection (Cluster: masters and replicas; plain pub/sub subscribers may be on any). */
  async #allNodes() {
    if (!this.#cluster) return [this.#seed];
    const nodes = new Map(this.#ranges.flatMap((r) => [r.master, ...r.replicas]).map((n) => [address(n.host, n.port), n]));
    return Promise.all([...nodes.values()].map((n) => this.#connection(n)));
  }

  /** Runs `work(connection)` on the server of `key`: on a Cluster, the master of its slot, after a MOVED the new one. */
  async #onKey(key, work) {
    if (!this.#cluster) return work(this.#seed);
    const slot = Number(await this.#seed.call("CLUSTER", "KEYSLOT", `${this.#prefix}{${key}}`));
    for (let attempt = 0; ; attempt++) {
      const range = this.#ranges.find((r) => r.first <= slot && slot <= r.last);
      if (range === undefined) throw new StoreError(`no master of the Redis Cluster serves slot ${slot} (of ${JSON.stringify(key)}): is the cluster down?`);
      const connection = await this.#connection(range.master);
      try {
        return await work(connection);
      } catch (err) {
        if (attempt >= 2 || !redirected(err)) throw err;
        await this.#refreshSlots();
      }
    }
  }

  #where() {
    return this.#cluster ? `the Redis Cluster of ${this.#seed.where}` : `Redis at ${this.#seed.where}`;
  }

  /** The holds under names matching `pattern`, from every master. */
  list(pattern) {
    return storeCall(this.#where(), async () => (await Promise.all((await this.#masters()).map((redis) => this.#holdsOn(redis, pattern)))).flat());
  }

  async #holdsOn(redis, pattern) {
    const prefix = this.#prefix;
    const names = globRegExp(pattern);
    const layout = new RegExp(`^${regexEscape(prefix)}\\{([\\s\\S]*)\\}(:semaphore|:rw)?$`);
    const found = [];
    let cursor = "0";
    do {
      const [next, keys] = await redis.call("SCAN", cursor, "MATCH", `${globEscape(prefix)}{${pattern}}*`, "COUNT", 1000);
      cursor = String(next);
      for (const key of keys) {
        const match = layout.exec(key);
        if (match === null || !names.test(match[1])) continue; // a companion key, or another name
        found.push({ redisKey: key, name: match[1], set: match[2] });
      }
    } while (cursor !== "0");
    const now = await serverNow(redis);
    const holds = await Promise.all(
      found.map(({ redisKey, name, set }) =>
        (set === undefined ? lockHolds(redis, redisKey, name) : permitHolds(redis, redisKey, name, set, now)).catch((err) => {
          if (redirected(err)) return []; // its slot moved since the SCAN: on its new master next time
          throw err;
        }),
      ),
    );
    return holds.flat();
  }

  /**
   * The waiters of the names matching `pattern`: `Map(name → count)` of the connections
   * subscribed to their release channels (names without any are left out).
   */
  async #waiters(pattern) {
    const prefix = this.#prefix;
    const names = globRegExp(pattern);
    const layout = new RegExp(`^${regexEscape(prefix)}\\{([\\s\\S]*)\\}(?::semaphore|:rw)?:released$`);
    const nameOf = (channel) => {
      const match = layout.exec(channel);
      return match !== null && names.test(match[1]) ? match[1] : undefined;
    };
    const glob = `${globEscape(prefix)}{${pattern}}*:released`;
    const counts = new Map();
    const count = async (redis, list, numsub) => {
      const channels = (await redis.call("PUBSUB", list, glob)).map(String).filter((c) => nameOf(c) !== undefined);
      if (channels.length > 0) addCounts(counts, await redis.call("PUBSUB", numsub, ...channels), nameOf);
    };
    // Plain pub/sub: a subscriber is counted by the node it is connected to, any node.
    // Sharded (RedisLockStore on a Cluster): by the master of the channel's slot.
    await Promise.all((await this.#allNodes()).map((redis) => count(redis, "CHANNELS", "NUMSUB")));
    if (this.#cluster) await Promise.all((await this.#masters()).map((redis) => count(redis, "SHARDCHANNELS", "SHARDNUMSUB")));
    for (const [name, n] of counts) if (n === 0) counts.delete(name);
    return counts;
  }

  /** What `watch` shows: the holds, and the waiters by name. */
  snapshot(pattern) {
    return storeCall(this.#where(), async () => {
      const [holds, waiters] = await Promise.all([this.list(pattern), this.#waiters(pattern)]);
      // A name without subscribers has no waiters that listen (a waiter with notifyReleases: false is not seen).
      return { holds, waiters, absentWaiters: 0 };
    });
  }

  /** Everything about one name: its holders, its waiting readers and writer, its waiters. */
  inspect(key) {
    const lockKey = `${this.#prefix}{${key}}`;
    const channels = CHANNEL_SUFFIXES.map((suffix) => `${lockKey}${suffix}`);
    return storeCall(this.#where(), async () => {
      const here = await this.#onKey(key, async (redis) => {
        const now = await serverNow(redis);
        const rw = `${lockKey}:rw`;
        const [lock, semaphore, readWrite, limit, claim, claimLeft, readers, turn, sharded] = await Promise.all([
          lockHolds(redis, lockKey, key),
          permitHolds(redis, `${lockKey}:semaphore`, key, ":semaphore", now),
          permitHolds(redis, rw, key, ":rw", now),
          redis.call("GET", `${lockKey}:semaphore:limit`),
          redis.call("GET", `${rw}:claim`),
          redis.call("PTTL", `${rw}:claim`),
          liveMembers(redis, `${rw}:readers`, now),
          liveMembers(redis, `${rw}:turn`, now),
          this.#cluster ? redis.call("PUBSUB", "SHARDNUMSUB", ...channels) : [],
        ]);
        const waiting = [];
        if (claim !== null && Number(claimLeft) !== -2) waiting.push({ kind: "write", owner: fingerprint(claim), remainingMs: Math.max(0, Number(claimLeft)) });
        const seen = new Set();
        for (const r of [...turn, ...readers]) {
          if (seen.has(r.owner)) continue;
          seen.add(r.owner);
          waiting.push({ kind: "read", owner: fingerprint(r.owner), remainingMs: Math.max(0, r.expiresAt - now) });
        }
        const counts = new Map();
        addCounts(counts, sharded, () => key);
        return {
          holders: [...lock, ...semaphore, ...readWrite],
          limit: semaphore.length > 0 && limit !== null ? Number(limit) : null,
          waiting,
          sharded: counts.get(key) ?? 0,
        };
      });
      let waiters = here.sharded;
      for (const redis of await this.#allNodes()) {
        const counts = new Map();
        addCounts(counts, await redis.call("PUBSUB", "NUMSUB", ...channels), () => key);
        waiters += counts.get(key) ?? 0;
      }
      return { holders: here.holders, limit: here.limit, waiting: here.waiting, waiters };
    });
  }

  /** Frees every hold on `key`, with the store's own scripts (so its waiters are woken): what was freed. */
  release(key) {
    return storeCall(this.#where(), () => this.#onKey(key, (redis) => redisRelease(redis, key, this.#prefix, this.#cluster)));
  }

  close() {
    this.#seed.close();
    for (const made of this.#connections.values())
      made.then(
        (c) => c.close(),
        () => {},
      );
  }
}

async function runScript(redis, script, keys, args = []) {
  try {
    return await redis.call("EVALSHA", script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!/NOSCRIPT/.test(err.message)) throw err;
    return redis.call("EVAL", script.source, keys.length, ...keys, ...args);
  }
}

/**
 * Frees every hold on `key` on `redis` (the server of its slot). The scripts PUBLISH their
 * release messages; on a Cluster the same message also goes out with SPUBLISH, on which
 * RedisLockStore's waiters there listen (sharded pub/sub), so both kinds wake.
 */
async function redisRelease(redis, key, prefix, cluster) {
  const lockKey = `${prefix}{${key}}`;
  const released = [];
  const found = await runScript(redis, SCRIPTS.forceRelease, [lockKey, `${lockKey}:fence`]);
  if (found !== null) {
    const [owner, remaining, fence] = found;
    released.push(hold(key, "lock", Number(remaining) >= 0 ? Number(remaining) : null, fence === "" ? null : Number(fence), owner));
    if (cluster) await redis.call("SPUBLISH", `${lockKey}:released`, "");
  }
  // Permits: each live holder given back with the store's own release script, which
  // tidies the companions and wakes the waiters as the holder's own release would.
  const now = await serverNow(redis);
  for (const [set, suffix] of Object.entries(HOLDERS_SUFFIX)) {
    const holdersKey = `${lockKey}${suffix}`;
    const writer = set === "rw" ? await redis.call("GET", `${holdersKey}:writer`) : null;
    const weights = set === "semaphore" ? hashOf(await redis.call("HGETALL", `${holdersKey}:weights`)) : null;
    let freed = false;
    for (const holder of await liveMembers(redis, holdersKey, now)) {
      const gone =
        set === "semaphore"
          ? await runScript(redis, SCRIPTS.semaphoreRelease, [holdersKey, `${holdersKey}:limit`, `${holdersKey}:weights`], [holder.owner])
          : await runScript(redis, SCRIPTS.rwlockRelease, [holdersKey, ...RW_COMPANIONS.map((suffix) => `${holdersKey}:${suffix}`)], [holder.owner]);
      if (Number(gone) !== 1) continue; // released or expired meanwhile
      freed = true;
      const kind = set === "semaphore" ? "semaphore" : holder.owner === writer ? "write" : "read";
      released.push(hold(key, kind, Math.max(0, holder.expiresAt - now), null, holder.owner, weights?.get(holder.owner)));
    }
    if (freed && cluster) await redis.call("SPUBLISH", `${holdersKey}:released`, "");
  }
  return released;
}

// ---------------------------------------------------------------------------------
// PostgreSQL

const TABLE = /^(?:[A-Za-z_][A-Za-z0-9_]*\.)?[A-Za-z_][A-Za-z0-9_]*$/;

async function optionalImport(name, forWhat) {
  try {
    return await import(name);
  } catch (err) {
    if (err?.code === "ERR_MODULE_NOT_FOUND") return undefined;
    throw new Error(`could not load ${name} for ${forWhat}: ${err.message}`);
  }
}

const quoteTable = (table) =>
  table
    .split(".")
    .map((part) => `"${part}"`)
    .join(".");
/** The permits table beside `table` (js/stores/postgres.cjs): `<table>_permits`, in the same schema. */
const permitsTable = (table) => quoteTable(`${table}_permits`);
const REMAINING_MS = "ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint";
// The permits rows that wait rather than hold (js/stores/postgres.cjs): a read-write lock's
// waiting writer's 'claim', its readers 'waiting' for their turn, and those whose 'turn' it is.
const WAITING_ROLES = "('claim', 'waiting', 'turn')";

// A permits row's `permits` (a semaphore hold's weight): tables made before holds had
// weights have no such column, so the rows are read whole (`p.*`) and a row without it holds 1.
const pgHold = (r, kind) => hold(r.key, kind, Number(r.remaining_ms), r.fencing_token === null ? null : Number(r.fencing_token), r.owner, r.permits);

/** The glob as LIKE: * → %, ? → _, and LIKE's own characters escaped. */
const likeOf = (pattern) =>
  pattern
    .replace(/[\\%_]/g, "\\$&")
    .replace(/\*/g, "%")
    .replace(/\?/g, "_");

class PostgresStore {
  #client;
  #table;
  #where;

  static async open(url, { table }) {
    const pg = await optionalImport("pg", "PostgreSQL");
    if (!pg) throw new UsageError("PostgreSQL URLs need pg: npm install pg");
    const Client = pg.default?.Client ?? pg.Client;
    const parsed = new URL(url);
    const where = address(parsed.hostname.replace(/^\[(.*)\]$/, "$1") || "localhost", parsed.port || 5432);
    const client = new Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, query_timeout: CONNECT_TIMEOUT_MS });
    client.on("error", () => {});
    try {
      await client.connect();
    } catch (err) {
      // A server that answered and refused (SQLSTATE 28xxx: the login; 3D000: no such database).
      if (typeof err?.code === "string" && /^[0-9A-Z]{5}$/.test(err.code)) {
        throw new StoreError(`PostgreSQL at ${where} refused the connection: ${err.message}`);
      }
      throw new StoreError(`could not reach PostgreSQL at ${where}: ${err.message}`);
    }
    return new PostgresStore(client, table, where);
  }

  constructor(client, table, where) {
    this.#client = client;
    this.#table = table;
    this.#where = `PostgreSQL at ${where}`;
  }

  #holdsWhere(condition, value) {
    const client = this.#client;
    return Promise.all([
      client.query(
        `SELECT key, owner, fencing_token, ${REMAINING_MS} AS remaining_ms
           FROM ${quoteTable(this.#table)}
          WHERE expires_at > clock_timestamp() AND key ${condition} $1
          ORDER BY key`,
        [value],
      ),
      // role: semaphore, read or write; a waiting writer's claim holds nothing.
      client.query(
        `SELECT p.*, ${REMAINING_MS} AS remaining_ms
           FROM ${permitsTable(this.#table)} AS p
          WHERE expires_at > clock_timestamp() AND role IN ('semaphore', 'read', 'write') AND key ${condition} $1
          ORDER BY key, role, owner`,
        [value],
      ),
    ]).then(([locks, permits]) => ({ locks: locks.rows, permits: permits.rows }));
  }

  list(pattern) {
    return storeCall(this.#where, async () => {
      const { locks, permits } = await this.#holdsWhere("LIKE", likeOf(pattern));
      return [...locks.map((r) => pgHold(r, "lock")), ...permits.map((r) => pgHold(r, r.role))];
    });
  }

  snapshot(pattern) {
    return storeCall(this.#where, async () => {
      const [holds, counts] = await Promise.all([
        this.list(pattern),
        this.#client.query(
          `SELECT key, count(*) FILTER (WHERE role IN ${WAITING_ROLES}) AS waiting FROM ${permitsTable(this.#table)}
            WHERE kind = 'rw' AND expires_at > clock_timestamp() AND key LIKE $1
            GROUP BY key`,
          [likeOf(pattern)],
        ),
      ]);
      // Read-write locks only: a plain lock's or a semaphore's waiters leave no rows.
      return { holds, waiters: new Map(counts.rows.map((r) => [r.key, Number(r.waiting)])), absentWaiters: null };
    });
  }

  inspect(key) {
    return storeCall(this.#where, async () => {
      const [{ locks, permits }, rw] = await Promise.all([
        this.#holdsWhere("=", key),
        this.#client.query(
          `SELECT role, owner, ${REMAINING_MS} AS remaining_ms FROM ${permitsTable(this.#table)}
            WHERE kind = 'rw' AND key = $1 AND expires_at > clock_timestamp() ORDER BY role, owner`,
          [key],
        ),
      ]);
      const waiting = rw.rows
        .filter((r) => ["claim", "waiting", "turn"].includes(r.role))
        .map((r) => ({ kind: r.role === "claim" ? "write" : "read", owner: fingerprint(r.owner), remainingMs: Number(r.remaining_ms) }));
      const semaphore = permits.find((r) => r.role === "semaphore");
      return {
        holders: [...locks.map((r) => pgHold(r, "lock")), ...permits.map((r) => pgHold(r, r.role))],
        limit: semaphore?.semaphore_limit ?? null,
        waiting,
        // Only a read-write lock's waiters leave rows (readers, and the first waiting writer's
        // claim); a plain lock's or a semaphore's leave none.
        waiters: rw.rows.length > 0 ? waiting.length : null,
      };
    });
  }

  release(key) {
    const client = this.#client;
    const table = this.#table;
    return storeCall(this.#where, async () => {
      // Under the advisory locks the store decides each kind of hold under (js/stores/postgres.cjs),
      // so an acquire or extend in flight sees the holds either all there or all gone.
      const lockspace = `locksmith:${table}`;
      const channel = table.split(".").pop();
      await client.query("BEGIN");
      try {
        for (const name of [`lock:${key}`, `semaphore:${key}`, `rw:${key}`]) {
          await client.query("SELECT pg_advisory_xact_lock(hashtext($1), hashtext($2))", [lockspace, name]);
        }
        const locks = await client.query(
          `DELETE FROM ${quoteTable(table)} WHERE key = $1 AND expires_at > clock_timestamp()
           RETURNING key, owner, fencing_token, ${REMAINING_MS} AS remaining_ms`,
          [key],
        );
        const permits = await client.query(
          `DELETE FROM ${permitsTable(table)} WHERE key = $1 AND role IN ('semaphore', 'read', 'write') AND expires_at > clock_timestamp()
           RETURNING *, ${REMAINING_MS} AS remaining_ms`,
          [key],
        );
        // Waiters listen on the channel named like the table (without its schema), for
        // `<lock|semaphore|rw>:<key>`; notifications go out at commit.
        const sets = new Set(permits.rows.map((r) => r.kind));
        if (locks.rows.length > 0) sets.add("lock");
        for (const set of sets) await client.query("SELECT pg_notify($1, $2)", [channel, `${set}:${key}`]);
        await client.query("COMMIT");
        return [...locks.rows.map((r) => pgHold(r, "lock")), ...permits.rows.sort((a, b) => a.owner.localeCompare(b.owner)).map((r) => pgHold(r, r.role))];
      } catch (err) {
        await client.query("ROLLBACK").catch(() => {});
        throw err;
      }
    });
  }

  async close() {
    await this.#client.end().catch(() => {});
  }
}

// ---------------------------------------------------------------------------------
// MySQL and MariaDB (the tables of js/stores/mysql.cjs)

const quoteMySqlTable = (table) =>
  table
    .split(".")
    .map((part) => `\`${part}\``)
    .join(".");
// The server's clock in milliseconds, as the store reads it.
const MYSQL_NOW_MS = "(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(3)) DIV 1000)";
const MYSQL_REMAINING_MS = `expires_at - ${MYSQL_NOW_MS}`;
const bytesText = (value) => (Buffer.isBuffer(value) ? value.toString("utf8") : String(value));

const mysqlHold = (r, kind) =>
  hold(bytesText(r.key), kind, Number(r.remaining_ms), r.fencing_token === null ? null : Number(r.fencing_token), bytesText(r.owner), r.permits);

class MySqlStore {
  #db;
  #locks;
  #permits;
  #keys;
  #where;

  static async open(url, { table }) {
    const mysql = await optionalImport("mysql2/promise", "MySQL");
    if (!mysql) throw new UsageError("MySQL URLs need mysql2: npm install mysql2");
    const parsed = new URL(url);
    const where = address(parsed.hostname.replace(/^\[(.*)\]$/, "$1") || "localhost", parsed.port || 3306);
    let db;
    try {
      db = await (mysql.default ?? mysql).createConnection({ uri: url, connectTimeout: CONNECT_TIMEOUT_MS, supportBigNumbers: true });
    } catch (err) {
      // A server that answered and refused (an SQLSTATE: the login, no such database).
      if (typeof err?.sqlState === "string") throw new StoreError(`MySQL at ${where} refused the connection: ${err.message}`);
      throw new StoreError(`could not reach MySQL at ${where}: ${err.message}`);
    }
    db.on("error", () => {});
    return new MySqlStore(db, table, where);
  }

  constructor(db, table, where) {
    this.#db = db;
    this.#locks = quoteMySqlTable(table);
    this.#permits = quoteMySqlTable(`${table}_permits`);
    this.#keys = quoteMySqlTable(`${table}_keys`);
    this.#where = `MySQL at ${where}`;
  }

  async #query(sql, params) {
    const [rows] = await this.#db.query({ sql, timeout: CONNECT_TIMEOUT_MS }, params);
    return rows;
  }

  #holdsWhere(condition, value) {
    return Promise.all([
      this.#query(
        `SELECT \`key\`, owner, fencing_token, ${MYSQL_REMAINING_MS} AS remaining_ms FROM ${this.#locks}
          WHERE expires_at > ${MYSQL_NOW_MS} AND \`key\` ${condition} ? ORDER BY \`key\``,
        [value],
      ),
      // role: semaphore, read or write; a waiting writer's claim and waiting readers hold nothing.
      this.#query(
        `SELECT \`key\`, role, owner, fencing_token, semaphore_limit, permits, ${MYSQL_REMAINING_MS} AS remaining_ms FROM ${this.#permits}
          WHERE expires_at > ${MYSQL_NOW_MS} AND role IN ('semaphore', 'read', 'write') AND \`key\` ${condition} ?
          ORDER BY \`key\`, role, owner`,
        [value],
      ),
    ]).then(([locks, permits]) => ({ locks, permits }));
  }

  list(pattern) {
    return storeCall(this.#where, async () => {
      const { locks, permits } = await this.#holdsWhere("LIKE", likeOf(pattern));
      return [...locks.map((r) => mysqlHold(r, "lock")), ...permits.map((r) => mysqlHold(r, r.role))];
    });
  }

  snapshot(pattern) {
    return storeCall(this.#where, async () => {
      const [holds, counts] = await Promise.all([
        this.list(pattern),
        this.#query(
          `SELECT \`key\`, SUM(role IN ${WAITING_ROLES}) AS waiting FROM ${this.#permits}
            WHERE kind = 'rw' AND expires_at > ${MYSQL_NOW_MS} AND \`key\` LIKE ? GROUP BY \`key\``,
          [likeOf(pattern)],
        ),
      ]);
      // Read-write locks only: a plain lock's or a semaphore's waiters leave no rows.
      return { holds, waiters: new Map(counts.map((r) => [bytesText(r.key), Number(r.waiting)])), absentWaiters: null };
    });
  }

  inspect(key) {
    return storeCall(this.#where, async () => {
      const [{ locks, permits }, rw] = await Promise.all([
        this.#holdsWhere("=", key),
        this.#query(
          `SELECT role, owner, ${MYSQL_REMAINING_MS} AS remaining_ms FROM ${this.#permits}
            WHERE kind = 'rw' AND \`key\` = ? AND expires_at > ${MYSQL_NOW_MS} ORDER BY role, owner`,
          [key],
        ),
      ]);
      const waiting = rw
        .filter((r) => ["claim", "waiting", "turn"].includes(r.role))
        .map((r) => ({ kind: r.role === "claim" ? "write" : "read", owner: fingerprint(bytesText(r.owner)), remainingMs: Number(r.remaining_ms) }));
      const semaphore = permits.find((r) => r.role === "semaphore");
      return {
        holders: [...locks.map((r) => mysqlHold(r, "lock")), ...permits.map((r) => mysqlHold(r, r.role))],
        limit: semaphore?.semaphore_limit == null ? null : Number(semaphore.semaphore_limit),
        waiting,
        // Only a read-write lock's waiters leave rows; a plain lock's or a semaphore's none.
        waiters: rw.length > 0 ? waiting.length : null,
      };
    });
  }

  release(key) {
    return storeCall(this.#where, async () => {
      // Under the row locks the store decides each kind of hold under (js/stores/mysql.cjs):
      // the lock's own row, and the semaphore's and read-write lock's rows in <table>_keys.
      await this.#query("SET TRANSACTION ISOLATION LEVEL READ COMMITTED");
      await this.#query("START TRANSACTION");
      try {
        const locks = await this.#query(
          `SELECT \`key\`, owner, fencing_token, ${MYSQL_REMAINING_MS} AS remaining_ms FROM ${this.#locks}
            WHERE \`key\` = ? AND expires_at > ${MYSQL_NOW_MS} FOR UPDATE`,
          [key],
        );
        // Expired, not deleted, as the store's own release does.
        if (locks.length > 0) await this.#query(`UPDATE ${this.#locks} SET expires_at = ${MYSQL_NOW_MS} WHERE \`key\` = ?`, [key]);
        for (const set of ["semaphore", "rw"]) {
          await this.#query(`INSERT INTO ${this.#keys} (kind, \`key\`) VALUES (?, ?) ON DUPLICATE KEY UPDATE kind = kind`, [set, key]);
        }
        const permits = await this.#query(
          `SELECT \`key\`, kind, role, owner, fencing_token, permits, ${MYSQL_REMAINING_MS} AS remaining_ms FROM ${this.#permits}
            WHERE \`key\` = ? AND role IN ('semaphore', 'read', 'write') AND expires_at > ${MYSQL_NOW_MS}`,
          [key],
        );
        for (const r of permits) {
          await this.#query(`DELETE FROM ${this.#permits} WHERE kind = ? AND \`key\` = ? AND owner = ?`, [r.kind, key, r.owner]);
        }
        // A writer's hold ended: the readers waiting for it take their turn.
        if (permits.some((r) => r.role === "write")) {
          await this.#query(
            `UPDATE ${this.#permits} SET role = 'turn' WHERE kind = 'rw' AND \`key\` = ? AND role = 'waiting' AND expires_at > ${MYSQL_NOW_MS}`,
            [key],
          );
        }
        await this.#query("COMMIT");
        const owners = (r) => bytesText(r.owner);
        return [...locks.map((r) => mysqlHold(r, "lock")), ...permits.sort((a, b) => owners(a).localeCompare(owners(b))).map((r) => mysqlHold(r, r.role))];
      } catch (err) {
        await this.#query("ROLLBACK").catch(() => {});
        throw err;
      }
    });
  }

  async close() {
    await this.#db.end().catch(() => this.#db.destroy());
  }
}

// ---------------------------------------------------------------------------------
// etcd: through EtcdLockStore itself (its requests, login and member failover)

/** `etcd://[user:password@]host:port[,host:port…]` (etcds:// for TLS) as EtcdLockStore's options. */
function parseEtcdUrl(url) {
  const match = /^(etcds?):\/\/(?:([^@/]*)@)?([^/?#@]+)\/?$/.exec(url);
  if (!match) throw new UsageError(`an etcd URL is etcd://[user:password@]host:port[,host:port…] (etcds:// for TLS); got ${redact(url)}`);
  const [, scheme, login, hosts] = match;
  const endpoints = hosts.split(",").map((host) => `${scheme === "etcds" ? "https" : "http"}://${host}`);
  if (login === undefined) return { endpoints, hosts };
  const colon = login.indexOf(":");
  return {
    endpoints,
    hosts,
    username: decodeURIComponent(colon < 0 ? login : login.slice(0, colon)),
    password: colon < 0 ? "" : decodeURIComponent(login.slice(colon + 1)),
  };
}

const etcdPlain = (err) => String(err?.message ?? err).replace(/^locksmith: (etcd: )?/, "");
// A semaphore entry's permits, when the store's listing reports them (`permits`); else 1.
const etcdHold = (h) => hold(h.key, h.kind, h.remainingMs, h.fencingToken, h.owner, h.permits);

class EtcdStore {
  #store;
  #where;
  #admin;

  static async open(url, { prefix }) {
    const { endpoints, hosts, username, password } = parseEtcdUrl(url);
    const { EtcdLockStore, ETCD_ADMIN_LIST, ETCD_ADMIN_RELEASE } = await import("../stores/etcd.mjs");
    let store;
    try {
      store = await EtcdLockStore.connect({ endpoints, keyPrefix: prefix, username, password, operationTimeoutMs: CONNECT_TIMEOUT_MS, notifyReleases: false });
    } catch (err) {
      if (err?.code === "INVALID_ARGUMENT") throw new UsageError(etcdPlain(err));
      throw new StoreError(`etcd at ${hosts}: ${etcdPlain(err)}`);
    }
    return new EtcdStore(store, hosts, { list: ETCD_ADMIN_LIST, release: ETCD_ADMIN_RELEASE });
  }

  constructor(store, hosts, admin) {
    this.#store = store;
    this.#where = `etcd at ${hosts}`;
    this.#admin = admin;
  }

  #call(work) {
    return storeCall(this.#where, async () => {
      try {
        return await work();
      } catch (err) {
        if (err instanceof UsageError || err instanceof StoreError) throw err;
        throw new StoreError(`${this.#where}: ${etcdPlain(err)}`);
      }
    });
  }

  list(pattern) {
    const names = globRegExp(pattern);
    return this.#call(async () => (await this.#store[this.#admin.list]((name) => names.test(name))).map(etcdHold));
  }

  // etcd keeps a waiting reader's or writer's place in the key's queue, but the store's
  // listing gives only the admitted entries, and a plain lock's or a semaphore's waiters
  // leave no key: the waiters are not known.
  async snapshot(pattern) {
    return { holds: await this.list(pattern), waiters: new Map(), absentWaiters: null };
  }

  inspect(key) {
    return this.#call(async () => ({
      holders: (await this.#store[this.#admin.list]((name) => name === key)).map(etcdHold),
      limit: null,
      waiting: [],
      waiters: null,
    }));
  }

  // One transaction deletes them all; the store's watches wake the waiters.
  release(key) {
    return this.#call(async () => (await this.#store[this.#admin.release](key)).map(etcdHold));
  }

  async close() {
    await this.#store.close();
  }
}

// ---------------------------------------------------------------------------------
// A lock file (FileLockStore: core/src/file.rs, through the native addon)

const fileHold = (h) => hold(h.key, h.kind, h.remainingMs, h.fencingToken, h.owner, h.permits);

class FileStore {
  #store;
  #where;

  static async open(url) {
    let path;
    try {
      path = fileURLToPath(url);
    } catch (err) {
      throw new UsageError(`not a file URL: ${url} (${err.message}); write file:///absolute/path`);
    }
    // The store makes a missing file; the command only reads what is there.
    try {
      if (!(await stat(path)).isFile()) throw new StoreError(`${path} is not a lock file (not a regular file)`);
    } catch (err) {
      if (err instanceof StoreError) throw err;
      throw new StoreError(`no lock file at ${path}: ${err.message}`);
    }
    let addon;
    try {
      addon = createRequire(import.meta.url)("../native-loader.cjs").loadAddon();
    } catch (err) {
      throw new StoreError(`lock files need the native addon, which did not load here: ${err.message}`);
    }
    try {
      return new FileStore(addon.NativeFileStore.openExisting(path), path);
    } catch (err) {
      throw new StoreError(`the lock file ${path}: ${err.message}`);
    }
  }

  constructor(store, path) {
    this.#store = store;
    this.#where = `the lock file ${path}`;
  }

  async #all() {
    return storeCall(this.#where, () => this.#store.holds());
  }

  async list(pattern) {
    const names = globRegExp(pattern);
    return (await this.#all()).filter((h) => !h.waiting && names.test(h.key)).map(fileHold);
  }

  async snapshot(pattern) {
    const names = globRegExp(pattern);
    const all = (await this.#all()).filter((h) => names.test(h.key));
    const waiters = new Map();
    for (const h of all.filter((x) => x.waiting)) waiters.set(h.key, (waiters.get(h.key) ?? 0) + 1);
    // A plain lock's or a semaphore's waiters leave nothing in the file; a read-write lock's do.
    return { holds: all.filter((h) => !h.waiting).map(fileHold), waiters, absentWaiters: null };
  }

  async inspect(key) {
    const all = (await this.#all()).filter((h) => h.key === key);
    const holders = all.filter((h) => !h.waiting);
    const waiting = all.filter((h) => h.waiting).map((h) => ({ kind: h.kind, owner: fingerprint(h.owner), remainingMs: h.remainingMs }));
    const semaphore = holders.find((h) => h.kind === "semaphore");
    return {
      holders: holders.map(fileHold),
      limit: semaphore?.limit ?? null,
      waiting,
      waiters: all.some((h) => h.kind === "read" || h.kind === "write") ? waiting.length : null,
    };
  }

  // The waiters of other processes wake on their watch of the file.
  release(key) {
    return storeCall(this.#where, async () => (await this.#store.forceRelease(key)).map(fileHold));
  }

  async close() {
    this.#store.close();
  }
}

// ---------------------------------------------------------------------------------

/** The store of `url`, connected: `{ list, snapshot, inspect, release, close }`. */
function openStore(url, values) {
  // Before URL parsing: an etcd URL may name several members (host:port,host:port).
  if (/^etcds?:/i.test(url)) return EtcdStore.open(url, values);
  let scheme;
  try {
    scheme = new URL(url).protocol;
  } catch {
    throw new UsageError(`not a store URL: ${redact(url)}`);
  }
  if (scheme === "redis:" || scheme === "rediss:") return RedisStore.open(url, values);
  if (scheme === "postgres:" || scheme === "postgresql:") return PostgresStore.open(url, values);
  if (scheme === "mysql:") return MySqlStore.open(url, values);
  if (scheme === "file:") return FileStore.open(url);
  throw new UsageError(`unsupported store URL scheme ${scheme}// (redis://, rediss://, postgres://, mysql://, etcd://, file://)`);
}

/** Runs `work(store)` on the store of `url`, then closes it. */
async function withStore(url, values, work) {
  const store = await openStore(url, values);
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

const seconds = (ms) => (ms === null ? "no expiry" : `${(ms / 1000).toFixed(1)} s`);
/** A hold's kind as text: a semaphore hold of more than one permit with them ("semaphore ×3"). */
const kindText = (h) => (h.permits > 1 ? `${h.kind} ×${h.permits}` : h.kind);

/** Rows as columns padded to their widest cell. */
function columns(rows) {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  return rows
    .map((r) =>
      r
        .map((c, i) => String(c).padEnd(widths[i]))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}

function table(holds) {
  return columns([
    ["KEY", "KIND", "REMAINING", "FENCING TOKEN", "OWNER"],
    ...holds.map((h) => [h.key, kindText(h), seconds(h.remainingMs), h.fencingToken ?? "-", h.owner]),
  ]);
}

const COMMANDS = ["list", "inspect", "watch", "release", "help"];
const STORE_URL_VARIABLE = "LOCKSMITH_STORE_URL";

/** The edit distance of `a` and `b` (insertions, deletions, substitutions, swaps of neighbours). */
function distance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/** ": did you mean X?" for the one of `known` nearest to `typed` (at most 2 edits, fewer than half its letters), else "". */
function didYouMean(typed, known, show = (k) => k) {
  const lower = typed.toLowerCase();
  let best;
  let bestDistance = Math.min(2, Math.floor((lower.length - 1) / 2)) + 1;
  for (const k of known) {
    const d = distance(lower, k);
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return best === undefined ? "" : `: did you mean ${show(best)}?`;
}

/** Whether an argument is a store URL (a scheme and //, or file:), not a key or a pattern. */
const isUrlArgument = (arg) => /^[a-z][a-z0-9+.-]*:\/\//i.test(arg) || /^file:/i.test(arg);

/** Whether a store URL carries a password: in its user part (user:password@), or as ?password=. */
const hasPassword = (url) => /^[a-z][a-z0-9+.-]*:\/\/[^/@]*:[^/@]+@/i.test(url) || /[?&]password=[^&]/i.test(url);

/**
 * The positionals with the store URL second: the argument's, or LOCKSMITH_STORE_URL's
 * when the argument after the command is no URL (a key, a pattern) or missing. A password
 * in the argument is warned of (the command runs once per process: once).
 */
function withStoreUrl(positionals, err) {
  const [command, first, ...rest] = positionals;
  if (first !== undefined && isUrlArgument(first)) {
    if (hasPassword(first)) {
      err.write(
        "locksmith: warning: the store URL argument holds a password, and ps and the shell's history show it: " +
          `set ${STORE_URL_VARIABLE} to the URL instead and leave it out of the arguments\n`,
      );
    }
    return { positionals, fromEnvironment: false };
  }
  const fromEnvironment = process.env[STORE_URL_VARIABLE];
  if (fromEnvironment === undefined || fromEnvironment === "") return { positionals, fromEnvironment: false };
  return { positionals: [command, fromEnvironment, ...(first === undefined ? [] : [first]), ...rest], fromEnvironment: true };
}

/** The command line parsed, or a UsageError that says which argument is wrong. */
function parse(argv) {
  try {
    return parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    // parseArgs's own text ("Unknown option '--x'. To specify a positional argument…")
    // is for programmers: say which flag, and show the usage.
    const flag = /'(-[^' ]*)/.exec(err.message)?.[1];
    const name = flag?.replace(/^-+/, "").split("=")[0];
    if (err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      const hint = flag?.startsWith("--") ? didYouMean(name, Object.keys(OPTIONS), (o) => `--${o}`) : "";
      throw new UsageError(`unknown option ${flag ?? err.message}${hint}`, { usage: true });
    }
    if (err.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && OPTIONS[name]?.type === "string") {
      throw new UsageError(`--${name} needs a value`, { usage: true });
    }
    if (err.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && OPTIONS[name]?.type === "boolean") {
      throw new UsageError(`--${name} takes no value`, { usage: true });
    }
    throw new UsageError(err.message, { usage: true });
  }
}

const compareKeys = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
const sortHolds = (holds) => holds.sort((a, b) => compareKeys(a.key, b.key) || a.kind.localeCompare(b.kind) || a.owner.localeCompare(b.owner));

// ---------------------------------------------------------------------------------
// inspect

const STORE_CANNOT_TELL =
  "the store does not tell (PostgreSQL, MySQL: only a read-write lock's waiters leave rows; a lock file: only a read-write lock's; etcd: none)";

async function inspect(url, key, values, out) {
  const found = await withStore(url, values, (store) => store.inspect(key));
  const holders = sortHolds(found.holders).map(({ key: _, ...h }) => h);
  const kinds = [...new Set(holders.map((h) => h.kind))];
  const result = {
    key,
    held: holders.length > 0,
    kind: kinds.length === 0 ? null : kinds.length === 1 ? kinds[0] : "mixed",
    holders,
    limit: found.limit,
    waiters: found.waiters,
    waiting: found.waiting,
  };
  if (values.json) {
    out.write(`${JSON.stringify(result)}\n`);
    return result.held ? 0 : 1;
  }
  const lines = [];
  if (!result.held) lines.push(`${JSON.stringify(key)} is free`);
  else {
    // The permits held: a semaphore holder's weight each.
    const taken = holders.reduce((sum, h) => sum + (h.permits ?? 1), 0);
    const what = result.kind === "semaphore" && result.limit !== null ? `semaphore, ${taken} of ${result.limit} permits` : result.kind;
    lines.push(`${JSON.stringify(key)} is held (${what}):`);
    lines.push(
      columns([["KIND", "REMAINING", "FENCING TOKEN", "OWNER"], ...holders.map((h) => [kindText(h), seconds(h.remainingMs), h.fencingToken ?? "-", h.owner])]),
    );
  }
  for (const w of found.waiting) {
    lines.push(`waiting: a ${w.kind === "write" ? "writer" : "reader"}, ${w.owner} (its place kept for ${seconds(w.remainingMs)})`);
  }
  lines.push(
    found.waiters === null
      ? `waiters: unknown (${STORE_CANNOT_TELL})`
      : url.startsWith("redis")
        ? `waiters: ${found.waiters} (connections subscribed to its release messages)`
        : `waiters: ${found.waiters}`,
  );
  out.write(`${lines.join("\n")}\n`);
  return result.held ? 0 : 1;
}

// ---------------------------------------------------------------------------------
// watch

// One hold of a name whose kind has one holder at a time (a lock, a writer) is the same
// hold under another owner; a semaphore's and readers' holds are told apart by owner.
const holdId = (h) => (h.kind === "lock" || h.kind === "write" ? `${h.key}\0${h.kind}` : `${h.key}\0${h.kind}\0${h.owner}`);

/** The changes from `before` to `after` (snapshots), in key order; `first`: `after` is the first. */
function changes(before, after, first) {
  const events = [];
  const was = new Map(before.holds.map((h) => [holdId(h), h]));
  const now = new Map(after.holds.map((h) => [holdId(h), h]));
  // A semaphore hold's events carry its permits.
  const weight = (h) => (h.permits === undefined ? {} : { permits: h.permits });
  const held = (event, h) => ({ event, key: h.key, kind: h.kind, ...weight(h), owner: h.owner, fencingToken: h.fencingToken, remainingMs: h.remainingMs });
  for (const [id, h] of was) if (!now.has(id)) events.push({ event: "ended", key: h.key, kind: h.kind, ...weight(h), owner: h.owner });
  for (const [id, h] of now) {
    const old = was.get(id);
    if (old === undefined) events.push(held(first ? "held" : "acquired", h));
    else if (old.owner !== h.owner) events.push({ ...held("owner-changed", h), previousOwner: old.owner });
  }
  for (const key of new Set([...before.waiters.keys(), ...after.waiters.keys()])) {
    const from = before.waiters.get(key) ?? 0;
    const to = after.waiters.get(key) ?? 0;
    if (from !== to) events.push({ event: "waiters", key, waiters: to, previousWaiters: from });
  }
  const order = { ended: 0, "owner-changed": 1, held: 2, acquired: 2, waiters: 3 };
  return events.sort((a, b) => compareKeys(a.key, b.key) || order[a.event] - order[b.event] || (a.kind ?? "").localeCompare(b.kind ?? ""));
}

/** A change as one line of text: the time, the event (as in --json), the name, then what changed. */
function changeLine(at, e) {
  const head = `${at}  ${e.event.padEnd(13)}  ${e.key}`;
  if (e.event === "waiters") return `${head}  ${e.previousWaiters} → ${e.waiters}`;
  if (e.event === "ended") return `${head}  ${kindText(e)}  ${e.owner}`;
  const token = e.fencingToken === null ? "" : `  fencing token ${e.fencingToken}`;
  const owner = e.event === "owner-changed" ? `${e.previousOwner} → ${e.owner}` : e.owner;
  return `${head}  ${kindText(e)}  ${owner}${token}  ${seconds(e.remainingMs)} left`;
}

const ESC = "\x1b[";
const HIDE_CURSOR = `${ESC}?25l`;
const SHOW_CURSOR = `${ESC}?25h`;

/** The screen: a title, then every hold and every name waited on, cut to the terminal's height. */
function screen(snapshot, { url, pattern, intervalMs, rows: height }) {
  const byKey = new Map();
  for (const h of snapshot.holds) byKey.set(h.key, [...(byKey.get(h.key) ?? []), h]);
  for (const key of snapshot.waiters.keys()) if (!byKey.has(key)) byKey.set(key, []);
  const waiters = (key) => String(snapshot.waiters.get(key) ?? snapshot.absentWaiters ?? "-");
  const rows = [];
  for (const key of [...byKey.keys()].sort(compareKeys)) {
    const holds = sortHolds(byKey.get(key));
    if (holds.length === 0) rows.push([key, "(free)", "-", "-", "-", waiters(key)]);
    for (const h of holds) rows.push([h.key, kindText(h), seconds(h.remainingMs), h.fencingToken ?? "-", h.owner, waiters(key)]);
  }
  const title = `locksmith watch ${redact(url)} ${pattern}  every ${intervalMs / 1000} s  ${new Date().toLocaleTimeString()}  (Ctrl-C to stop)`;
  const room = Math.max(1, (height ?? 24) - 4);
  const shown = rows.length > room ? rows.slice(0, room - 1) : rows;
  const lines = [title, ""];
  if (rows.length === 0) lines.push("no locks held");
  else lines.push(columns([["KEY", "KIND", "REMAINING", "FENCING TOKEN", "OWNER", "WAITERS"], ...shown]));
  if (shown.length < rows.length) lines.push(`… and ${rows.length - shown.length} more`);
  return `${ESC}H${lines.join(`${ESC}K\n`)}${ESC}K\n${ESC}J`;
}

/**
 * Reads the store every `intervalMs` until SIGINT or SIGTERM (then 0). A read that fails is
 * tried once more on a new connection; when that fails too, the store is lost: a StoreError.
 */
async function watch(url, pattern, values, out) {
  const intervalMs = values.intervalMs;
  const live = out.isTTY === true && !values.json;
  let store = await openStore(url, values);
  let stopping = false;
  let stop;
  const stopped = new Promise((resolve) => {
    stop = () => {
      stopping = true;
      resolve();
    };
  });
  const signals = ["SIGINT", "SIGTERM"];
  for (const signal of signals) process.on(signal, stop);
  const restoreCursor = () => out.write(SHOW_CURSOR);
  if (live) {
    out.write(`${HIDE_CURSOR}${ESC}2J`);
    process.on("exit", restoreCursor);
  }
  const STOP = Symbol("stop");
  const untilStopped = (promise) => Promise.race([promise, stopped.then(() => STOP)]);
  // A new connection and a first read on it; a store that connects after a stop is closed.
  const reopen = async () => {
    const fresh = await openStore(url, values);
    if (stopping) {
      await fresh.close();
      return STOP;
    }
    store = fresh;
    return store.snapshot(pattern);
  };
  let previous = { holds: [], waiters: new Map() };
  let first = true;
  let timer;
  try {
    for (;;) {
      let snapshot = await untilStopped(store.snapshot(pattern).catch((err) => err));
      if (snapshot instanceof Error) {
        // Once more, from a new connection: a server restarted between two reads is back.
        const lost = store;
        store = undefined;
        await lost.close();
        snapshot = await untilStopped(reopen().catch((err) => err));
        if (snapshot instanceof Error) throw new StoreError(`watch: the store became unreachable: ${snapshot.message}`);
      }
      if (snapshot === STOP) return 0;
      if (live) out.write(screen(snapshot, { url, pattern, intervalMs, rows: out.rows }));
      else {
        const time = new Date().toISOString();
        for (const e of changes(previous, snapshot, first)) out.write(values.json ? `${JSON.stringify({ time, ...e })}\n` : `${changeLine(time, e)}\n`);
      }
      previous = snapshot;
      first = false;
      const next = new Promise((resolve) => {
        timer = setTimeout(resolve, intervalMs);
      });
      if ((await untilStopped(next)) === STOP) return 0;
    }
  } finally {
    clearTimeout(timer);
    for (const signal of signals) process.off(signal, stop);
    if (live) {
      process.off("exit", restoreCursor);
      out.write(`${SHOW_CURSOR}\n`);
    }
    await store?.close();
  }
}

// ---------------------------------------------------------------------------------

async function main(argv, out = process.stdout, err = process.stderr) {
  const parsed = parse(argv);
  const { values } = parsed;
  const { positionals, fromEnvironment } = withStoreUrl(parsed.positionals, err);
  const [command, url, arg] = positionals;
  if (values.help || command === "help") {
    out.write(`locksmith — see, watch and free locks\n\n${USAGE}`);
    return 0;
  }
  if (values.version) {
    const { version } = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8"));
    out.write(`locksmith-js ${version}\n`);
    return 0;
  }
  if (command === undefined) throw new UsageError("a command is needed: list, inspect, watch or release", { usage: true });
  if (!COMMANDS.includes(command)) {
    const hint = isUrlArgument(command) ? ": the command comes first: locksmith list <store-url>" : didYouMean(command, COMMANDS);
    throw new UsageError(`unknown command ${JSON.stringify(command)}${hint || ": use list, inspect, watch or release"}`, { usage: true });
  }
  // A first argument that is no URL, with no LOCKSMITH_STORE_URL to stand for it.
  if (url !== undefined && !fromEnvironment && !isUrlArgument(url)) {
    throw new UsageError(`not a store URL: ${redact(url)}: give the store URL after the command, or set ${STORE_URL_VARIABLE}`, { usage: true });
  }
  // The default prefix is the store's: etcd's differs from Redis's.
  const etcd = /^etcds?:/i.test(url ?? "");
  values.prefix ??= etcd ? ETCD_KEY_PREFIX : DEFAULT_KEY_PREFIX;
  if (!etcd && /[{}]/.test(values.prefix)) throw new UsageError("--prefix must not contain { or }");
  if (!TABLE.test(values.table)) throw new UsageError("--table must be a table name (letters, digits, _), optionally schema.table");
  if (values.interval !== undefined && command !== "watch") throw new UsageError("--interval goes with watch", { usage: true });
  if (command === "list") {
    if (url === undefined || positionals.length > 3)
      throw new UsageError(`usage: locksmith list <store-url> [pattern] (or set ${STORE_URL_VARIABLE})`, { usage: true });
    const holds = sortHolds(await withStore(url, values, (store) => store.list(arg ?? "*")));
    if (values.json) for (const h of holds) out.write(`${JSON.stringify(h)}\n`);
    else out.write(holds.length === 0 ? "no locks held\n" : `${table(holds)}\n`);
    return holds.length === 0 ? 1 : 0;
  }
  if (command === "inspect") {
    if (url === undefined || arg === undefined || positionals.length > 3)
      throw new UsageError(`usage: locksmith inspect <store-url> <key> (or set ${STORE_URL_VARIABLE})`, { usage: true });
    return inspect(url, arg, values, out);
  }
  if (command === "watch") {
    if (url === undefined || positionals.length > 3)
      throw new UsageError(`usage: locksmith watch <store-url> [pattern] (or set ${STORE_URL_VARIABLE})`, { usage: true });
    const ms = values.interval === undefined ? DEFAULT_INTERVAL_MS : Number(values.interval);
    if (!Number.isInteger(ms) || ms < 10 || ms > 3_600_000)
      throw new UsageError(`--interval must be whole milliseconds from 10 to 3600000; got ${values.interval}`);
    return watch(url, arg ?? "*", { ...values, intervalMs: ms }, out);
  }
  if (command === "release") {
    if (url === undefined || arg === undefined || positionals.length > 3) {
      throw new UsageError(`usage: locksmith release <store-url> <key> --force (or set ${STORE_URL_VARIABLE})`, { usage: true });
    }
    if (!values.force) {
      throw new UsageError(`release frees ${JSON.stringify(arg)} whoever holds it; its holder will find it lost. Add --force to do it`);
    }
    const released = await withStore(url, values, (store) => store.release(arg));
    if (released.length === 0) {
      out.write(`${JSON.stringify(arg)} was not held: nothing to release\n`);
      return 1;
    }
    for (const h of released) {
      out.write(
        `released ${JSON.stringify(arg)}${h.kind === "lock" ? "" : ` (${kindText(h)})`}: it was held by ${h.owner} with ${seconds(h.remainingMs)} left` +
          `${h.fencingToken === null ? "" : ` (fencing token ${h.fencingToken})`}; its waiters were woken\n`,
      );
    }
    return 0;
  }
  throw new UsageError(`unknown command ${JSON.stringify(command)}: use list, inspect, watch or release`, { usage: true });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    const known = err instanceof UsageError || err instanceof StoreError;
    process.stderr.write(`locksmith: ${known ? err.message : `failed: ${err?.message ?? err}`}\n`);
    if (err instanceof UsageError && err.usage) process.stderr.write(`\n${USAGE}`);
    process.exitCode = 2;
  },
);
