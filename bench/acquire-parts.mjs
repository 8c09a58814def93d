// Where a fenced acquire's server time goes: the shipped acquire.lua against the same
// script without its parts, each in acquire+release pairs (release.lua as shipped) on 50
// keys, timed by the server itself (INFO commandstats: the EVALSHA calls' µs, their inner
// commands included, I/O not). A probe, not a test: `node bench/acquire-parts.mjs [rounds]`.
// Each round runs every variant once, in turn; the medians per variant are printed.
import { readFileSync } from "node:fs";
import { Redis } from "ioredis";

import { startRedis } from "../js-tests/support/redis-server.mjs";

const lua = (name) => readFileSync(new URL(`../redis/src/lua/${name}.lua`, import.meta.url), "utf8");
// The shipped script's first part: take the key if free (SET NX GET), as acquire.lua does.
const TAKE = `local held = redis.pcall('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX', 'GET')
if type(held) == 'table' and held.err then return held end
if held then
  if held ~= ARGV[1] then return 0 end
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
`;
const VARIANTS = {
  "acquire.lua as shipped (SET NX GET, TIME, the counter's SET GET)": lua("acquire"),
  "without the fencing counter (SET NX GET, TIME)": `${TAKE}local now = redis.call('TIME')
return tonumber(now[1]) * 1000000 + tonumber(now[2])
`,
  "the SET NX GET alone": `${TAKE}return 1
`,
};
const KEYS = 50;
const PAIRS = 20_000;
const rounds = Number(process.argv[2] ?? 5);

const server = await startRedis();
const redis = new Redis(server.url);
try {
  const release = await redis.script("LOAD", lua("release"));
  const shas = {};
  for (const [name, source] of Object.entries(VARIANTS)) shas[name] = await redis.script("LOAD", source);
  const perPair = Object.fromEntries(Object.keys(VARIANTS).map((name) => [name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const [name, sha] of Object.entries(shas)) {
      await redis.flushall();
      await redis.config("RESETSTAT");
      for (let done = 0; done < PAIRS; done += KEYS) {
        const pipeline = redis.pipeline();
        const owner = `owner-${round}-${done}`;
        for (let k = 0; k < KEYS; k++) pipeline.evalsha(sha, 2, `locksmith:{k${k}}`, `locksmith:{k${k}}:fence`, owner, 30_000, 31_000);
        for (let k = 0; k < KEYS; k++) pipeline.evalsha(release, 1, `locksmith:{k${k}}`, owner);
        await pipeline.exec();
      }
      const stats = await redis.info("commandstats");
      const usec = Number(/^cmdstat_evalsha:calls=\d+,usec=(\d+)/m.exec(stats)[1]);
      perPair[name].push(usec / PAIRS);
    }
  }
  const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`server µs per acquire+release pair (EVALSHA time, release.lua included), median of ${rounds} rounds of ${PAIRS} pairs:`);
  for (const [name, xs] of Object.entries(perPair)) {
    console.log(`  ${median(xs).toFixed(2).padStart(6)}  (min ${Math.min(...xs).toFixed(2)}, max ${Math.max(...xs).toFixed(2)})  ${name}`);
  }
} finally {
  redis.disconnect();
  await server.stop();
}
