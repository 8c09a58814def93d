// Where the Redis servers are: the URL and topology options (one of `url`, `sentinels`
// with `masterName`, or `cluster`), and the Sentinel and Cluster steps that touch no
// socket (which master to trust, what `+switch-master` says, the slot map). Used by the
// driver (js/redis/driver.mjs) and the CLI, which hands in its own error maker.
import { invalid as invalidArgument, typeName } from "../api/errors.mjs";

/** `{ host, port, tls, user, password, db }` from a `redis://` or `rediss://` URL. */
export function parseRedisUrl(url, invalid = invalidArgument) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    throw invalid("invalid Redis URL: it should look like redis://[user:password@]host:port[/db]");
  }
  const secure = parsed.protocol === "rediss:";
  if (!secure && parsed.protocol !== "redis:") {
    // "localhost:6379" parses as the scheme "localhost:": say what was probably meant.
    const hostPort = /^[\w.-]+:\d+(\/\d*)?$/.test(url) ? `; for a server at ${url}, write redis://${url}` : "";
    throw invalid(`invalid Redis URL: the scheme must be redis:// or rediss://, not ${parsed.protocol}//${hostPort}`);
  }
  const path = parsed.pathname.replace(/^\/+/, "");
  const db = path === "" ? 0 : Number(path);
  if (!Number.isInteger(db) || db < 0) throw invalid("invalid Redis URL: the database after the host must be a number");
  const host = parsed.hostname.replace(/^\[(.*)\]$/, "$1");
  return {
    host: host || "127.0.0.1",
    port: parsed.port ? Number(parsed.port) : 6379,
    tls: secure,
    user: parsed.username ? decodeURIComponent(parsed.username) : null,
    password: parsed.password ? decodeURIComponent(parsed.password) : null,
    db,
  };
}

/** The option names that say where the servers are, `url` first. */
export const TOPOLOGY_KEYS = ["url", "sentinels", "masterName", "username", "password", "db", "cluster"];

/** RedisLockStore.connect()'s other options, with their types. */
export const CONNECT_OPTIONS = {
  keyPrefix: "string",
  connectTimeoutMs: "number",
  commandTimeoutMs: "number",
  reconnectRetries: "number",
  reconnectMaxDelayMs: "number",
  notifyReleases: "boolean",
  tlsCaCert: "string",
  tlsInsecure: "boolean",
  minReplicas: "number",
  fencing: "boolean",
};

/** Every key RedisLockStore.connect() takes: where the servers are, and the options. */
export const CONNECT_KEYS = ["url", ...Object.keys(CONNECT_OPTIONS), ...TOPOLOGY_KEYS.slice(1)];

/** A non-empty array of redis:// or rediss:// URLs, all of one scheme, parsed. */
function checkUrlList(name, urls, invalid = invalidArgument) {
  if (!Array.isArray(urls) || urls.length === 0 || urls.some((url) => typeof url !== "string")) {
    throw invalid(`${name} must be a non-empty array of redis:// or rediss:// URLs; got ${typeName(urls)}`);
  }
  const targets = urls.map((url) => parseRedisUrl(url, invalid));
  if (targets.some((target) => target.tls !== targets[0].tls)) {
    throw invalid(`the URLs of ${name} must all be redis:// or all rediss://`);
  }
  return targets;
}

/**
 * The topology options checked: `{ url }` for the shared checks (for Sentinel and
 * Cluster a stand-in URL that carries the data nodes' scheme and credentials) and what
 * the driver needs besides (`sentinels` and `masterName`, or `cluster`, as parsed URLs).
 */
export function checkTopology(options, invalid = invalidArgument) {
  const given = ["url", "sentinels", "cluster"].filter((name) => options[name] !== undefined);
  if (given.length !== 1) {
    throw invalid(
      given.length === 0
        ? "RedisLockStore.connect() needs one of url, sentinels or cluster"
        : `RedisLockStore.connect() takes one of url, sentinels or cluster; got ${given.join(" and ")}`,
    );
  }
  const forSentinels = ["masterName", "username", "password", "db"].filter((name) => options[name] !== undefined);
  if (options.sentinels === undefined) {
    if (forSentinels.length > 0) throw invalid(`${forSentinels[0]} goes with sentinels (the master's name and login); with ${given[0]} it is not used`);
    if (options.url !== undefined) {
      if (typeof options.url !== "string") throw invalid(`url must be a string; got ${typeName(options.url)}`);
      return { url: options.url };
    }
    const seeds = checkUrlList("cluster", options.cluster, invalid);
    if (seeds.some((seed) => seed.db !== 0)) throw invalid("a Redis Cluster has only database 0: drop the /db from the cluster URLs");
    return { url: options.cluster[0], cluster: seeds };
  }
  const sentinels = checkUrlList("sentinels", options.sentinels, invalid);
  if (typeof options.masterName !== "string" || options.masterName === "") {
    throw invalid(`masterName (the name the sentinels monitor the master by) must be a non-empty string; got ${typeName(options.masterName)}`);
  }
  for (const name of ["username", "password"]) {
    if (options[name] !== undefined && typeof options[name] !== "string") throw invalid(`${name} must be a string; got ${typeName(options[name])}`);
  }
  if (options.username !== undefined && options.password === undefined) throw invalid("username needs a password");
  if (options.db !== undefined && !(Number.isInteger(options.db) && options.db >= 0)) {
    throw invalid(`db must be a whole number >= 0; got ${options.db}`);
  }
  const login = options.password === undefined ? "" : `${encodeURIComponent(options.username ?? "")}:${encodeURIComponent(options.password)}@`;
  const url = `${sentinels[0].tls ? "rediss" : "redis"}://${login}127.0.0.1/${options.db ?? 0}`;
  return { url, sentinels, masterName: options.masterName };
}

/** `minReplicas` checked: a whole number from 0 to 1000 (0, or absent: off). */
export function checkMinReplicas(value, invalid = invalidArgument) {
  if (value === undefined) return 0;
  if (!(Number.isInteger(value) && value >= 0 && value <= 1_000)) {
    throw invalid(`minReplicas must be a whole number from 0 to 1000; got ${typeof value === "number" ? value : typeName(value)}`);
  }
  return value;
}

/** The `AUTH` command for a target's login, if it has one. */
export function authCommands(target) {
  if (target.password === null || target.password === undefined) return [];
  return [target.user ? ["AUTH", target.user, target.password] : ["AUTH", target.password]];
}

/**
 * Sentinel: asks every Sentinel at once where the master named `masterName` is
 * (`SENTINEL get-master-addr-by-name`, and `SENTINEL MASTER` for its configuration
 * epoch), and checks with `ROLE` that the server there is a master: a store never
 * writes to a replica. Right after a failover some Sentinels still name the old
 * master, which answers as a master until it is turned into a replica: the answer of
 * the newest configuration (the highest epoch) is tried first.
 *
 * `exchange(target, commands)` is the driver's short exchange (connect, log in, send
 * `commands`, resolve with their decoded replies). Resolves to `{ target, at }`: the
 * master (with `target`'s login) and the index of the Sentinel that named it.
 */
export async function locateMaster(exchange, sentinels, masterName, target) {
  const problems = [];
  const answers = await Promise.all(
    sentinels.map(async (sentinel, at) => {
      const where = `sentinel ${sentinel.host}:${sentinel.port}`;
      try {
        const [addr, info] = await exchange(sentinel, [
          ["SENTINEL", "get-master-addr-by-name", masterName],
          ["SENTINEL", "MASTER", masterName],
        ]);
        if (!Array.isArray(addr) || addr.length < 2) throw new Error("No such master");
        const epoch = Array.isArray(info) ? Number(info[info.indexOf("config-epoch") + 1]) || 0 : 0;
        return { at, where, host: addr[0], port: Number(addr[1]), epoch };
      } catch (err) {
        problems.push(/No such master/i.test(err.message) ? `${where} knows no master named ${JSON.stringify(masterName)}` : `${where}: ${err.message}`);
        return null;
      }
    }),
  );
  const named = answers.filter((a) => a !== null).sort((a, b) => b.epoch - a.epoch || a.at - b.at);
  const tried = new Set();
  for (const { at, where, host, port } of named) {
    if (tried.has(`${host}:${port}`)) continue;
    tried.add(`${host}:${port}`);
    const master = { ...target, host, port };
    let role;
    try {
      [role] = await exchange(master, [["ROLE"]]);
    } catch (err) {
      problems.push(`${host}:${port} (master per ${where}): ${err.message}`);
      continue;
    }
    if (!Array.isArray(role) || role[0] !== "master") {
      problems.push(`${host}:${port} (master per ${where}) is a ${Array.isArray(role) ? role[0] : "server of unknown role"}`);
      continue;
    }
    return { target: master, at };
  }
  throw new Error(`no master ${JSON.stringify(masterName)} found through the sentinels (${problems.join("; ")})`);
}

/**
 * Sentinel: what a message on the `+switch-master` subscription says. `null`, or the
 * new master's `{ host, port }` when it is `masterName`'s
 * (`<name> <old ip> <old port> <new ip> <new port>`).
 */
export function switchedMaster(value, masterName) {
  if (!Array.isArray(value) || value[0] !== "message" || typeof value[2] !== "string") return null;
  const [name, , , host, port] = value[2].split(" ");
  if (name !== masterName) return null;
  return { host, port: Number(port) };
}

/**
 * Cluster: reads `CLUSTER SLOTS` from the first of `candidates` that answers with a
 * slot map, through the driver's `exchange`. Resolves to `{ target, firsts, lasts,
 * addresses }` (the node that answered, and the masters' slot ranges as the engine's
 * `setSlots` takes them); rejects with STORE_UNAVAILABLE naming each node's problem.
 */
export async function readSlotMap(exchange, candidates) {
  const problems = [];
  for (const target of candidates) {
    let slots;
    try {
      [slots] = await exchange(target, [["CLUSTER", "SLOTS"]]);
    } catch (err) {
      problems.push(`${target.host}:${target.port}: ${err.message}`);
      continue;
    }
    if (!Array.isArray(slots) || slots.length === 0) {
      problems.push(`${target.host}:${target.port} serves no slots`);
      continue;
    }
    const firsts = [];
    const lasts = [];
    const addresses = [];
    for (const [first, last, master] of slots) {
      firsts.push(first);
      lasts.push(last);
      addresses.push(`${master[0] || target.host}:${master[1]}`);
    }
    return { target, firsts, lasts, addresses };
  }
  throw new Error(`STORE_UNAVAILABLE locksmith: redis: no cluster node answered CLUSTER SLOTS (${problems.join("; ")})`);
}

/** Cluster: the node at `address` (`host:port`, as the engine names it), with `base`'s scheme and login. */
export function nodeAt(address, base) {
  const at = address.lastIndexOf(":");
  return { ...base, host: address.slice(0, at).replace(/^\[(.*)\]$/, "$1"), port: Number(address.slice(at + 1)) };
}

/** The wait before reconnect attempt `n` (from 0): 50 ms doubling, at most `maxMs`. */
export function backoffMs(n, maxMs) {
  return Math.min(50 * 2 ** n, maxMs);
}
