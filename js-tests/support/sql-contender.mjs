// One contending process on a SQL store: `node sql-contender.mjs DIALECT URL KEY ROUNDS`,
// DIALECT `postgres` or `mysql` (see sql-stores.mjs). It runs ROUNDS critical sections
// through that store (in the build that LOCKSMITH_TARGET names). Inside the lock it does a
// deliberately non-atomic read-modify-write of a counter row, and logs its entry and exit,
// with the hold's fencing token, to a table whose ids order the log: any overlap shows as
// two entries in a row.
import { setTimeout as sleep } from "node:timers/promises";

import { SQL_STORES } from "./sql-stores.mjs";
import { ls } from "./target.mjs";

const [dialect, url, key, rounds] = process.argv.slice(2);
const sql = SQL_STORES.find((s) => s.dialect === dialect);
const store = await sql.connect(url);
const db = await sql.admin(url);
const me = `${process.pid}`;
let ran = 0;
for (let i = 0; i < Number(rounds); i++) {
  const lock = new ls.Lock(key, 5_000, store);
  const [ok] = await lock.run(
    async () => {
      await db.query(sql.contender.enter, [key, `in:${me}`, lock.fencingToken]);
      const rows = await db.query(sql.counter, [key]);
      await sleep(1);
      await db.query(sql.contender.count, [rows[0].n + 1, key]);
      await db.query(sql.contender.leave, [key, `out:${me}`]);
    },
    { timeout: 30_000, retryDelay: sql.contender.retryDelay },
  );
  if (ok) ran += 1;
}
await db.end();
await store.close();
process.stdout.write(String(ran));
