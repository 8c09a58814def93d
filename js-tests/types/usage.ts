// Every documented signature, type-checked with `tsc --noEmit`. Not run.
import {
  lock,
  Lock,
  restoreLock,
  setLockStore,
  getLockStore,
  MemoryLockStore,
  FileLockStore,
  type FileLockStoreOptions,
  RedisLockStore,
  LockError,
  LockNotHeldError,
  type LockStore,
  type PermitKind,
  type AcquireOptions,
  type LockErrorCode,
  semaphore,
  readWriteLock,
  type ReadWriteLock,
  UnsupportedError,
  AbortError,
  type ImmediateOptions,
  type Semaphore,
  type SemaphoreAcquireOptions,
  type LockTraceContext,
  type LockLostMessage,
  lockAll,
  MultiLock,
  election,
  type LeaderInfo,
  type LeaderValue,
  Election,
  Leadership,
  type ElectionOptions,
  type SerializedMultiLock,
} from "locksmith-js";

declare function charge(id: number): Promise<string>;

export async function usage(): Promise<void> {
  const [ran, result] = await lock("invoice:42").run(async () => charge(42));
  const ranIs: boolean = ran;
  const resultIs: string | undefined = result;

  const options: AcquireOptions = { timeout: 5_000, retryDelay: 100 };
  await lock("report").run(() => 1, options);
  const [, n] = await lock("report").runImmediately((l: Lock) => l.key.length);
  const nIs: number | undefined = n;

  const l: Lock = lock("nightly-report", 300_000);
  const acquired: boolean = await l.acquire({ timeout: 2_000 });
  await l.acquire({ autoExtend: true });
  await l.run(async (held) => {
    const signal: AbortSignal = held.signal;
    return signal.aborted;
  }, { timeout: 100, autoExtend: { intervalMs: 10_000, maxHoldMs: 600_000 } });
  {
    await using disposable = lock("disposed");
    await disposable.acquire();
  }
  const dispose: () => Promise<void> = l[Symbol.asyncDispose];
  const permits: Lock = semaphore("pool", 3, 10_000);
  const fairLock: boolean = lock("queue", "30s", undefined, { fair: true }).fair;
  const fairPermits: Semaphore = semaphore("pool", 3, 10_000, undefined, { fair: true });
  await new Lock("queue", 1_000, undefined, { fair: fairLock }).acquire({ timeout: 100 });
  await fairPermits.acquire({ permits: 2 });
  // @ts-expect-error fair is a boolean
  lock("queue", "30s", undefined, { fair: "yes" });
  // @ts-expect-error acquire options go to acquire() or run()
  lock("queue", "30s", undefined, { timeout: 5 });
  const held: number = await permits.count();
  const rw: ReadWriteLock = readWriteLock("doc");
  await rw.readLock().run(() => held, { timeout: 1_000 });
  await rw.writeLock().acquire();
  const now: boolean = await l.acquireImmediately();
  const released: boolean = await l.release();
  const extended: void = await l.extend();
  await l.extend(60_000);
  const locked: boolean = await l.isLocked();
  const expired: boolean = await l.isExpired();
  const left: number | null = await l.getRemainingTime();
  const text: string = l.serialize();
  const restored: Lock = restoreLock(text);
  const token: number | null = restored.fencingToken;
  const key: string = restored.key;
  const ttl: number = restored.ttlMs;

  const memory = new MemoryLockStore();
  const same: MemoryLockStore = setLockStore(memory);
  const current: LockStore = getLockStore();
  const shared: MemoryLockStore = MemoryLockStore.shared("jobs");
  const explicit = new Lock("k", 1_000, shared);

  const fileOptions: FileLockStoreOptions = { busyTimeoutMs: 500 };
  const file: FileLockStore = await FileLockStore.open("/var/lock/app.locks", fileOptions);
  const filePath: string = file.path;
  const onFile = semaphore("jobs", 4, "30s", file);
  await onFile.acquire({ permits: 2 });
  await file.close();
  // @ts-expect-error a FileLockStore comes from open()
  new FileLockStore();
  // @ts-expect-error busyTimeoutMs is a number of milliseconds
  await FileLockStore.open("/tmp/x", { busyTimeoutMs: "1s" });

  const redis: RedisLockStore = await RedisLockStore.connect({ url: "redis://localhost:6379", keyPrefix: "app:" });
  setLockStore(redis);
  const prefix: string = redis.keyPrefix;
  await redis.close();
  const sentinel = await RedisLockStore.connect({ sentinels: ["redis://s1:26379"], masterName: "locks", password: "pw", db: 1, minReplicas: 1 });
  const cluster = await RedisLockStore.connect({ cluster: ["redis://n1:6379", "redis://n2:6379"], commandTimeoutMs: 1_000 });
  await Promise.all([sentinel.close(), cluster.close()]);
  // Options after a URL; the URL once, and no topology beside it.
  const unfenced: RedisLockStore = await RedisLockStore.connect("redis://localhost:6379", { fencing: false, keyPrefix: "app:" });
  await unfenced.close();
  // @ts-expect-error the URL is the first argument
  await RedisLockStore.connect("redis://localhost:6379", { url: "redis://other:6379" });
  // @ts-expect-error options after an options object
  await RedisLockStore.connect({ url: "redis://localhost:6379" }, { fencing: false });
  void prefix;

  const custom: LockStore = {
    acquire: async (_k: string, _o: string, _t: number) => true,
    release: async () => true,
    extend: async () => false,
    isLocked: async () => false,
    remainingTime: async () => null,
  };
  setLockStore(custom);

  // A store with fencing tokens and release wake-ups.
  const listeners = new Set<() => void>();
  const fenced: LockStore = {
    acquire: async () => 42,
    release: async () => {
      for (const wake of listeners) wake();
      return true;
    },
    extend: async () => true,
    isLocked: async () => false,
    remainingTime: async () => null,
    onRelease: (_key: string, listener: () => void, kind?: PermitKind) => {
      const kindName: string | undefined = kind;
      void kindName;
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  setLockStore(fenced);

  try {
    await explicit.extend();
  } catch (err) {
    if (err instanceof LockNotHeldError) {
      const code: "LOCK_NOT_HELD" = err.code;
      const k: string = err.key;
      void [code, k];
    } else if (err instanceof LockError) {
      const code: LockErrorCode = err.code;
      void code;
    }
  }

  // @ts-expect-error ttlMs is milliseconds or a string with a unit ("30s")
  lock("k", "thirty");
  // @ts-expect-error a store needs all five methods
  setLockStore({ acquire: async () => true });

  void [ranIs, resultIs, nIs, acquired, now, released, extended, locked, expired, left, token, key, ttl, same, current];
}

import { IoRedisLockStore } from "locksmith-js/ioredis";
import { NodeRedisLockStore } from "locksmith-js/node-redis";
import { UpstashLockStore } from "locksmith-js/upstash";

export async function clientStores(ioredis: object, nodeRedis: object, upstash: object): Promise<void> {
  const a: LockStore = new IoRedisLockStore(ioredis, { keyPrefix: "app:", notifyReleases: true });
  const b = new NodeRedisLockStore(nodeRedis);
  const c = new UpstashLockStore(upstash, { operationTimeoutMs: 5_000 });
  const taken: boolean = await b.acquire("k", "owner", 1_000);
  const key: string = c.lockKey("k");
  void [a, taken, key];
  await Promise.all([b.close(), c.close()]);
}

// The diagnostics channels' messages.
{
  const onAcquireEnd = (context: LockTraceContext) => {
    const attempts: number | undefined = context.attempts;
    const token: number | null | undefined = context.fencingToken;
    const fair: boolean = context.fair;
    const held: Lock = context.lock;
    void [attempts, token, held, fair, context.outcome === "timeout"];
    // @ts-expect-error outcomes are a closed set
    void (context.outcome === "granted");
  };
  const onLost = (lost: LockLostMessage) => {
    const code: LockErrorCode = lost.reason;
    void code;
  };
  void [onAcquireEnd, onLost];
}

// An acquire's signal.
async function aborting(l: Lock) {
  const taken: boolean = await l.acquire({ timeout: "5s", signal: AbortSignal.timeout(1_000) });
  const now: boolean = await l.acquireImmediately({ signal: new AbortController().signal });
  const options: ImmediateOptions = { signal: AbortSignal.abort() };
  await l.runImmediately(async () => 1, options);
  // @ts-expect-error the immediate variants take no timeout
  await l.acquireImmediately({ timeout: 5 });
  try {
    await l.acquire({ signal: AbortSignal.abort() });
  } catch (err) {
    if (err instanceof AbortError) {
      const code: "ABORTED" = err.code;
      const name: "AbortError" = err.name;
      void [code, name];
    }
  }
  void [taken, now];
}
void aborting;

// Weighted permits: a semaphore's option, refused on other kinds in types too.
async function weighted() {
  const s: Semaphore = semaphore("exports", 5);
  const options: SemaphoreAcquireOptions = { timeout: "5s", permits: 3 };
  const taken: boolean = await s.acquire(options);
  await s.acquireImmediately({ permits: 2 });
  await s.run(async () => 1, { permits: 2, signal: AbortSignal.timeout(1_000) });
  await s.runImmediately(async () => 1, { permits: 5 });
  const inUse: number = await s.count();
  // @ts-expect-error permits is a semaphore's option
  await lock("k").acquire({ permits: 2 });
  // @ts-expect-error permits is a semaphore's option
  await readWriteLock("k").writeLock().acquireImmediately({ permits: 2 });
  const weights: true = new MemoryLockStore().permitWeights;
  void [taken, inUse, weights];
}
void weighted;

// Several keys at once: a MultiLock is a Lock with keys and per-key fencing tokens, and
// its serialized form restores as a MultiLock.
async function multi() {
  const both: MultiLock = lockAll(["account:1", "account:2"], "10s");
  const asLock: Lock = both;
  const keys: readonly string[] = both.keys;
  const tokens: Readonly<Record<string, number | null>> | null = both.fencingTokens;
  const [ran, moved] = await both.run(async (held) => held.keys.length, { timeout: "2s", signal: AbortSignal.timeout(5_000) });
  if (ran) {
    const n: number = moved;
    void n;
  }
  await both.acquire({ autoExtend: true });
  const text: SerializedMultiLock = both.serialize();
  const back: MultiLock = restoreLock(text);
  const plain: Lock = restoreLock(lock("k").serialize());
  // A string of unknown origin (JSON.parse gives any) restores as a Lock, which a MultiLock is.
  const unknown = restoreLock(JSON.parse('"{}"'));
  const unknownToken: number | null = unknown.fencingToken;
  // @ts-expect-error keys is a MultiLock's, and this may be a plain Lock
  void unknown.keys;
  const fromString = restoreLock(String(text));
  // @ts-expect-error the same for a plain string
  void fromString.keys;
  void unknownToken;
  const left: number | null = await back.getRemainingTime();
  const direct = new MultiLock(["a", "b"], 1_000, new MemoryLockStore());
  // @ts-expect-error keys is an array
  lockAll("a,b");
  // @ts-expect-error a MultiLock has no single fencing token
  const one: number = both.fencingToken;
  await using held = lockAll(["x", "y"]);
  void [asLock, keys, tokens, plain, left, direct, one, held];
}
void multi;

async function elections() {
  const options: ElectionOptions = { ttl: "10s", retryDelay: 100, store: new MemoryLockStore() };
  const e: Election = election("cron", options);
  const name: string = e.name;
  const leadership: Leadership = await e.campaign({ signal: AbortSignal.timeout(1_000) });
  const term: number = leadership.term;
  const lost: AbortSignal = leadership.signal;
  const leads: boolean = leadership.isLeader;
  const resigned: boolean = await leadership.resign();
  await e.run(async (signal, { term }) => {
    if (!signal.aborted) void term;
  });
  await e.run(() => {}, { signal: new AbortController().signal });
  {
    await using held = await e.campaign();
    void held;
  }
  // @ts-expect-error the ttl is a duration
  election("x", { ttl: "soon" });
  // @ts-expect-error an election takes its options as an object
  election("x", "10s");
  // @ts-expect-error campaign has no timeout: abort it with a signal
  await e.campaign({ timeout: 5 });
  // @ts-expect-error a Leadership comes from campaign()
  new Leadership();
  // A value proclaimed, read back, changed; the leader as it changes.
  const serving = await e.campaign({ value: { host: "a.internal", port: 8080 } });
  const value: LeaderValue = serving.value;
  await serving.proclaim({ host: "b.internal", port: 8080 });
  const now: LeaderInfo | null = await e.leader();
  const since: Date | null = now?.since ?? null;
  for await (const leader of e.observe({ signal: AbortSignal.timeout(1_000), interval: "1s" })) {
    if (leader !== null) void [leader.term, leader.value];
    break;
  }
  await e.run(() => {}, { value: "worker-1" });
  // @ts-expect-error a value is JSON: no functions
  await e.campaign({ value: () => {} });
  // @ts-expect-error observe() takes a signal and an interval
  e.observe({ timeout: 5 });
  void [name, term, lost, leads, resigned, value, since];
}
void elections;
