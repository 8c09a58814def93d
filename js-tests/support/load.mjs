// Helpers of the load tests: contending processes and the overlap check.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";

/**
 * Runs one redis-contender.mjs process; resolves with how many critical sections it ran
 * (an array of counts, one per mode, when `mode` lists several).
 * `mode` is `lock`, `semaphore:LIMIT` or `rw`, or several joined by commas (see
 * redis-contender.mjs).
 */
export function contender(url, key, rounds, seconds, mode = "lock") {
  return new Promise((resolve, reject) => {
    const args = [new URL("./redis-contender.mjs", import.meta.url).pathname, url, key, String(rounds)];
    args.push(String(seconds ?? 0), mode);
    const p = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    const counts = () => (mode.includes(",") ? out.split(",").map(Number) : Number(out));
    p.once("exit", (code) => (code === 0 ? resolve(counts()) : reject(new Error(`contender exited ${code}`))));
  });
}

/** The entry/exit log must read in:a out:a in:b out:b ...: nobody entered while another was inside. */
export function assertNoOverlap(log) {
  assert.equal(log.length % 2, 0, "every entry has its exit");
  for (let i = 0; i < log.length; i += 2) {
    const [enter, exit] = [log[i], log[i + 1]];
    assert.ok(enter.startsWith("in:") && exit === `out:${enter.slice(3)}`, `overlap at log[${i}]: ${enter}, ${exit}`);
  }
}

/** Replays an `in:ID`/`out:ID` log; each entry passes what is inside (a Map of ID to entry) to `check`. */
function replay(log, check) {
  const inside = new Map();
  log.forEach((entry, i) => {
    const [dir, ...rest] = entry.split(":");
    const id = rest.join(":");
    if (dir === "in") {
      check(inside, id, i);
      inside.set(id, entry);
    } else {
      assert.ok(inside.delete(id), `log[${i}]: ${entry} without its entry`);
    }
  });
  assert.equal(inside.size, 0, "every entry has its exit");
}

/** A semaphore's log: never more than `limit` inside. Returns the most inside at once. */
export function assertAtMost(log, limit) {
  let most = 0;
  replay(log, (inside, id, i) => {
    assert.ok(inside.size < limit, `log[${i}]: in:${id} with ${inside.size} already inside (limit ${limit})`);
    most = Math.max(most, inside.size + 1);
  });
  return most;
}

/**
 * A read-write lock's log (IDs `r:...` and `w:...`): a writer never overlaps anyone.
 * Returns how many readers entered while another reader was inside.
 */
export function assertReadersShareWritersAlone(log) {
  let shared = 0;
  replay(log, (inside, id, i) => {
    if (id.startsWith("w:")) {
      assert.equal(inside.size, 0, `log[${i}]: writer ${id} entered with ${[...inside.keys()]} inside`);
    } else {
      const writers = [...inside.keys()].filter((k) => k.startsWith("w:"));
      assert.deepEqual(writers, [], `log[${i}]: reader ${id} entered while a writer was inside`);
      if (inside.size > 0) shared += 1;
    }
  });
  return shared;
}
