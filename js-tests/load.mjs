// Helpers of the load tests: contending processes and the overlap check.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";

/** Runs one redis-contender.mjs process; resolves with how many critical sections it ran. */
export function contender(url, key, rounds, seconds) {
  return new Promise((resolve, reject) => {
    const args = [new URL("./redis-contender.mjs", import.meta.url).pathname, url, key, String(rounds)];
    if (seconds) args.push(String(seconds));
    const p = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    p.stdout.on("data", (d) => (out += d));
    p.once("exit", (code) => (code === 0 ? resolve(Number(out)) : reject(new Error(`contender exited ${code}`))));
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
