#!/usr/bin/env node
// `npx locksmith-js`: see, watch and free the locks, semaphore permits and read-write holds
// in a Redis (one server or a Cluster), PostgreSQL, MySQL/MariaDB or etcd store, or a
// FileLockStore's lock file.
//
//   locksmith list <store-url> [pattern] [--prefix P | --table T] [--json]
//   locksmith inspect <store-url> <key> [--prefix P | --table T] [--json]
//   locksmith watch <store-url> [pattern] [--interval MS] [--prefix P | --table T] [--json]
//   locksmith release <store-url> <key> --force [--prefix P | --table T]
//   locksmith leader <store-url> <name> [--watch [--interval MS]] [--prefix P | --table T] [--json]
//   (inspect and release take --election: the key is an election's name)
//
// The store URL may come from LOCKSMITH_STORE_URL instead (the arguments then start after
// the command with the pattern or key), which keeps a password out of `ps` and the shell's
// history; a password in an argument gets a warning.
//
// It prints a short fingerprint of each owner token, never the token itself: the token is
// a bearer secret (whoever has it can release or extend the lock).
//
// `watch` reads the store every --interval: in a terminal it redraws a table in place;
// piped (or with --json) it prints one line per change: a hold that appeared, ended or
// changed owner, a key whose count of waiters changed.
//
// Redis needs no client package: the command speaks RESP over Node's own socket with the
// package's own pieces (the Redis engine's encoder and decoder, from the addon or the
// WebAssembly engine; the URL parsing of the store's driver; the store's Lua scripts).
// On a Redis Cluster (found by CLUSTER SLOTS on the server named) it reads every master:
// `list` and `watch` scan each, `inspect` and `release` go to the master of the key's slot.
//
// This file is the command: its arguments and what each does. Beside it: common.mjs (its
// errors, a hold as reported), render.mjs (what it prints), watch.mjs, and readers/, one
// reader per store, each taking its schema from its store's module.
import { readFile } from "node:fs/promises";
import { parseArgs } from "node:util";

import { DEFAULT_KEY_PREFIX, DEFAULT_SQL_TABLE, ELECTION_KEY_PREFIX, MAX_ELECTION_NAME_BYTES } from "../api/defaults.mjs";
import { closest } from "../api/errors.mjs";
import { readElectionRecord } from "../api/election-record.mjs";
import { redact, StoreError, UsageError } from "./common.mjs";
import { withReader } from "./readers/open.mjs";
import { electionShown, inspectReport, inspectText, kindText, seconds, sortHolds, table } from "./render.mjs";
import { everyInterval, watch } from "./watch.mjs";

const DEFAULT_INTERVAL_MS = 1_000;

const USAGE = `run it as npx locksmith-js <command> …, or where locksmith-js is installed as locksmith <command> … (below)

usage:
  locksmith list <store-url> [pattern] [options]          the held locks, semaphore permits and read-write holds
                                                          (pattern: a glob on lock names, default *)
  locksmith inspect <store-url> <key> [options]           who holds <key>: kind, owners, fencing token, time left, waiters
  locksmith watch <store-url> [pattern] [options]         the holds and waiters, live, until Ctrl-C: a table redrawn
                                                          in a terminal; piped, one line per change
  locksmith release <store-url> <key> --force [options]   free every hold on <key>, whoever holds it
  locksmith leader <store-url> <name> [options]           who leads the election <name>: owner, term, since when,
                                                          its value, lease left; --watch: each change, until Ctrl-C

store URLs:
  redis://[user:password@]host:port[/db], rediss://…      one server, or any node of a Redis Cluster
  postgres://user:password@host:port/database           (needs pg installed)
  mysql://user:password@host:port/database              MySQL or MariaDB (needs mysql2 installed)
  etcd://[user:password@]host:port[,host:port…], etcds://… (TLS)
  file:///path/to/lock-file                             a FileLockStore's file (needs the native addon)

environment:
  LOCKSMITH_STORE_URL   the store URL when the command is given none (locksmith list [pattern]):
                        a password there stays out of ps and the shell's history, where an
                        argument's shows (which gets a warning). A URL argument wins over it.

options:
  --prefix <p>     key prefix (Redis: default "${DEFAULT_KEY_PREFIX}"; etcd: "locksmith/")
  --table <t>      PostgreSQL or MySQL table (default "${DEFAULT_SQL_TABLE}")
  --json           list: one object per hold; inspect, leader: one object; watch, leader --watch: one object per change
  --watch          leader: follow the election until Ctrl-C
  --election       inspect, release: <key> names an election (its leader's hold), not a lock
  --interval <ms>  watch, leader --watch: how often to read the store (default ${DEFAULT_INTERVAL_MS})
  --force          required by release: it frees holds that other processes have
  -h, --help       this text
  -v, --version    the package version

exit codes: 0 done (inspect: the key is held; leader: the election has a leader; watch, leader --watch: stopped by Ctrl-C or SIGTERM),
            1 nothing matched (no holds listed, nothing to release, inspect: the key is free, leader: no leader),
            2 a usage error, or the store could not be reached (watch: was lost) or refused the request
`;

const OPTIONS = {
  prefix: { type: "string" },
  table: { type: "string", default: DEFAULT_SQL_TABLE },
  json: { type: "boolean", default: false },
  watch: { type: "boolean", default: false },
  election: { type: "boolean", default: false },
  interval: { type: "string" },
  force: { type: "boolean", default: false },
  help: { type: "boolean", short: "h", default: false },
  version: { type: "boolean", short: "v", default: false },
};

// --table: a table name, optionally schema-qualified (the stores check its length).
const TABLE = /^(?:[A-Za-z_][A-Za-z0-9_]*\.)?[A-Za-z_][A-Za-z0-9_]*$/;

const COMMANDS = ["list", "inspect", "watch", "release", "leader", "help"];
const STORE_URL_VARIABLE = "LOCKSMITH_STORE_URL";

/** ": did you mean X?" for the one of `known` that `typed` was probably meant to be (the API's rule for options), else "". */
function didYouMean(typed, known, show = (k) => k) {
  const near = closest(typed, known);
  return near === undefined ? "" : `: did you mean ${show(near)}?`;
}

/** Whether an argument is a store URL (a scheme and //, or file:), not a key or a pattern. */
const isUrlArgument = (arg) => /^[a-z][a-z0-9+.-]*:\/\//i.test(arg) || /^file:/i.test(arg);

/** Whether a store URL carries a password: in its user part (user:password@), or as ?password=. */
const hasPassword = (url) => /^[a-z][a-z0-9+.-]*:\/\/[^/@]*:[^/@]+@/i.test(url) || /[?&]password=[^&]/i.test(url);

/**
 * The positionals with the store URL second: the argument's, or LOCKSMITH_STORE_URL's
 * when the argument after the command is no URL (a key, a pattern) or missing. A password
 * in the argument is warned of (the command runs once per process: once).
 */
function withStoreUrl(positionals, err) {
  const [command, first, ...rest] = positionals;
  if (first !== undefined && isUrlArgument(first)) {
    if (hasPassword(first)) {
      err.write(
        "locksmith: warning: the store URL argument holds a password, and ps and the shell's history show it: " +
          `set ${STORE_URL_VARIABLE} to the URL instead and leave it out of the arguments\n`,
      );
    }
    return { positionals, fromEnvironment: false };
  }
  const fromEnvironment = process.env[STORE_URL_VARIABLE];
  if (fromEnvironment === undefined || fromEnvironment === "") return { positionals, fromEnvironment: false };
  return { positionals: [command, fromEnvironment, ...(first === undefined ? [] : [first]), ...rest], fromEnvironment: true };
}

/** election()'s rule for a name: a lock key's, with room for the prefix. */
function checkElectionName(name) {
  if (name === "" || /\p{Cc}/u.test(name) || new TextEncoder().encode(name).length > MAX_ELECTION_NAME_BYTES) {
    throw new UsageError(`not an election's name: ${JSON.stringify(name)} (1 to ${MAX_ELECTION_NAME_BYTES} bytes, no control characters)`);
  }
}

/** The command line parsed, or a UsageError that says which argument is wrong. */
function parse(argv) {
  try {
    return parseArgs({ args: argv, allowPositionals: true, options: OPTIONS });
  } catch (err) {
    // parseArgs's own text ("Unknown option '--x'. To specify a positional argument…")
    // is for programmers: say which flag, and show the usage.
    const flag = /'(-[^' ]*)/.exec(err.message)?.[1];
    const name = flag?.replace(/^-+/, "").split("=")[0];
    if (err.code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      const hint = flag?.startsWith("--") ? didYouMean(name, Object.keys(OPTIONS), (o) => `--${o}`) : "";
      throw new UsageError(`unknown option ${flag ?? err.message}${hint}`, { usage: true });
    }
    if (err.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && OPTIONS[name]?.type === "string") {
      throw new UsageError(`--${name} needs a value`, { usage: true });
    }
    if (err.code === "ERR_PARSE_ARGS_INVALID_OPTION_VALUE" && OPTIONS[name]?.type === "boolean") {
      throw new UsageError(`--${name} takes no value`, { usage: true });
    }
    throw new UsageError(err.message, { usage: true });
  }
}

/** `inspect`: who holds `key`; `shown` is the name it is reported by (an election's, with --election). */
async function inspect(url, key, values, out, shown = key) {
  const found = await withReader(url, values, (reader) => reader.inspect(key));
  // An election's leader is shown as list shows it: by the election's name, of kind "election".
  const result = inspectReport(shown, { ...found, holders: found.holders.map(electionShown) });
  out.write(values.json ? `${JSON.stringify(result)}\n` : inspectText(result, url));
  return result.held ? 0 : 1;
}

/** The leader of election `name` as `inspect` found its key: `{ owner, term, since, value, remainingMs }`, or null. */
function leaderOf(found) {
  const holder = found.holders[0];
  if (holder === undefined) return null;
  const { since, value } = readElectionRecord(holder.value);
  return { owner: holder.owner, term: holder.fencingToken, since: since?.toISOString() ?? null, value, remainingMs: holder.remainingMs };
}

/** One line about `leader` (or its absence): who, which term, since when, its value, its lease. */
function leaderText(name, leader, now = Date.now()) {
  if (leader === null) return `election ${JSON.stringify(name)} has no leader`;
  const term = leader.term === null ? "" : `, term ${leader.term}`;
  const since = leader.since === null ? "" : `, since ${leader.since} (${seconds(Math.max(0, now - Date.parse(leader.since)))} ago)`;
  const value = leader.value === null ? "" : `, value ${JSON.stringify(leader.value)}`;
  return `election ${JSON.stringify(name)} is led by ${leader.owner}${term}${since}${value}, with ${seconds(leader.remainingMs)} left on its lease (a live leader renews it before then; one that died leaves it to run out)`;
}

/**
 * `leader`: who leads the election `name` (election() keeps it as a lock on its own key):
 * the leader's owner fingerprint, its term (the hold's fencing token), since when it leads
 * (its own clock), the value it proclaims and its lease left. With `--watch`, a line (or
 * an object) at first and at each change of leader or value, until Ctrl-C.
 */
async function leader(url, name, values, out) {
  const key = `${ELECTION_KEY_PREFIX}${name}`;
  if (values.watch) {
    let last;
    // The same leader with the same record (a read between a win and its record shows it again once the record is kept).
    const same = (a, b) =>
      a === null || b === null
        ? a === b
        : a.owner === b.owner && a.term === b.term && a.since === b.since && JSON.stringify(a.value) === JSON.stringify(b.value);
    return everyInterval(
      url,
      values,
      "leader --watch",
      async (reader) => leaderOf(await reader.inspect(key)),
      (now) => {
        if (last !== undefined && same(last, now)) return;
        last = now;
        const time = new Date().toISOString();
        out.write(values.json ? `${JSON.stringify({ time, name, leader: now })}\n` : `${time}  ${leaderText(name, now)}\n`);
      },
    );
  }
  const now = leaderOf(await withReader(url, values, (reader) => reader.inspect(key)));
  out.write(values.json ? `${JSON.stringify({ name, leader: now })}\n` : `${leaderText(name, now)}\n`);
  return now === null ? 1 : 0;
}

// ---------------------------------------------------------------------------------

async function main(argv, out = process.stdout, err = process.stderr) {
  const parsed = parse(argv);
  const { values } = parsed;
  const { positionals, fromEnvironment } = withStoreUrl(parsed.positionals, err);
  const [command, url, arg] = positionals;
  if (values.help || command === "help") {
    out.write(`locksmith — see, watch and free locks\n\n${USAGE}`);
    return 0;
  }
  if (values.version) {
    const { version } = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8"));
    out.write(`locksmith-js ${version}\n`);
    return 0;
  }
  if (command === undefined) throw new UsageError("a command is needed: list, inspect, watch, release or leader", { usage: true });
  if (!COMMANDS.includes(command)) {
    const hint = isUrlArgument(command) ? ": the command comes first: locksmith list <store-url>" : didYouMean(command, COMMANDS);
    throw new UsageError(`unknown command ${JSON.stringify(command)}${hint || ": use list, inspect, watch, release or leader"}`, { usage: true });
  }
  // A first argument that is no URL, with no LOCKSMITH_STORE_URL to stand for it.
  if (url !== undefined && !fromEnvironment && !isUrlArgument(url)) {
    throw new UsageError(`not a store URL: ${redact(url)}: give the store URL after the command, or set ${STORE_URL_VARIABLE}`, { usage: true });
  }
  // The default prefix is the store's: Redis's here; etcd's reader leaves it to EtcdLockStore (its "locksmith/").
  const etcd = /^etcds?:/i.test(url ?? "");
  if (!etcd) values.prefix ??= DEFAULT_KEY_PREFIX;
  if (!etcd && /[{}]/.test(values.prefix)) throw new UsageError("--prefix must not contain { or }");
  if (!TABLE.test(values.table)) throw new UsageError("--table must be a table name (letters, digits, _), optionally schema.table");
  const watching = command === "watch" || (command === "leader" && values.watch);
  if (values.watch && command !== "leader")
    throw new UsageError(`--watch goes with leader${command === "watch" ? " (watch always follows)" : ""}`, { usage: true });
  if (values.interval !== undefined && !watching) throw new UsageError("--interval goes with watch and leader --watch", { usage: true });
  // How often watch and leader --watch read the store.
  const intervalMs = values.interval === undefined ? DEFAULT_INTERVAL_MS : Number(values.interval);
  if (watching && (!Number.isInteger(intervalMs) || intervalMs < 10 || intervalMs > 3_600_000))
    throw new UsageError(`--interval must be whole milliseconds from 10 to 3600000; got ${values.interval}`);
  if (command === "list") {
    if (url === undefined || positionals.length > 3)
      throw new UsageError(`usage: locksmith list <store-url> [pattern] (or set ${STORE_URL_VARIABLE})`, { usage: true });
    const holds = sortHolds((await withReader(url, values, (reader) => reader.list(arg ?? "*"))).map(electionShown));
    if (values.json) for (const h of holds) out.write(`${JSON.stringify(h)}\n`);
    else out.write(holds.length === 0 ? "no locks held\n" : `${table(holds)}\n`);
    return holds.length === 0 ? 1 : 0;
  }
  if (values.election && command !== "inspect" && command !== "release") {
    throw new UsageError(`--election goes with inspect and release${command === "leader" ? " (leader always reads an election)" : ""}`, { usage: true });
  }
  // An election's leader holds the election's own key: --election names it by the election's name.
  const target = values.election && arg !== undefined ? `${ELECTION_KEY_PREFIX}${arg}` : arg;
  if (values.election && arg !== undefined) checkElectionName(arg);
  if (command === "inspect") {
    if (url === undefined || arg === undefined || positionals.length > 3)
      throw new UsageError(`usage: locksmith inspect <store-url> <key> [--election] (or set ${STORE_URL_VARIABLE})`, { usage: true });
    return inspect(url, target, values, out, arg);
  }
  if (command === "watch") {
    if (url === undefined || positionals.length > 3)
      throw new UsageError(`usage: locksmith watch <store-url> [pattern] (or set ${STORE_URL_VARIABLE})`, { usage: true });
    return watch(url, arg ?? "*", { ...values, intervalMs }, out);
  }
  if (command === "leader") {
    if (url === undefined || arg === undefined || positionals.length > 3)
      throw new UsageError(`usage: locksmith leader <store-url> <name> (or set ${STORE_URL_VARIABLE})`, { usage: true });
    checkElectionName(arg);
    return leader(url, arg, { ...values, intervalMs }, out);
  }
  if (command === "release") {
    if (url === undefined || arg === undefined || positionals.length > 3) {
      throw new UsageError(`usage: locksmith release <store-url> <key> [--election] --force (or set ${STORE_URL_VARIABLE})`, { usage: true });
    }
    const what = values.election ? `the election ${JSON.stringify(arg)}` : JSON.stringify(arg);
    if (!values.force) {
      throw new UsageError(
        values.election
          ? `release --election ends ${what}'s leadership, whoever leads; its leader will find it lost and a standby takes over. Add --force to do it`
          : `release frees ${what} whoever holds it; its holder will find it lost. Add --force to do it`,
      );
    }
    const released = (await withReader(url, values, (reader) => reader.release(target))).map(electionShown);
    if (released.length === 0) {
      out.write(`${what} was not held: nothing to release\n`);
      return 1;
    }
    for (const h of released) {
      out.write(
        `released ${what}${h.kind === "lock" || h.kind === "election" ? "" : ` (${kindText(h)})`}: it was held by ${h.owner} with ${seconds(h.remainingMs)} left` +
          `${h.fencingToken === null ? "" : ` (fencing token ${h.fencingToken})`}; its waiters were woken\n`,
      );
    }
    return 0;
  }
  throw new UsageError(`unknown command ${JSON.stringify(command)}: use list, inspect, watch or release`, { usage: true });
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (err) => {
    const known = err instanceof UsageError || err instanceof StoreError;
    process.stderr.write(`locksmith: ${known ? err.message : `failed: ${err?.message ?? err}`}\n`);
    if (err instanceof UsageError && err.usage) process.stderr.write(`\n${USAGE}`);
    process.exitCode = 2;
  },
);
