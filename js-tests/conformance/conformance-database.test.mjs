// The conformance suite against the documented database store recipe, on SQLite.
import { conformance } from "./conformance.mjs";
import { databaseLockStore, sqliteConnection } from "../support/database-store.mjs";

let connection;
conformance("the documented database store", {
  makeStore: async () => {
    connection = await sqliteConnection();
    return databaseLockStore(() => connection);
  },
  closeStore: async () => connection.close(),
  fencing: false,
  exactOwnership: false,
});
