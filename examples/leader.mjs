// A cron job on one instance only: `node examples/leader.mjs` starts three instances of
// a worker (three processes, as three containers would be), each running the same
// election. One leads and runs the job every 300 ms; the others stand by. After a while
// the leader is killed with SIGKILL (no clean shutdown), and a standby takes over once
// the leader's lease (1 s here) has run out. Then every instance is stopped with SIGTERM,
// which ends its run() cleanly.
//
// The instances share a FileLockStore (one host, no server); with REDIS_URL set they
// share that Redis instead, as instances on several machines would.
import { fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { election, FileLockStore, RedisLockStore } from "locksmith-js";

if (process.argv[2] === "instance") {
  // One instance: lead whenever possible until SIGTERM.
  const [, , , id, file] = process.argv;
  const store = process.env.REDIS_URL ? await RedisLockStore.connect(process.env.REDIS_URL) : await FileLockStore.open(file);
  const stop = new AbortController();
  process.on("SIGTERM", () => stop.abort());
  await election("nightly-report", { store, ttl: "1s" }).run(
    async (signal, { term }) => {
      process.send({ id, event: "leads", term });
      while (!signal.aborted) {
        process.send({ id, event: "job", term }); // the job: once per tick, on the leader only
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    },
    // What `locksmith leader` and election().leader() show of this instance while it leads.
    { signal: stop.signal, value: { instance: id, pid: process.pid } },
  );
  await store.close();
  process.exit(0);
}

const dir = mkdtempSync(join(tmpdir(), "locksmith-leader-"));
const file = join(dir, "locks");
const started = performance.now();
const at = () => `${String(Math.round(performance.now() - started)).padStart(5)} ms`;
const instances = new Map();
let leader;
for (const id of ["a", "b", "c"]) {
  const child = fork(new URL(import.meta.url).pathname, ["instance", id, file]);
  child.on("message", ({ id, event, term }) => {
    if (event === "leads") {
      console.log(`${at()}  instance ${id} leads (term ${term})`);
      leader = id;
    } else console.log(`${at()}  instance ${id} runs the job`);
  });
  instances.set(id, child);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
while (leader === undefined) await sleep(50);
await sleep(1_000);
const killed = leader;
console.log(`${at()}  SIGKILL to instance ${killed}, the leader`);
instances.get(killed).kill("SIGKILL");
instances.delete(killed);
while (leader === killed) await sleep(50);
console.log(`${at()}  instance ${leader} took over from ${killed}`);
await sleep(700);
for (const child of instances.values()) child.kill("SIGTERM");
await Promise.all([...instances.values()].map((child) => new Promise((resolve) => child.on("exit", resolve))));
rmSync(dir, { recursive: true, force: true });
console.log(`${at()}  every instance stopped`);
