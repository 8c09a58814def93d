// One contending process on MySQL: `node mysql-contender.mjs URL KEY ROUNDS`. It runs
// ROUNDS critical sections through MySqlLockStore (in the build that LOCKSMITH_TARGET
// names). Inside the lock it does a deliberately non-atomic read-modify-write of a counter
// row, and logs its entry and exit, with the hold's fencing token, to a table whose
// AUTO_INCREMENT ids order the log: any overlap shows as two entries in a row.
import { setTimeout as sleep } from "node:timers/promises";
import mysql from "mysql2/promise";

import { MySqlLockStore } from "../../js/stores/mysql.mjs";
import { ls } from "./target.mjs";

const [url, key, rounds] = process.argv.slice(2);
const store = await MySqlLockStore.connect(url);
const db = await mysql.createConnection(url);
const me = `${process.pid}`;
let ran = 0;
for (let i = 0; i < Number(rounds); i++) {
  const lock = new ls.Lock(key, 5_000, store);
  const [ok] = await lock.run(
    async () => {
      await db.query("INSERT INTO load_log (`key`, entry, token) VALUES (?, ?, ?)", [key, `in:${me}`, lock.fencingToken]);
      const [rows] = await db.query("SELECT n FROM load_counter WHERE `key` = ?", [key]);
      await sleep(1);
      await db.query("UPDATE load_counter SET n = ? WHERE `key` = ?", [rows[0].n + 1, key]);
      await db.query("INSERT INTO load_log (`key`, entry) VALUES (?, ?)", [key, `out:${me}`]);
    },
    { timeout: 30_000, retryDelay: 10 },
  );
  if (ok) ran += 1;
}
await db.end();
await store.close();
process.stdout.write(String(ran));
