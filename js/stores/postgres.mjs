// locksmith-js/postgres as an ES module: the same class as `require("locksmith-js/postgres")`.
import postgres from "./postgres.cjs";

export const { PostgresLockStore } = postgres;
