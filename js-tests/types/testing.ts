// Type tests of locksmith-js/testing: what compiles, and (with @ts-expect-error) what must not.
import { type LockError, lock } from "locksmith-js";
import { type HeldKey, STORE_CALLS, TestClock, TestStore, withFaults } from "locksmith-js/testing";
import { IoRedisLockStore } from "locksmith-js/ioredis";

async function usage(redis: ConstructorParameters<typeof IoRedisLockStore>[0]) {
  const clock = new TestClock({ startMs: 0 });
  const store = new TestStore({ clock, operationTimeoutMs: 2_000 });
  const l = lock("job", "10s", store);
  await l.acquire({ autoExtend: true });
  await store.clock.advance("30s");
  await clock.advance(250);
  const now: number = clock.now();
  const ended: boolean = await store.endHold("job");
  const deposed: boolean = await store.endLeadership("cron");
  void deposed;
  const token: number = await store.takeKey("job", { owner: "worker-2", ttl: "1m" });
  store.failNext(2, { calls: ["acquire", "extend"] });
  store.failFor("2s");
  store.delay("20ms", { answer: () => 5, count: 3 });
  store.delay((call) => (call === "release" ? 10 : 0));
  store.loseAnswers(1, { calls: ["acquireAll"] });
  store.clearFaults();
  const held: HeldKey[] = await store.held();
  await store.assertNothingHeld().catch((err: LockError) => err.code);
  const wrapped = withFaults(new IoRedisLockStore(redis));
  wrapped.failNext();
  await wrapped.assertNothingHeld();
  await wrapped.close();
  const calls: readonly string[] = STORE_CALLS;
  // @ts-expect-error: not a store call
  store.failNext(1, { calls: ["aquire"] });
  // @ts-expect-error: a TestStore's clock is a TestClock
  new TestStore({ clock: {} });
  // @ts-expect-error: not a duration
  await clock.advance("soon");
  return { now, ended, token, held, calls };
}
void usage;
