// locksmith-js/mysql as an ES module: the same class as `require("locksmith-js/mysql")`.
import mysql from "./mysql.cjs";

export const { MySqlLockStore } = mysql;
