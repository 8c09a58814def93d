// Where a concurrency-1 pair's time goes on RedisLockStore: marks around the socket's
// writes and `data` events split one acquire + release into client work, write syscalls
// and the round trips themselves (median of each step over 18,000 pairs), then times
// two PING round trips on a bare `net` socket: the floor of a pair on this machine. A
// benchmark, not a test: `node bench/c1-probe.mjs` (`--fencing=false` for the fencing-free
// path). The marks themselves cost a little.
import { createRequire } from "node:module";
import net from "node:net";
import { startRedis } from "../js-tests/support/redis-server.mjs";

const require = createRequire(import.meta.url);
const native = require("../js/node.cjs");
const server = await startRedis();
const fencing = !process.argv.includes("--fencing=false");
const store = await native.RedisLockStore.connect(server.url, { fencing });
console.log(`fencing: ${fencing}`);
let marks = [];
const mark = (m) => marks.push([m, performance.now()]);
const write = net.Socket.prototype.write;
net.Socket.prototype.write = function (...args) {
  mark("write");
  const out = write.apply(this, args);
  mark("written");
  return out;
};
const emit = net.Socket.prototype.emit;
net.Socket.prototype.emit = function (event, ...args) {
  if (event === "data") mark("data");
  const out = emit.call(this, event, ...args);
  if (event === "data") mark("fed");
  return out;
};
const steps = {};
for (let i = 0; i < 20_000; i++) {
  marks = [];
  mark("start");
  const l = new native.Lock(`c1:${i % 100}`, 30_000, store);
  mark("new Lock");
  await l.acquire();
  mark("acquired");
  await l.release();
  mark("released");
  if (i < 2_000) continue; // warm-up
  for (let j = 1; j < marks.length; j++) {
    const step = `${String(j).padStart(2)} ${marks[j - 1][0]} → ${marks[j][0]}`;
    (steps[step] ??= []).push((marks[j][1] - marks[j - 1][1]) * 1000);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
let sum = 0;
for (const [step, times] of Object.entries(steps)) {
  sum += median(times);
  console.log(`${step.padEnd(28)} ${median(times).toFixed(1).padStart(6)} µs`);
}
console.log(`${"sum of the medians".padEnd(28)} ${sum.toFixed(1).padStart(6)} µs`);

net.Socket.prototype.write = write;
net.Socket.prototype.emit = emit;
const { hostname, port } = new URL(server.url);
const socket = net.connect({ host: hostname, port: Number(port) });
socket.setNoDelay(true);
await new Promise((resolve) => socket.once("connect", resolve));
let answered;
socket.on("data", () => answered());
const ping = () =>
  new Promise((resolve) => {
    answered = resolve;
    socket.write("*1\r\n$4\r\nPING\r\n");
  });
const floor = [];
for (let i = 0; i < 20_000; i++) {
  const t = performance.now();
  await ping();
  await ping();
  if (i >= 2_000) floor.push((performance.now() - t) * 1000);
}
console.log(`${"two PINGs on a bare socket".padEnd(28)} ${median(floor).toFixed(1).padStart(6)} µs`);
socket.destroy();
await store.close();
await server.stop();
