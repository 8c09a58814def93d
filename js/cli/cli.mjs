#!/usr/bin/env node
// `npx locksmith-js`: see and free the locks, semaphore permits and read-write holds in a
// Redis, PostgreSQL or etcd store.
//
//   locksmith list <store-url> [pattern] [--prefix P | --table T] [--json]
//   locksmith release <store-url> <key> --force [--prefix P | --table T]
//
// It prints a short fingerprint of each owner token, never the token itself: the token is
// a bearer secret (whoever has it can release or extend the lock).
//
// Redis needs no client package: the command speaks RESP over Node's own socket with the
// package's own pieces (the Redis engine's encoder and decoder, from the addon or the
// WebAssembly engine; the URL parsing of the store's driver; the store's Lua scripts).
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import net from "node:net";
import tls from "node:tls";
import { parseArgs } from "node:util";

import { SCRIPTS } from "../gen/redis-scripts.mjs";
import { DEFAULT_KEY_PREFIX } from "../api/defaults.mjs";
import { authCommands, parseRedisUrl } from "../redis/topology.mjs";

// etcd's default key prefix (js/stores/etcd.mjs).
const ETCD_KEY_PREFIX = "locksmith/";

const USAGE = `usage:
  locksmith list <store-url> [pattern] [options]          the held locks, semaphore permits and read-write holds
                                                          (pattern: a glob on lock names, default *)
  locksmith release <store-url> <key> --force [options]   free every hold on <key>, whoever holds it

store URLs:
  redis://[user:password@]host:port[/db], rediss://…
  postgres://user:password@host:port/database           (needs pg installed)
  etcd://[user:password@]host:port[,host:port…], etcds://… (TLS)

options:
  --prefix <p>   key prefix (Redis: default "${DEFAULT_KEY_PREFIX}"; etcd: "${ETCD_KEY_PREFIX}")
  --table <t>    PostgreSQL table (default "locksmith_locks")
  --json         list as JSON, one object per hold
  --force        required by release: it frees holds that other processes have
  -h, --help     this text
  -v, --version  the package version

exit codes: 0 done, 1 nothing matched (no holds listed, nothing to release),
            2 a usage error, or the store could not be reached or refused the request
`;

const OPTIONS = {
  prefix: { type: "string" },
  table: { type: "string", default: "locksmith_locks" },
  json: { type: "boolean", default: false },
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

const redact = (url) => url.replace(/\/\/[^/@]*@/, "//***@");
const address = (host, port) => `${host.includes(":") ? `[${host}]` : host}:${port}`;

const CONNECT_TIMEOUT_MS = 5_000;

// ---------------------------------------------------------------------------------
// Redis

/**
 * The package's RESP encoder and decoder: the native addon's, or where it does not load
 * (or LOCKSMITH_FORCE_WASM=1), the WebAssembly Redis engine's. The same functions the
 * store's driver uses for its own short exchanges.
 */
async function respCodec() {
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

  static async open(url) {
    const target = parseRedisUrl(url, (message) => new UsageError(message));
    const connection = new RedisConnection(target, await respCodec());
    try {
      await connection.#connect();
    } catch (err) {
      connection.#socket?.destroy();
      throw err;
    }
    return connection;
  }

  constructor(target, codec) {
    this.target = target;
    this.where = address(target.host, target.port);
    this.#codec = codec;
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
      // frozen process) fails the command instead of hanging it.
      this.#socket.setTimeout(CONNECT_TIMEOUT_MS, () => {
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

async function withRedis(url, work) {
  const redis = await RedisConnection.open(url);
  try {
    return await work(redis);
  } catch (err) {
    if (err instanceof StoreError || err instanceof UsageError) throw err;
    throw new StoreError(`Redis at ${redis.where}: ${err.message}`);
  } finally {
    redis.close();
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
// with `prefix{key}:fence`; a semaphore's holders are the sorted set `prefix{key}:semaphore`,
// a read-write lock's `prefix{key}:rw` (owner token scored by its expiry, server ms), the
// writer named by `prefix{key}:rw:writer`.
const HOLDERS_SUFFIX = { semaphore: ":semaphore", rw: ":rw" };
// rwlock_release.lua's KEYS after the holders, in its order (a script that reads fewer
// ignores the rest): the writer, a waiting writer's claim, the waiting readers, their turn.
const RW_COMPANIONS = ["writer", "claim", "readers", "turn"];

/** The live holders of a semaphore's or read-write lock's sorted set: `[{ owner, expiresAt }]`. */
async function permitHolders(redis, holders, now) {
  const flat = await redis.call("ZRANGEBYSCORE", holders, `(${now}`, "+inf", "WITHSCORES");
  const out = [];
  for (let i = 0; i < flat.length; i += 2) out.push({ owner: String(flat[i]), expiresAt: Number(flat[i + 1]) });
  return out;
}

async function redisList(url, pattern, { prefix }) {
  return withRedis(url, async (redis) => {
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
      found.map(async ({ redisKey, name, set }) => {
        if (set === undefined) {
          const [owner, remaining, fence] = await Promise.all([
            redis.call("GET", redisKey),
            redis.call("PTTL", redisKey),
            redis.call("GET", `${redisKey}:fence`),
          ]);
          if (owner === null || Number(remaining) === -2) return []; // expired meanwhile
          return [
            {
              key: name,
              kind: "lock",
              remainingMs: Number(remaining) >= 0 ? Number(remaining) : null,
              fencingToken: fence === null ? null : Number(fence),
              owner: fingerprint(owner),
            },
          ];
        }
        const [holders, writer] = await Promise.all([permitHolders(redis, redisKey, now), set === ":rw" ? redis.call("GET", `${redisKey}:writer`) : null]);
        const kind = (owner) => (set === ":semaphore" ? "semaphore" : owner === writer ? "write" : "read");
        // A permit's fencing token is not kept per holder in Redis (only the last one minted).
        return holders.map((h) => ({
          key: name,
          kind: kind(h.owner),
          remainingMs: Math.max(0, h.expiresAt - now),
          fencingToken: null,
          owner: fingerprint(h.owner),
        }));
      }),
    );
    return holds.flat();
  });
}

async function runScript(redis, script, keys, args = []) {
  try {
    return await redis.call("EVALSHA", script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!/NOSCRIPT/.test(err.message)) throw err;
    return redis.call("EVAL", script.source, keys.length, ...keys, ...args);
  }
}

async function redisRelease(url, key, { prefix }) {
  return withRedis(url, async (redis) => {
    const lockKey = `${prefix}{${key}}`;
    const released = [];
    const found = await runScript(redis, SCRIPTS.forceRelease, [lockKey, `${lockKey}:fence`]);
    if (found !== null) {
      const [owner, remaining, fence] = found;
      released.push({
        key,
        kind: "lock",
        remainingMs: Number(remaining) >= 0 ? Number(remaining) : null,
        fencingToken: fence === "" ? null : Number(fence),
        owner: fingerprint(owner),
      });
    }
    // Permits: each live holder given back with the store's own release script, which
    // tidies the companions and wakes the waiters as the holder's own release would.
    const now = await serverNow(redis);
    for (const [set, suffix] of Object.entries(HOLDERS_SUFFIX)) {
      const holdersKey = `${lockKey}${suffix}`;
      const writer = set === "rw" ? await redis.call("GET", `${holdersKey}:writer`) : null;
      for (const holder of await permitHolders(redis, holdersKey, now)) {
        const gone =
          set === "semaphore"
            ? await runScript(redis, SCRIPTS.semaphoreRelease, [holdersKey, `${holdersKey}:limit`], [holder.owner])
            : await runScript(redis, SCRIPTS.rwlockRelease, [holdersKey, ...RW_COMPANIONS.map((suffix) => `${holdersKey}:${suffix}`)], [holder.owner]);
        if (Number(gone) !== 1) continue; // released or expired meanwhile
        const kind = set === "semaphore" ? "semaphore" : holder.owner === writer ? "write" : "read";
        released.push({ key, kind, remainingMs: Math.max(0, holder.expiresAt - now), fencingToken: null, owner: fingerprint(holder.owner) });
      }
    }
    return released;
  });
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

async function withPostgres(url, work) {
  const pg = await optionalImport("pg", "PostgreSQL");
  if (!pg) throw new UsageError("PostgreSQL URLs need pg: npm install pg");
  const Client = pg.default?.Client ?? pg.Client;
  const parsed = new URL(url);
  const where = address(parsed.hostname.replace(/^\[(.*)\]$/, "$1") || "localhost", parsed.port || 5432);
  const client = new Client({ connectionString: url, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
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
  try {
    return await work(client);
  } catch (err) {
    if (err instanceof StoreError || err instanceof UsageError) throw err;
    throw new StoreError(`PostgreSQL at ${where}: ${err.message}`);
  } finally {
    await client.end().catch(() => {});
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

const pgHold = (r, kind) => ({
  key: r.key,
  kind,
  remainingMs: Number(r.remaining_ms),
  fencingToken: r.fencing_token === null ? null : Number(r.fencing_token),
  owner: fingerprint(r.owner),
});

async function postgresList(url, pattern, { table }) {
  return withPostgres(url, async (client) => {
    // The glob as LIKE: * → %, ? → _, and LIKE's own characters escaped.
    const like = pattern
      .replace(/[\\%_]/g, "\\$&")
      .replace(/\*/g, "%")
      .replace(/\?/g, "_");
    const locks = await client.query(
      `SELECT key, owner, fencing_token, ${REMAINING_MS} AS remaining_ms
         FROM ${quoteTable(table)}
        WHERE expires_at > clock_timestamp() AND key LIKE $1
        ORDER BY key`,
      [like],
    );
    // role: semaphore, read or write; a waiting writer's claim holds nothing.
    const permits = await client.query(
      `SELECT key, role, owner, fencing_token, ${REMAINING_MS} AS remaining_ms
         FROM ${permitsTable(table)}
        WHERE expires_at > clock_timestamp() AND role IN ('semaphore', 'read', 'write') AND key LIKE $1
        ORDER BY key, role, owner`,
      [like],
    );
    return [...locks.rows.map((r) => pgHold(r, "lock")), ...permits.rows.map((r) => pgHold(r, r.role))];
  });
}

async function postgresRelease(url, key, { table }) {
  return withPostgres(url, async (client) => {
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
         RETURNING key, kind, role, owner, fencing_token, ${REMAINING_MS} AS remaining_ms`,
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

async function withEtcd(url, prefix, work) {
  const { endpoints, hosts, username, password } = parseEtcdUrl(url);
  const { EtcdLockStore, ETCD_ADMIN_LIST, ETCD_ADMIN_RELEASE } = await import("../stores/etcd.mjs");
  const plain = (err) => String(err?.message ?? err).replace(/^locksmith: (etcd: )?/, "");
  let store;
  try {
    store = await EtcdLockStore.connect({ endpoints, keyPrefix: prefix, username, password, operationTimeoutMs: CONNECT_TIMEOUT_MS, notifyReleases: false });
  } catch (err) {
    if (err?.code === "INVALID_ARGUMENT") throw new UsageError(plain(err));
    throw new StoreError(`etcd at ${hosts}: ${plain(err)}`);
  }
  try {
    return await work({ list: (match) => store[ETCD_ADMIN_LIST](match), release: (key) => store[ETCD_ADMIN_RELEASE](key) });
  } catch (err) {
    if (err instanceof UsageError || err instanceof StoreError) throw err;
    throw new StoreError(`etcd at ${hosts}: ${plain(err)}`);
  } finally {
    await store.close();
  }
}

const etcdHold = (h) => ({ key: h.key, kind: h.kind, remainingMs: h.remainingMs, fencingToken: h.fencingToken, owner: fingerprint(h.owner) });

async function etcdList(url, pattern, { prefix }) {
  const names = globRegExp(pattern);
  return withEtcd(url, prefix, async (etcd) => (await etcd.list((name) => names.test(name))).map(etcdHold));
}

async function etcdRelease(url, key, { prefix }) {
  // One transaction deletes them all; the store's watches wake the waiters.
  return withEtcd(url, prefix, async (etcd) => (await etcd.release(key)).map(etcdHold));
}

// ---------------------------------------------------------------------------------

function storeOf(url) {
  // Before URL parsing: an etcd URL may name several members (host:port,host:port).
  if (/^etcds?:/i.test(url)) return { list: etcdList, release: etcdRelease };
  let scheme;
  try {
    scheme = new URL(url).protocol;
  } catch {
    throw new UsageError(`not a store URL: ${redact(url)}`);
  }
  if (scheme === "redis:" || scheme === "rediss:") return { list: redisList, release: redisRelease };
  if (scheme === "postgres:" || scheme === "postgresql:") return { list: postgresList, release: postgresRelease };
  throw new UsageError(`unsupported store URL scheme ${scheme}// (redis://, rediss://, postgres://, etcd://)`);
}

const seconds = (ms) => (ms === null ? "no expiry" : `${(ms / 1000).toFixed(1)} s`);

function table(holds) {
  const rows = [
    ["KEY", "KIND", "REMAINING", "FENCING TOKEN", "OWNER"],
    ...holds.map((h) => [h.key, h.kind, seconds(h.remainingMs), h.fencingToken ?? "-", h.owner]),
  ];
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

/** The command line parsed, or a UsageError that says which argument is wrong. */
function parse(argv) {
  try {
    return parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    // parseArgs's own text ("Unknown option '--x'. To specify a positional argument…")
    // is for programmers: say which flag, and show the usage.
    const flag = /'(-[^' ]*)/.exec(err.message)?.[1];
    const name = flag?.replace(/^-+/, "").split("=")[0];
    if (err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") throw new UsageError(`unknown option ${flag ?? err.message}`, { usage: true });
    if (err.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && OPTIONS[name]?.type === "string") {
      throw new UsageError(`--${name} needs a value`, { usage: true });
    }
    if (err.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && OPTIONS[name]?.type === "boolean") {
      throw new UsageError(`--${name} takes no value`, { usage: true });
    }
    throw new UsageError(err.message, { usage: true });
  }
}

const sortHolds = (holds) => holds.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.kind.localeCompare(b.kind) || a.owner.localeCompare(b.owner)));

async function main(argv, out = process.stdout) {
  const { values, positionals } = parse(argv);
  const [command, url, arg] = positionals;
  if (values.help || command === "help") {
    out.write(`locksmith — see and free locks\n\n${USAGE}`);
    return 0;
  }
  if (values.version) {
    const { version } = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8"));
    out.write(`locksmith-js ${version}\n`);
    return 0;
  }
  if (command === undefined) throw new UsageError("a command is needed: list or release", { usage: true });
  // The default prefix is the store's: etcd's differs from Redis's.
  const etcd = /^etcds?:/i.test(url ?? "");
  values.prefix ??= etcd ? ETCD_KEY_PREFIX : DEFAULT_KEY_PREFIX;
  if (!etcd && /[{}]/.test(values.prefix)) throw new UsageError("--prefix must not contain { or }");
  if (!TABLE.test(values.table)) throw new UsageError("--table must be a table name (letters, digits, _), optionally schema.table");
  if (command === "list") {
    if (url === undefined || positionals.length > 3) throw new UsageError("usage: locksmith list <store-url> [pattern]", { usage: true });
    const holds = sortHolds(await storeOf(url).list(url, arg ?? "*", values));
    if (values.json) for (const h of holds) out.write(`${JSON.stringify(h)}\n`);
    else out.write(holds.length === 0 ? "no locks held\n" : `${table(holds)}\n`);
    return holds.length === 0 ? 1 : 0;
  }
  if (command === "release") {
    if (url === undefined || arg === undefined || positionals.length > 3) {
      throw new UsageError("usage: locksmith release <store-url> <key> --force", { usage: true });
    }
    if (!values.force) {
      throw new UsageError(`release frees ${JSON.stringify(arg)} whoever holds it; its holder will find it lost. Add --force to do it`);
    }
    const released = await storeOf(url).release(url, arg, values);
    if (released.length === 0) {
      out.write(`${JSON.stringify(arg)} was not held: nothing to release\n`);
      return 1;
    }
    for (const h of released) {
      out.write(
        `released ${JSON.stringify(arg)}${h.kind === "lock" ? "" : ` (${h.kind})`}: it was held by ${h.owner} with ${seconds(h.remainingMs)} left` +
          `${h.fencingToken === null ? "" : ` (fencing token ${h.fencingToken})`}; its waiters were woken\n`,
      );
    }
    return 0;
  }
  throw new UsageError(`unknown command ${JSON.stringify(command)}: use list or release`, { usage: true });
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
