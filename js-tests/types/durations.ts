// Durations in the public types, type-checked with `tsc --noEmit`. Not run.
import { Lock, lock, readWriteLock, semaphore, type AcquireOptions, type Duration } from "locksmith-js";

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
  void [ms, rwMs];
}
