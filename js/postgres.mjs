// locksmith/postgres as an ES module: the same class as `require("locksmith/postgres")`.
import postgres from "./postgres.cjs";

export const { PostgresLockStore } = postgres;
