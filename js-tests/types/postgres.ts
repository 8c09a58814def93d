// The documented signatures of locksmith-js/postgres, type-checked with `tsc --noEmit`. Not run.
import { Lock, setLockStore, type LockStore } from "locksmith-js";
import { PostgresLockStore, type PostgresLockStoreOptions, type PostgresPool } from "locksmith-js/postgres";

declare const pool: PostgresPool;

export async function postgres(): Promise<void> {
  const options: PostgresLockStoreOptions = { table: "app.locks", operationTimeoutMs: 2_000, listen: true, createTable: true };
  const store: PostgresLockStore = await PostgresLockStore.connect("postgres://app@db.internal/app", options);
  const configured = await PostgresLockStore.connect({ host: "db.internal", user: "app", database: "app", max: 5 });
  const own = new PostgresLockStore(pool, { table: "locks" });
  const asStore: LockStore = setLockStore(store);
  const held: boolean = await new Lock("k", 1_000, own).acquire();
  const taken: boolean = await store.acquire("k", "owner", 1_000);
  const table: string = configured.table;
  const stop: () => void = store.onRelease("k", () => {});
  stop();
  await store.close();
  // @ts-expect-error unknown option
  await PostgresLockStore.connect("postgres://x", { tabel: "locks" });
  void [asStore, held, taken, table];
}
