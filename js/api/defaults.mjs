// The defaults and limits the JS modules share, once. The Rust side has the same values
// (core's DEFAULT_TTL_MS and MAX_TTL_MS, locksmith-redis's FENCE_GRACE_MS and key prefix):
// js-tests/defaults.test.mjs checks that both builds agree with this file.

/** A lock's TTL when none is given. */
export const DEFAULT_TTL_MS = 30_000;

/** The longest TTL, timeout or delay in milliseconds (2^31 - 1: what JS timers take). */
export const MAX_MS = 2_147_483_647;

/** How much longer than its lock a Redis fencing counter lives (see redis/src/lib.rs). */
export const FENCE_GRACE_MS = 1_000;

/**
 * How long a call of a store over a database server (PostgreSQL, MySQL, etcd) may take
 * before it fails with `STORE_UNAVAILABLE`, unless the store is given `operationTimeoutMs`.
 */
export const DATABASE_OPERATION_TIMEOUT_MS = 5_000;

/** The table of PostgresLockStore and MySqlLockStore unless a store is given another. */
export const DEFAULT_SQL_TABLE = "locksmith_locks";

/**
 * What the key of an election starts with, before its name (core's ELECTION_KEY_PREFIX):
 * a control character, which no lock key has, keeps elections apart from locks.
 */
export const ELECTION_KEY_PREFIX = "\u0001election:";

/** The longest name of an election, in bytes of UTF-8: a key's longest, less the prefix (core's Lock::for_election). */
export const MAX_ELECTION_NAME_BYTES = 1024 - ELECTION_KEY_PREFIX.length;

/** The prefix put before every Redis key unless a store is given another. */
export const DEFAULT_KEY_PREFIX = "locksmith:";

/** The largest semaphore limit (a u32). */
export const MAX_LIMIT = 0xffff_ffff;

/** The message for a semaphore limit out of range: `got` is what was given, shown. */
export const limitMessage = (got) => `limit must be a whole number from 1 to ${MAX_LIMIT}; got ${got}`;
