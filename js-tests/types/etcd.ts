// The documented signatures of locksmith-js/etcd, type-checked with `tsc --noEmit`. Not run.
import { Lock, lock, readWriteLock, semaphore, setLockStore, type LockStore } from "locksmith-js";
import { EtcdLockStore, type EtcdLockStoreOptions } from "locksmith-js/etcd";

export async function etcd(): Promise<void> {
  const one: EtcdLockStore = await EtcdLockStore.connect("http://etcd-1:2379");
  const many = await EtcdLockStore.connect(["http://etcd-1:2379", "http://etcd-2:2379"]);
  const options: EtcdLockStoreOptions = {
    endpoints: ["https://etcd-1:2379"],
    keyPrefix: "billing/locks/",
    username: "app",
    password: "secret",
    operationTimeoutMs: 2_000,
    notifyReleases: true,
    fetch: (url, init) => fetch(url, init),
  };
  const store = await EtcdLockStore.connect(options);
  const asStore: LockStore = setLockStore(store);
  const held: boolean = await new Lock("k", "30s", store).acquire();
  const taken: boolean = await store.acquire("k", "owner", 1_000);
  const left: number | null = await store.ownerRemainingTime("k", "owner");
  const key: string = store.lockKey("k") + store.permitPrefix("k", "read") + store.keyPrefix;
  await semaphore("exports", 3, "1m", store).run(async () => {});
  const queue: string = store.fairQueuePrefix("k", "semaphore");
  const fairToken: number | false = await store.acquireFair("k", "owner", 1_000, "lock", undefined, 1, true);
  await lock("report", "30s", store, { fair: true }).run(async () => {});
  // @ts-expect-error read-write locks are phase-fair; their queues are not fair queues
  store.fairQueuePrefix("k", "read");
  await readWriteLock("doc", "10s", store).writeLock().run(async () => {});
  const stop = store.onRelease?.("k", () => {});
  stop?.();
  await one.close();
  await many.close();
  // @ts-expect-error unknown option
  await EtcdLockStore.connect({ endpoints: "http://x", prefix: "x/" });
  // Options after the URLs.
  await (await EtcdLockStore.connect(["http://etcd-1:2379"], { keyPrefix: "billing/" })).close();
  // @ts-expect-error the endpoints are the first argument
  await EtcdLockStore.connect("http://x", { endpoints: "http://y" });
  // @ts-expect-error the constructor is not public: connect() makes a store
  new EtcdLockStore({});
  void [asStore, held, taken, left, key];
}
