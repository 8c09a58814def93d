// locksmith-js/cloudflare, type-checked with `tsc --noEmit`. Not run.
import { Lock, semaphore, setLockStore, type LockStore } from "locksmith-js";
import {
  DurableObjectLockStore,
  LockDurableObject,
  type DurableObjectLockStoreOptions,
  type LockDurableObjectNamespace,
} from "locksmith-js/cloudflare";

// The worker re-exports the class for its binding, or a subclass of it.
export { LockDurableObject };
export class AuditedLocks extends LockDurableObject {
  override acquire(owner: string, ttlMs: number): number | false {
    const token = super.acquire(owner, ttlMs);
    if (token !== false) this.ctx.storage.put("last-owner", owner);
    return token;
  }
}

interface Env {
  LOCKS: LockDurableObjectNamespace;
}

// The Env that `wrangler types` writes for the binding: a namespace of the class itself.
interface WranglerEnv {
  LOCKS: DurableObjectNamespace<LockDurableObject>;
  AUDITED: DurableObjectNamespace<AuditedLocks>;
}
export function fromWrangler(env: WranglerEnv): DurableObjectLockStore[] {
  return [new DurableObjectLockStore(env.LOCKS), new DurableObjectLockStore(env.AUDITED)];
}

export async function cloudflare(env: Env): Promise<void> {
  const store = new DurableObjectLockStore(env.LOCKS);
  const asStore: LockStore = store;
  setLockStore(asStore);
  const options: DurableObjectLockStoreOptions = { operationTimeoutMs: 5_000, locationHint: "weur", notifyReleases: true };
  const tuned = new DurableObjectLockStore(env.LOCKS, options);
  const [ran] = await new Lock("invoice:42", 30_000, tuned).run(async () => "charged");
  const ranIs: boolean = ran;
  const taken: boolean = await store.acquire("k", "owner", 1_000);
  const permits: number = await store.countPermits("exports", "semaphore");
  await semaphore("exports", 3, 60_000, store).run(() => 1);

  // @ts-expect-error an unknown option
  new DurableObjectLockStore(env.LOCKS, { operationTimeout: 5_000 });
  // @ts-expect-error notifyReleases is a boolean
  new DurableObjectLockStore(env.LOCKS, { notifyReleases: "yes" });
  // @ts-expect-error a namespace binding, not a string
  new DurableObjectLockStore("LOCKS");

  void [ranIs, taken, permits];
}
