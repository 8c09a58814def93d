// Durations in the public types, type-checked with `tsc --noEmit`. Not run.
import { Lock, lock, lockAll, readWriteLock, semaphore, type AcquireOptions, type Duration } from "locksmith-js";

export async function durations(): Promise<void> {
  const ttl: Duration = "30s";
  const ms: number = lock("k", ttl).ttlMs;
  lock("k", "250ms");
  lock("k", "1.5s");
  lock("k", 30_000);
  new Lock("k", "5m");
  semaphore("k", 3, "1h");
  const rw = readWriteLock("k", "10s");
  const rwMs: number = rw.ttlMs;
  const options: AcquireOptions = { timeout: "5s", retryDelay: "100ms", autoExtend: { intervalMs: "10s", maxHoldMs: "1h" } };
  const l = lock("k", "30s");
  await l.acquire(options);
  await l.run(() => 1, { timeout: 2_000 });
  await l.extend("1m");

  // @ts-expect-error a duration needs a unit
  lock("k", "30");
  // @ts-expect-error an unknown unit
  lock("k", "30sec");
  // @ts-expect-error days are not a unit
  await l.acquire({ timeout: "1d" });
  // @ts-expect-error not a duration
  await l.extend(true);

  // As strict as the parser: digits, an optional fraction, then the unit.
  lock("k", ".5s");
  lock("k", "0.25h");
  lock("k", "1500ms");
  const fromConfig: Duration = "30s" as Duration;
  lock("k", fromConfig);
  // @ts-expect-error a space before the unit
  lock("k", "5 s");
  // @ts-expect-error an exponent
  lock("k", "1e3ms");
  // @ts-expect-error a sign
  lock("k", "-5s");
  // A constructor takes no type parameters, so `new Lock()` and `new MultiLock()` take any
  // `Duration` and leave such a string to the run-time check (lock() is checked here).
  void (() => new Lock("k", " 30s"));
  // @ts-expect-error hexadecimal
  semaphore("k", 2, "0x10s");
  // @ts-expect-error a sign
  readWriteLock("k", "+5m");
  // @ts-expect-error two points
  lockAll(["a"], "1.5.5s");
  // @ts-expect-error an exponent
  await l.extend("2e1s");
  // @ts-expect-error a sign
  await l.acquire({ timeout: "-5s" });
  // @ts-expect-error a space
  await l.run(() => 1, { retryDelay: "100 ms" });
  // @ts-expect-error an exponent
  await l.acquire({ autoExtend: { intervalMs: "1e4ms" } });
  await l.acquire({ timeout: "5s", retryDelay: ".1s", autoExtend: { intervalMs: "10s", maxHoldMs: "2.5h" } });
  await l.acquire({ timeout: Infinity, signal: AbortSignal.timeout(1_000) });
  void [ms, rwMs];
}

export async function durationsFromValues(ttl: Duration, options: AcquireOptions | undefined, l = lock("k")): Promise<void> {
  // Values typed Duration / AcquireOptions (from configuration) pass as they are.
  lock("k", ttl);
  semaphore("k", 2, ttl);
  readWriteLock("k", ttl);
  lockAll(["a"], ttl);
  await l.extend(ttl);
  await l.acquire(options);
  await l.run(() => 1, options);
  await l.acquire({ timeout: ttl, retryDelay: ttl });
  const api = await import("locksmith-js");
  api.lock("k", "30s");
  // @ts-expect-error through a namespace too
  api.lock("k", "5 s");
}
