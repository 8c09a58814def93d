// The conformance suite against MySqlLockStore on a real MariaDB server: with its own
// pool (from a URL), and over a mysql2 pool of the caller's with a database-qualified table.
import { after, before, describe } from "node:test";
import mysql from "mysql2/promise";

import { MySqlLockStore } from "../../js/stores/mysql.mjs";
import { conformance } from "./conformance.mjs";
import { requireMysql, startMysql } from "../support/mysql-server.mjs";

describe("MySQL (MariaDB)", await requireMysql(), () => {
  let server;
  let pool;
  before(async () => {
    server = await startMysql();
    pool = mysql.createPool({ uri: server.url.replace(/\/locksmith$/, "/"), connectionLimit: 4 });
    await pool.query("CREATE DATABASE app");
  });
  after(async () => {
    await pool?.end();
    await server?.dispose();
  });

  conformance("MySqlLockStore", {
    makeStore: () => MySqlLockStore.connect(server.url),
    closeStore: (store) => store.close(),
    fencing: true,
    exactOwnership: true,
  });

  conformance("MySqlLockStore over the caller's pool, database-qualified table", {
    makeStore: () => new MySqlLockStore(pool, { table: "app.locks" }),
    closeStore: (store) => store.close(),
    fencing: true,
    exactOwnership: true,
  });
});
