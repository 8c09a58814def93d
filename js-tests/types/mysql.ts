// The documented signatures of locksmith-js/mysql, type-checked with `tsc --noEmit`. Not run.
import { Lock, setLockStore, type LockStore } from "locksmith-js";
import { MySqlLockStore, type MySqlLockStoreOptions, type MySqlPool } from "locksmith-js/mysql";

declare const pool: MySqlPool;

export async function mysql(): Promise<void> {
  const options: MySqlLockStoreOptions = { table: "app.locks", operationTimeoutMs: 2_000, createTable: true };
  const store: MySqlLockStore = await MySqlLockStore.connect("mysql://app:secret@db.internal:3306/app", options);
  const overPool = await MySqlLockStore.connect(pool);
  const own = new MySqlLockStore(pool, { table: "locks" });
  const asStore: LockStore = setLockStore(store);
  const held: boolean = await new Lock("k", 1_000, own).acquire();
  const taken: boolean = await store.acquire("k", "owner", 1_000);
  const weighted: boolean = await store.acquirePermit("k", "owner", 1_000, "semaphore", 3, 2);
  const count: number = await store.countPermits("k", "semaphore");
  const weights: true = store.permitWeights;
  const table: string = overPool.table;
  await store.close();
  // @ts-expect-error unknown option
  await MySqlLockStore.connect("mysql://x", { tabel: "locks" });
  // @ts-expect-error no LISTEN in MySQL
  await MySqlLockStore.connect("mysql://x", { listen: true });
  void [asStore, held, taken, weighted, count, weights, table];
}
