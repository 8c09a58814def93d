// One contending process on PostgreSQL: `node postgres-contender.mjs URL KEY ROUNDS`.
// It runs ROUNDS critical sections through PostgresLockStore (in the build that
// LOCKSMITH_TARGET names). Inside the lock it does a deliberately non-atomic
// read-modify-write of a counter row, and logs its entry and exit, with the hold's
// fencing token, to a table whose serial ids order the log: any overlap shows as two
// entries in a row.
import { setTimeout as sleep } from "node:timers/promises";
import pg from "pg";

import { PostgresLockStore } from "../../js/stores/postgres.mjs";
import { ls } from "./target.mjs";

const [url, key, rounds] = process.argv.slice(2);
const store = await PostgresLockStore.connect(url);
const client = new pg.Client(url);
await client.connect();
const me = `${process.pid}`;
let ran = 0;
for (let i = 0; i < Number(rounds); i++) {
  const lock = new ls.Lock(key, 5_000, store);
  const [ok] = await lock.run(
    async () => {
      await client.query("INSERT INTO load_log (key, entry, token) VALUES ($1, $2, $3)", [key, `in:${me}`, lock.fencingToken]);
      const { rows } = await client.query("SELECT n FROM load_counter WHERE key = $1", [key]);
      await sleep(1);
      await client.query("UPDATE load_counter SET n = $2 WHERE key = $1", [key, rows[0].n + 1]);
      await client.query("INSERT INTO load_log (key, entry) VALUES ($1, $2)", [key, `out:${me}`]);
    },
    { timeout: 30_000, retryDelay: 20 },
  );
  if (ok) ran += 1;
}
await client.end();
await store.close();
process.stdout.write(String(ran));
