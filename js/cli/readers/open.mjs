// The reader of a store URL: every reader answers `{ list, snapshot, inspect, release, close }`.
// Each is loaded when its scheme is asked for, so a Redis URL loads no SQL and no etcd code.
import { redact, UsageError } from "../common.mjs";

/** The reader of `url`'s store, connected. */
export async function openReader(url, values) {
  // Before URL parsing: an etcd URL may name several members (host:port,host:port).
  if (/^etcds?:/i.test(url)) return (await import("./etcd.mjs")).EtcdReader.open(url, values);
  let scheme;
  try {
    scheme = new URL(url).protocol;
  } catch {
    throw new UsageError(`not a store URL: ${redact(url)}`);
  }
  if (scheme === "redis:" || scheme === "rediss:") return (await import("./redis.mjs")).RedisReader.open(url, values);
  if (scheme === "postgres:" || scheme === "postgresql:") return (await import("./postgres.mjs")).PostgresReader.open(url, values);
  if (scheme === "mysql:") return (await import("./mysql.mjs")).MySqlReader.open(url, values);
  if (scheme === "file:") return (await import("./file.mjs")).FileReader.open(url);
  throw new UsageError(`unsupported store URL scheme ${scheme}// (redis://, rediss://, postgres://, mysql://, etcd://, file://)`);
}

/** Runs `work(reader)` on the store of `url`, then closes it. */
export async function withReader(url, values, work) {
  const reader = await openReader(url, values);
  try {
    return await work(reader);
  } finally {
    await reader.close();
  }
}
