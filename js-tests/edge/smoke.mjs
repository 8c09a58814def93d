// The same few steps in every runtime: take a lock, refuse a second holder, hand it
// over with serialize/restoreLock, release, and see typed errors. Returns a report.
export async function smoke(ls) {
  const report = {};
  const store = new ls.MemoryLockStore();
  const a = new ls.Lock("smoke:invoice", 5_000, store);
  report.acquired = await a.acquire();
  report.secondRefused = !(await new ls.Lock("smoke:invoice", 5_000, store).acquire());
  report.tokenIsNumber = typeof a.fencingToken === "number";
  const b = ls.restoreLock(a.serialize(), store);
  report.releasedByCopy = await b.release();
  report.freeAfter = !(await a.isLocked());
  const [ran, result] = await new ls.Lock("smoke:run", 1_000, store).run(async () => 42, { timeout: 100 });
  report.run = [ran, result];
  try {
    await a.extend();
  } catch (err) {
    report.error = { isLockError: err instanceof ls.LockError, name: err.name, code: err.code };
  }
  try {
    ls.lock("");
  } catch (err) {
    report.invalid = err.code;
  }
  return report;
}

export const EXPECTED = {
  acquired: true,
  secondRefused: true,
  tokenIsNumber: true,
  releasedByCopy: true,
  freeAfter: true,
  run: [true, 42],
  error: { isLockError: true, name: "LockNotHeldError", code: "LOCK_NOT_HELD" },
  invalid: "INVALID_ARGUMENT",
};
