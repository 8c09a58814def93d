#!/usr/bin/env node
// `npx locksmith-js`: see and free the locks in a Redis or PostgreSQL store.
//
//   locksmith list <store-url> [pattern] [--prefix P | --table T] [--json]
//   locksmith release <store-url> <key> --force [--prefix P | --table T]
//
// It prints a short fingerprint of each owner token, never the token itself: the token is
// a bearer secret (whoever has it can release or extend the lock).
import { createHash } from "node:crypto";
import { parseArgs } from "node:util";

import { SCRIPTS } from "./gen/redis-scripts.mjs";

const USAGE = `locksmith — see and free locks

usage:
  locksmith list <store-url> [pattern] [options]     the held locks (pattern: a glob on lock names, default *)
  locksmith release <store-url> <key> --force [options]   free one lock, whoever holds it

store URLs:
  redis://[user:password@]host:port[/db], rediss://…   (needs ioredis or redis installed)
  postgres://user:password@host:port/database           (needs pg installed)

options:
  --prefix <p>   Redis key prefix (default "locksmith:")
  --table <t>    PostgreSQL table (default "locksmith_locks")
  --json         list as JSON, one object per lock
  --force        required by release: it frees a lock that another process holds
  -h, --help     this text
`;

class UsageError extends Error {}

/** The first 8 hex digits of the owner token's SHA-256: enough to tell holders apart. */
const fingerprint = (owner) => createHash("sha256").update(String(owner)).digest("hex").slice(0, 8);

const redact = (url) => url.replace(/\/\/[^/@]*@/, "//***@");

async function optionalImport(name, forWhat) {
  try {
    return await import(name);
  } catch (err) {
    if (err?.code === "ERR_MODULE_NOT_FOUND") return undefined;
    throw new Error(`could not load ${name} for ${forWhat}: ${err.message}`);
  }
}

// ---------------------------------------------------------------------------------
// Redis

/** `call(...args)` over whichever Redis client the project has. */
async function redisConnection(url) {
  const ioredis = await optionalImport("ioredis", "Redis");
  if (ioredis) {
    const client = new ioredis.Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
    client.on("error", () => {});
    await client.connect();
    return { call: (...args) => client.call(...args.map(String)), close: () => client.quit() };
  }
  const nodeRedis = await optionalImport("redis", "Redis");
  if (nodeRedis) {
    const client = nodeRedis.createClient({ url, socket: { reconnectStrategy: false } });
    client.on("error", () => {});
    await client.connect();
    return { call: (...args) => client.sendCommand(args.map(String)), close: () => client.quit() };
  }
  throw new UsageError("Redis URLs need a Redis client: npm install ioredis (or redis)");
}

const globEscape = (s) => s.replace(/[\\*?[\]]/g, "\\$&");

async function runScript(redis, script, keys, args = []) {
  try {
    return await redis.call("EVALSHA", script.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (!/NOSCRIPT/.test(err.message)) throw err;
    return redis.call("EVAL", script.source, keys.length, ...keys, ...args);
  }
}

async function redisList(url, pattern, { prefix }) {
  const redis = await redisConnection(url);
  try {
    const match = `${globEscape(prefix)}{${pattern}}`;
    const lockKey = new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\{(.*)\\}$`, "s");
    const locks = [];
    let cursor = "0";
    do {
      const [next, keys] = await redis.call("SCAN", cursor, "MATCH", match, "COUNT", 1000);
      cursor = String(next);
      for (const key of keys) {
        const name = lockKey.exec(key)?.[1];
        if (name === undefined) continue;
        // Other things under the prefix (a semaphore's set, say) are not plain locks.
        if (String(await redis.call("TYPE", key)) !== "string") continue;
        const [owner, remaining, fence] = await Promise.all([redis.call("GET", key), redis.call("PTTL", key), redis.call("GET", `${key}:fence`)]);
        if (owner === null || Number(remaining) === -2) continue; // expired meanwhile
        locks.push({
          key: name,
          remainingMs: Number(remaining) >= 0 ? Number(remaining) : null,
          fencingToken: fence === null ? null : Number(fence),
          owner: fingerprint(owner),
        });
      }
    } while (cursor !== "0");
    return locks;
  } finally {
    await redis.close();
  }
}

async function redisRelease(url, key, { prefix }) {
  const redis = await redisConnection(url);
  try {
    const lockKey = `${prefix}{${key}}`;
    const found = await runScript(redis, SCRIPTS.forceRelease, [lockKey, `${lockKey}:fence`]);
    if (found === null) return null;
    const [owner, remaining, fence] = found;
    return { key, remainingMs: Number(remaining) >= 0 ? Number(remaining) : null, fencingToken: fence === "" ? null : Number(fence), owner: fingerprint(owner) };
  } finally {
    await redis.close();
  }
}

// ---------------------------------------------------------------------------------
// PostgreSQL

const TABLE = /^(?:[A-Za-z_][A-Za-z0-9_]*\.)?[A-Za-z_][A-Za-z0-9_]*$/;

async function postgresClient(url) {
  const pg = await optionalImport("pg", "PostgreSQL");
  if (!pg) throw new UsageError("PostgreSQL URLs need pg: npm install pg");
  const Client = pg.default?.Client ?? pg.Client;
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
  client.on("error", () => {});
  await client.connect();
  return client;
}

const quoteTable = (table) => table.split(".").map((part) => `"${part}"`).join(".");

async function postgresList(url, pattern, { table }) {
  const client = await postgresClient(url);
  try {
    // The glob as LIKE: * → %, ? → _, and LIKE's own characters escaped.
    const like = pattern.replace(/[\\%_]/g, "\\$&").replace(/\*/g, "%").replace(/\?/g, "_");
    const { rows } = await client.query(
      `SELECT key, owner, fencing_token,
              ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint AS remaining_ms
         FROM ${quoteTable(table)}
        WHERE expires_at > clock_timestamp() AND key LIKE $1
        ORDER BY key`,
      [like],
    );
    return rows.map((r) => ({
      key: r.key,
      remainingMs: Number(r.remaining_ms),
      fencingToken: r.fencing_token === null ? null : Number(r.fencing_token),
      owner: fingerprint(r.owner),
    }));
  } finally {
    await client.end();
  }
}

async function postgresRelease(url, key, { table }) {
  const client = await postgresClient(url);
  try {
    const { rows } = await client.query(
      `DELETE FROM ${quoteTable(table)} WHERE key = $1 AND expires_at > clock_timestamp()
       RETURNING owner, fencing_token, ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint AS remaining_ms`,
      [key],
    );
    if (rows.length === 0) return null;
    // Waiters listen on the channel named like the table (without its schema).
    await client.query("SELECT pg_notify($1, $2)", [table.split(".").pop(), `lock:${key}`]);
    const [r] = rows;
    return { key, remainingMs: Number(r.remaining_ms), fencingToken: r.fencing_token === null ? null : Number(r.fencing_token), owner: fingerprint(r.owner) };
  } finally {
    await client.end();
  }
}

// ---------------------------------------------------------------------------------

function storeOf(url) {
  let scheme;
  try {
    scheme = new URL(url).protocol;
  } catch {
    throw new UsageError(`not a store URL: ${redact(url)}`);
  }
  if (scheme === "redis:" || scheme === "rediss:") return { list: redisList, release: redisRelease };
  if (scheme === "postgres:" || scheme === "postgresql:") return { list: postgresList, release: postgresRelease };
  throw new UsageError(`unsupported store URL scheme ${scheme}// (redis://, rediss://, postgres://)`);
}

const seconds = (ms) => (ms === null ? "no expiry" : `${(ms / 1000).toFixed(1)} s`);

function table(locks) {
  const rows = [["KEY", "REMAINING", "FENCING TOKEN", "OWNER"], ...locks.map((l) => [l.key, seconds(l.remainingMs), l.fencingToken ?? "-", l.owner])];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  return rows.map((r) => r.map((c, i) => String(c).padEnd(widths[i])).join("  ").trimEnd()).join("\n");
}

async function main(argv, out = process.stdout) {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: {
        prefix: { type: "string", default: "locksmith:" },
        table: { type: "string", default: "locksmith_locks" },
        json: { type: "boolean", default: false },
        force: { type: "boolean", default: false },
        help: { type: "boolean", short: "h", default: false },
      },
    });
  } catch (err) {
    throw new UsageError(err.message);
  }
  const { values, positionals } = parsed;
  const [command, url, arg] = positionals;
  if (values.help || command === undefined || command === "help") {
    out.write(USAGE);
    return 0;
  }
  if (/[{}]/.test(values.prefix)) throw new UsageError("--prefix must not contain { or }");
  if (!TABLE.test(values.table)) throw new UsageError("--table must be a table name (letters, digits, _), optionally schema.table");
  if (command === "list") {
    if (url === undefined || positionals.length > 3) throw new UsageError("usage: locksmith list <store-url> [pattern]");
    const locks = await storeOf(url).list(url, arg ?? "*", values);
    if (values.json) for (const l of locks) out.write(`${JSON.stringify(l)}\n`);
    else out.write(locks.length === 0 ? "no locks held\n" : `${table(locks)}\n`);
    return 0;
  }
  if (command === "release") {
    if (url === undefined || arg === undefined || positionals.length > 3) throw new UsageError("usage: locksmith release <store-url> <key> --force");
    if (!values.force) {
      throw new UsageError(`release frees ${JSON.stringify(arg)} whoever holds it; its holder will find it lost. Add --force to do it`);
    }
    const released = await storeOf(url).release(url, arg, values);
    if (released === null) {
      out.write(`${JSON.stringify(arg)} was not held: nothing to release\n`);
      return 1;
    }
    out.write(
      `released ${JSON.stringify(arg)}: it was held by ${released.owner} with ${seconds(released.remainingMs)} left` +
        `${released.fencingToken === null ? "" : ` (fencing token ${released.fencingToken})`}; its waiters were woken\n`,
    );
    return 0;
  }
  throw new UsageError(`unknown command ${JSON.stringify(command)}: use list or release`);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    process.stderr.write(`locksmith: ${err instanceof UsageError ? err.message : `failed: ${err.message}`}\n`);
    process.exitCode = err instanceof UsageError ? 2 : 1;
  },
);
