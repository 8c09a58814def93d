// The WebAssembly module's size, gzipped at level 9 (deterministic for a given build), and
// the budget `npm test` holds it to so that it never grows back unnoticed. The goal is
// 32 KB; the budget is what the build reaches today, with a little room.
// `node scripts/wasm-size.mjs` prints the size and exits non-zero above the budget.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

// 49 KB until the lease model (one owner-specific due check, lost is final, waits through
// outages) and phase-fair read-write locks in the memory store took it to 50.5 KB; an
// acquire's `signal` (the abortable wait, its token class) to 51.5 KB; weighted semaphore
// permits (the memory store's weights, the JS store contract's permitWeights) to 52.9 KB;
// lockAll() (several keys all or nothing: Lock::all, the one-step acquire of the memory
// store and of a JS store's acquireAll, the serialized form's key lists, giving a lost
// multi-key hold's other keys back) to 62.0 KB. A pinned nightly building the standard
// library at the size profile, the serialized text read by the host's JSON.parse, and
// wasm-opt's -Os with one- and two-letter import and export names brought it to 52.2 KB;
// leaving the memory store's waiter records out of this build (its waiters poll), no
// UTF-8 check of owner tokens, one call method for JS stores, and no `log10`, string
// searcher or integer parser from the standard library, back within 49 KB. Uncertain
// outcomes (a fresh owner token after an unanswered attempt, an aborted attempt left to
// settle and then released, clean-up releases tried again in the background, the
// `holdMayRemain` errors) took it to 50.6 KB; concurrent extends answered out of order
// (a hold numbers its extends, so the deadline counts from the latest send) to 51.1 KB;
// the test kit's seam (a lock's timer given by its store: a TestClock's sleeps, and the
// JS-store bridge's `useClock`; the TestStore's memory store lives in the second module)
// to 51.9 KB; an extend that may still land holding the deadline to its TTL to 52.2 KB;
// elections (a lock moved to an election's key, Lock::for_election) to 52.4 KB; the
// memory store's `holder`/`proclaim` (an election's leader and its value, read by
// leader() and observe()) to 53.4 KB (an array answer; one string, or three calls of
// primitives, measured larger): 53.5 KB until the size work of the speed issue (40 KB).
// FNV-1a for the memory store's maps on wasm32, where std's SipHash keys are not random
// (two addresses), instead of SipHash and RandomState: 52.8 KB. A wait that starts with
// its pause after a refused synchronous attempt, and a sleep armed again when its
// `setTimeout` fires before `performance.now()` has moved on by its milliseconds: 53.0 KB.
// Fair locks and semaphores in the memory store (a queue of leased places per key, the
// key's fairness checked both ways, `"fair lock"` in the serialized form) and a JS store's
// `acquireFair` (the contract's call, the test kit's store over the memory store), and a
// wait's place given up when its future is dropped: 55.6 KB. A fair lock's release and
// extend told apart from a plain one's (`LockStore::release_fair`/`extend_fair`, the
// contract's calls with the kind "lock": the Redis stores keep fair locks apart), and a
// store's UNSUPPORTED refusal: 56.2 KB.
export const WASM_GZIP_BUDGET_BYTES = 56.3 * 1024;

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const wasmFile = join(root, "js/wasm/locksmith_wasm_bg.wasm");

export function wasmSize(file = wasmFile) {
  const bytes = readFileSync(file);
  return { rawBytes: bytes.length, gzipBytes: gzipSync(bytes, { level: 9 }).length };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const { rawBytes, gzipBytes } = wasmSize();
  const kb = (n) => `${(n / 1024).toFixed(1)} KB`;
  const line = `locksmith_wasm_bg.wasm: ${kb(rawBytes)} raw, ${kb(gzipBytes)} gzipped (${gzipBytes} bytes; budget ${WASM_GZIP_BUDGET_BYTES})`;
  if (gzipBytes > WASM_GZIP_BUDGET_BYTES) {
    console.error(`${line}\nThe WebAssembly module grew past its size budget (scripts/wasm-size.mjs).`);
    process.exit(1);
  }
  console.log(line);
}
