// The Redis reader: what `locksmith` sees of a Redis store, one server or a Redis Cluster
// (found by CLUSTER SLOTS on the server named), whose masters it reads: `list` and
// `watch` scan each, `inspect` and `release` go to the master of the key's slot. It
// releases with the store's own Lua scripts, so the holders' waiters are woken.
import { SCRIPTS } from "../../gen/redis-scripts.mjs";
import { address, fingerprint, globEscape, globRegExp, hold, regexEscape, StoreError, storeCall, UsageError } from "../common.mjs";
import { RedisConnection } from "./redis-connection.mjs";

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
// whose turn it is are the sorted sets `…:rw:readers` and `…:rw:turn`. A fair lock's waiters
// are the sorted set `prefix{key}:queue` (owner tokens in arrival order) with their place
// leases in `prefix{key}:places` (scored by when each runs out, server ms); a fair
// semaphore's, `…:semaphore:queue` and `…:semaphore:places`. Every key of a name shares its
// `{key}` hash tag: one Cluster slot.
const HOLDERS_SUFFIX = { semaphore: ":semaphore", rw: ":rw" };
// The fair queues of a name: the kind of their waiters, and the suffix of the key they queue for.
const FAIR_QUEUES = [
  ["lock", ""],
  ["semaphore", ":semaphore"],
];
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

/**
 * The hold of the plain lock at `redisKey` (named `name`): `[]` or `[hold]`; `withValue`:
 * with the `value` its holder proclaimed (an election's leader; null for none), kept in
 * `…:value` for the hold of its owner and token (redis/src/lua/proclaim.lua, holder.lua).
 */
async function lockHolds(redis, redisKey, name, withValue = false) {
  const [owner, remaining, fence, kept] = await Promise.all([
    redis.call("GET", redisKey),
    redis.call("PTTL", redisKey),
    redis.call("GET", `${redisKey}:fence`),
    withValue ? redis.call("HMGET", `${redisKey}:value`, "owner", "token", "value") : null,
  ]);
  if (owner === null || Number(remaining) === -2) return []; // free, or expired meanwhile
  const found = hold(name, "lock", Number(remaining) >= 0 ? Number(remaining) : null, fence === null ? null : Number(fence), owner);
  if (!withValue) return [found];
  const [keptOwner, keptToken, value] = kept.map((field) => (field === null ? null : String(field)));
  const current = keptOwner === String(owner) && (keptToken === "" || keptToken === (fence === null ? "" : String(fence))) && value !== null;
  return [{ ...found, value: current ? value : null }];
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
export class RedisReader {
  #seed;
  #prefix;
  #cluster = false;
  #ranges = []; // Cluster: [{ first, last, master, replicas }], nodes as { host, port }
  #connections = new Map(); // Cluster: address → Promise<RedisConnection>

  static async open(url, { prefix }) {
    const seed = await RedisConnection.open(url);
    const store = new RedisReader(seed, prefix);
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
        const [lock, semaphore, readWrite, limit, claim, claimLeft, readers, turn, sharded, ...queues] = await Promise.all([
          lockHolds(redis, lockKey, key, true),
          permitHolds(redis, `${lockKey}:semaphore`, key, ":semaphore", now),
          permitHolds(redis, rw, key, ":rw", now),
          redis.call("GET", `${lockKey}:semaphore:limit`),
          redis.call("GET", `${rw}:claim`),
          redis.call("PTTL", `${rw}:claim`),
          liveMembers(redis, `${rw}:readers`, now),
          liveMembers(redis, `${rw}:turn`, now),
          this.#cluster ? redis.call("PUBSUB", "SHARDNUMSUB", ...channels) : [],
          ...FAIR_QUEUES.flatMap(([, suffix]) => [
            redis.call("ZRANGE", `${lockKey}${suffix}:queue`, 0, -1),
            liveMembers(redis, `${lockKey}${suffix}:places`, now),
          ]),
        ]);
        const waiting = [];
        // A fair lock's and a fair semaphore's queues (fair_acquire.lua,
        // fair_semaphore_acquire.lua), in order: the places whose lease still runs.
        FAIR_QUEUES.forEach(([kind], i) => {
          const [queue, places] = [queues[2 * i], queues[2 * i + 1]];
          const placeEnds = new Map(places.map((p) => [p.owner, p.expiresAt]));
          for (const owner of queue.map(String)) {
            const ends = placeEnds.get(owner);
            if (ends !== undefined) waiting.push({ kind, owner: fingerprint(owner), remainingMs: Math.max(0, ends - now) });
          }
        });
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
  const found = await runScript(redis, SCRIPTS.forceRelease, [lockKey, `${lockKey}:fence`, `${lockKey}:value`]);
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
          ? await runScript(
              redis,
              SCRIPTS.semaphoreRelease,
              [holdersKey, `${holdersKey}:limit`, `${holdersKey}:weights`, ...["queue", "places", "fair"].map((suffix) => `${holdersKey}:${suffix}`)],
              [holder.owner],
            )
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
