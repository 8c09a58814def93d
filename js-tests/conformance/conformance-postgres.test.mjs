// The conformance suite against PostgresLockStore on a real PostgreSQL server: with its
// own pool and LISTEN wake-ups, and over a pool of the caller's with a schema-qualified
// table and polling only.
import { after, before, describe } from "node:test";
import pg from "pg";

import { PostgresLockStore } from "../../js/stores/postgres.mjs";
import { conformance } from "./conformance.mjs";
import { requirePostgres, startPostgres } from "../support/postgres-server.mjs";

describe("PostgreSQL", await requirePostgres(), () => {
  let server;
  let pool;
  before(async () => {
    server = await startPostgres();
    pool = new pg.Pool({ connectionString: server.url });
    pool.on("error", () => {});
    await pool.query("CREATE SCHEMA app");
  });
  after(async () => {
    await pool?.end();
    await server?.dispose();
  });

  conformance("PostgresLockStore", {
    makeStore: () => PostgresLockStore.connect(server.url),
    closeStore: (store) => store.close(),
    fencing: true,
    exactOwnership: true,
  });

  conformance("PostgresLockStore over the caller's pool, schema-qualified table, no LISTEN", {
    makeStore: () => new PostgresLockStore(pool, { table: "app.locks", listen: false }),
    closeStore: (store) => store.close(),
    fencing: true,
    exactOwnership: true,
  });
});
