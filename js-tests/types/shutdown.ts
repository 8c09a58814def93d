// close() on every store, type-checked with `tsc --noEmit`. Not run.
import {
  AbortError,
  type CloseOptions,
  FileLockStore,
  lock,
  RedisLockStore,
  StoreClosedError,
  StoreUnavailableError,
} from "locksmith-js";
import { EtcdLockStore } from "locksmith-js/etcd";
import { IoRedisLockStore } from "locksmith-js/ioredis";
import { MySqlLockStore } from "locksmith-js/mysql";
import { PostgresLockStore } from "locksmith-js/postgres";

declare const redis: RedisLockStore;
declare const file: FileLockStore;
declare const postgres: PostgresLockStore;
declare const mysql: MySqlLockStore;
declare const etcd: EtcdLockStore;
declare const ioredis: IoRedisLockStore;

export async function shutdown(): Promise<void> {
  const options: CloseOptions = { keepHolds: false, timeoutMs: 5_000 };
  await redis.close(options);
  await file.close();
  await postgres.close({ timeoutMs: 1_000 });
  await mysql.close({ keepHolds: true });
  await etcd.close();
  await ioredis.close({ timeoutMs: 500 });
  // @ts-expect-error unknown option
  await redis.close({ keepHold: true });
  // @ts-expect-error keepHolds is true or false
  await postgres.close({ keepHolds: "yes" });

  const held = lock("k", "30s", redis);
  const reason: unknown = held.signal.reason;
  if (reason instanceof StoreClosedError) {
    const key: string | undefined = reason.key;
    void key;
  }
  try {
    await redis.close();
  } catch (err) {
    if (err instanceof StoreUnavailableError) {
      const keys: string[] | undefined = err.keys;
      const mayRemain: boolean = err.holdMayRemain;
      void [keys, mayRemain];
    }
  }
  // An aborted wait says whether a hold may remain, and carries the signal's own reason.
  try {
    await lock("k", "30s", redis).acquire({ timeout: "5s", signal: AbortSignal.timeout(10) });
  } catch (err) {
    if (err instanceof AbortError) {
      const mayRemain: boolean = err.holdMayRemain;
      const why: unknown = err.reason;
      void [mayRemain, why];
    }
  }
}
