// The documented usage, block by block, run against the real build. Each test is one
// example from the API documentation, with the package name and the app's functions
// (charge, rebuild, process) filled in.
import assert from "node:assert/strict";
import { describe, it, beforeEach } from "node:test";

import { ls, sleep } from "./target.mjs";

const { lock, restoreLock, setLockStore, MemoryLockStore, LockNotHeldError } = ls;

describe("documented examples", () => {
  // "Testing": give each test a clean store so keys can't leak between them.
  beforeEach(() => setLockStore(new MemoryLockStore()));

  it("run(): only one of you charges the invoice", async () => {
    const charges = [];
    const invoice = { id: 42 };
    const charge = async (inv) => {
      charges.push(inv.id);
      await sleep(20);
    };
    async function handle() {
      const [ran] = await lock("invoice:42").run(async () => {
        await charge(invoice);
      });
      if (!ran) return "skipped"; // another worker is already charging it
      return "charged";
    }
    const outcomes = await Promise.all([handle(), handle(), handle()]);
    assert.deepEqual(outcomes.sort(), ["charged", "skipped", "skipped"]);
    assert.deepEqual(charges, [42]);
  });

  it("run() returns [ran, result]", async () => {
    const charge = async (inv) => `receipt for ${inv}`;
    const invoice = 42;
    const [ran, result] = await lock("invoice:42").run(() => charge(invoice));
    assert.deepEqual([ran, result], [true, "receipt for 42"]);
  });

  it("run() with a timeout waits for the lock", async () => {
    const holder = lock("report");
    await holder.acquire();
    setTimeout(() => holder.release(), 150);
    const rebuild = () => "rebuilt";
    // Wait up to 5 seconds for the lock, checking every 100ms.
    const [ran, result] = await lock("report").run(() => rebuild(), {
      timeout: 5_000,
      retryDelay: 100,
    });
    assert.deepEqual([ran, result], [true, "rebuilt"]);
    assert.deepEqual(await lock("report").runImmediately(() => 1), [true, 1]);
  });

  it("TTLs: 30 seconds by default, or as given", () => {
    assert.equal(lock("invoice:42").ttlMs, 30_000); // held for 30s once acquired
    assert.equal(lock("nightly-report", 300_000).ttlMs, 300_000); // 5 minutes
  });

  it("extend() from inside run() when the work outruns the TTL", async () => {
    const batches = [1, 2, 3, 4];
    const processed = [];
    const l = lock("import", 120);
    const [ran] = await l.run(async () => {
      for (const batch of batches) {
        await sleep(50); // process(batch): four of these outrun the 120 ms TTL
        processed.push(batch);
        await l.extend(); // push the expiry out another 120 ms
      }
    });
    assert.equal(ran, true);
    assert.deepEqual(processed, batches);
  });

  it("extend() throws LockNotHeldError once the lock is lost", async () => {
    const l = lock("import", 50);
    await l.acquire();
    await sleep(100);
    await assert.rejects(l.extend(), LockNotHeldError);
  });

  it("ownership: a late release does not delete the next holder's lock", async () => {
    const a = lock("job", 60); // 1. A takes the lock with a short TTL
    await a.acquire();
    await sleep(120); // 2. A's work outlives the TTL; the lock expires
    const b = lock("job");
    assert.equal(await b.acquire(), true); // 3. B takes the now-free lock
    assert.equal(await a.release(), false); // 4. A's release is a no-op
    assert.equal(await lock("job").acquire(), false, "a third process cannot walk in");
    await b.release();
  });

  it("manual acquisition with try/finally", async () => {
    let charged = false;
    const charge = async () => {
      charged = true;
    };
    async function handle() {
      const l = lock("invoice:42");
      if (!(await l.acquire({ timeout: 2_000 }))) return;
      try {
        await charge();
      } finally {
        await l.release(); // without this, the lock leaks for the rest of its TTL
      }
    }
    await handle();
    assert.equal(charged, true);
    assert.equal(await lock("invoice:42").isLocked(), false);
  });

  it("handing a lock to another worker with serialize()/restoreLock()", async () => {
    const queue = [];
    // worker A
    {
      const l = lock("import:99", 60_000);
      await l.acquire();
      queue.push({ job: "FinishImport", lock: l.serialize() });
    }
    // worker B, later
    {
      const serialized = queue.shift().lock;
      const l = restoreLock(serialized);
      await l.extend(60_000);
      // ...finish the work...
      assert.equal(await l.release(), true);
    }
    assert.equal(await lock("import:99").isLocked(), false);
  });

  it("inspecting a lock", async () => {
    const l = lock("inspect", 1_000);
    await l.acquire();
    assert.equal(await l.isLocked(), true); // does anyone hold this key? (not necessarily you)
    assert.equal(await l.isExpired(), false); // did we hold it and lose it?
    const left = await l.getRemainingTime(); // ms until expiry, or null if unheld
    assert.ok(left > 0 && left <= 1_000);
    await l.release();
    assert.equal(await l.getRemainingTime(), null);
  });

  it("testing: a test that forgets to release…", async () => {
    assert.equal(await lock("left-held", 60_000).acquire(), true);
    assert.equal(await lock("left-held").isLocked(), true);
  });

  it("testing: …leaves nothing held for the next test, which gets a clean MemoryLockStore", async () => {
    // The beforeEach above set a fresh store: the previous test's hold is not in it.
    assert.equal(await lock("left-held").isLocked(), false);
    assert.equal(await lock("left-held").acquire(), true);
  });
});
