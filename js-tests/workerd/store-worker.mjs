// A worker around the shipped Durable Object store (`locksmith-js/cloudflare`), for the
// tests in js-tests/workerd-store.test.mjs. It exposes the store's methods over a
// WebSocket, so a Node-side store object can run the conformance suite through them, and
// runs scenarios with the package's wasm build inside workerd.
import { InvalidArgumentError, Lock, LockError, election, readWriteLock, restoreLock, semaphore } from "locksmith-js";
import { DurableObjectLockStore, LockDurableObject } from "locksmith-js/cloudflare";

// The shipped store's token-answering acquires (js/api/symbols.mjs).
const TOKEN_METHODS = { acquire: Symbol.for("locksmith.acquireToken"), acquirePermit: Symbol.for("locksmith.acquirePermitToken") };

/** The shipped class, plus what the tests look at: its storage, and waits it served. */
export class TestLockObject extends LockDurableObject {
  /** Waits served, and how many of them are pending now. */
  waits = 0;
  pending = 0;

  /** How many waits were answered "free" at once. */
  free = 0;

  waitForRelease(...args) {
    this.waits += 1;
    const outcome = super.waitForRelease(...args);
    if (outcome === "free") this.free += 1;
    if (!(outcome instanceof Promise)) return outcome;
    this.pending += 1;
    return outcome.finally(() => (this.pending -= 1));
  }

  /** Throws this instance away: the next call gets a new one, built from storage. */
  restart() {
    this.ctx.abort("restarting");
  }

  /**
   * Deletes the holds from storage (the fencing counter stays) and throws the instance
   * away: an object that comes back without them, the history checker's broken guard.
   */
  async forget() {
    await this.ctx.storage.delete(["lock", "semaphore", "rw"]);
    await this.ctx.storage.sync?.();
    this.ctx.abort("forgetting");
  }

  /**
   * Stores a semaphore as versions before weighted holds stored it (no `permits` in its
   * holds): `owners` each hold one of `limit` for `ttlMs`. Then throws the instance away,
   * so the next call loads it.
   */
  async plantUnweighted(owners, limit, ttlMs) {
    const expiresAt = Date.now() + ttlMs;
    const holders = new Map(owners.map((owner, i) => [owner, { expiresAt, token: 1_000 + i, writer: false }]));
    await this.ctx.storage.put("semaphore", { holders, claim: undefined, limit, readers: new Map(), turn: new Map() });
    await this.ctx.storage.sync?.();
    this.ctx.abort("planted");
  }

  async inspect() {
    const stored = Object.fromEntries(await this.ctx.storage.list());
    return {
      stored: JSON.parse(JSON.stringify(stored, (_, v) => (v instanceof Map ? Object.fromEntries(v) : v))),
      alarm: await this.ctx.storage.getAlarm(),
      waits: this.waits,
      pending: this.pending,
      free: this.free,
    };
  }
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A namespace whose stubs hold every waitForRelease call back `ms`: a waiter's wait then
 * reaches the object after the acquire attempt sent behind it (calls on different stubs
 * may cross so).
 */
function delayedWaits(namespace, ms) {
  return {
    idFromName: (name) => namespace.idFromName(name),
    get(id, options) {
      const stub = namespace.get(id, options);
      return new Proxy(stub, {
        get: (target, name) => (name === "waitForRelease" ? (...args) => sleep(ms).then(() => target.waitForRelease(...args)) : target[name]),
      });
    },
  };
}
const errorOf = (err) => ({ error: { name: err?.name, code: err?.code, message: err?.message } });

/**
 * Serves one WebSocket: each message `{ id, method, args }` calls that store method and
 * is answered `{ id, value }` or `{ id, error }`; `{ id, method: "onRelease", args: [key,
 * kind] }` subscribes, answered `{ id, woken: true }` when the listener is called, until
 * `{ id, method: "offRelease" }` unsubscribes. Every call runs in this one request.
 */
function serveStore(store) {
  const [client, server] = Object.values(new WebSocketPair());
  const subscriptions = new Map();
  const send = (message) => server.send(JSON.stringify(message));
  server.accept();
  server.addEventListener("message", async (event) => {
    const { id, method, args } = JSON.parse(event.data);
    if (method === "onRelease") {
      const [key, kind] = args;
      subscriptions.set(
        id,
        store.onRelease(key, () => send({ id, woken: true }), kind ?? undefined),
      );
      return;
    }
    if (method === "offRelease") {
      subscriptions.get(id)?.();
      subscriptions.delete(id);
      return;
    }
    try {
      // Across the socket the store stands for a user's own store that answers its
      // fencing tokens, so acquires go to the methods that give them (the store's own
      // acquire() and acquirePermit() answer booleans: "plainAcquire", "plainAcquirePermit").
      const target = TOKEN_METHODS[method] ?? (method.startsWith("plain") ? method[5].toLowerCase() + method.slice(6) : method);
      send({ id, value: await store[target](...args) });
    } catch (err) {
      send({ id, ...errorOf(err) });
    }
  });
  server.addEventListener("close", () => {
    for (const unsubscribe of subscriptions.values()) unsubscribe();
    server.close();
  });
  return new Response(null, { status: 101, webSocket: client });
}

export default {
  async fetch(request, env) {
    const url = new URL(request.url);
    const q = (name, fallback) => url.searchParams.get(name) ?? fallback;
    const store = new DurableObjectLockStore(env.LOCKS);
    const body = request.method === "POST" ? await request.json() : {};
    try {
      switch (url.pathname) {
        case "/store":
          return serveStore(store);
        case "/restart":
          return Response.json(
            await env.LOCKS.get(env.LOCKS.idFromName(q("key")))
              .restart()
              .then(
                () => ({ restarted: false }),
                () => ({ restarted: true }),
              ),
          );
        case "/forget":
          return Response.json(
            await env.LOCKS.get(env.LOCKS.idFromName(q("key")))
              .forget()
              .then(
                () => ({ forgot: false }),
                () => ({ forgot: true }),
              ),
          );
        // A cancel that overtakes its wait: the wait, arriving later, ends at once.
        case "/cancel-first": {
          const object = () => env.LOCKS.get(env.LOCKS.idFromName(q("key")));
          const id = crypto.randomUUID();
          const pending = await object().cancelWait(id);
          return Response.json({ pending, outcome: await object().waitForRelease(id, "lock") });
        }
        case "/plant-unweighted":
          return Response.json(
            await env.LOCKS.get(env.LOCKS.idFromName(q("key")))
              .plantUnweighted(q("owners").split(","), Number(q("limit")), Number(q("ttl", 10_000)))
              .then(
                () => ({ planted: false }),
                () => ({ planted: true }),
              ),
          );
        case "/inspect":
          return Response.json(await env.LOCKS.get(env.LOCKS.idFromName(q("key"))).inspect());
        case "/options":
          return Response.json(
            (() => {
              try {
                const made = new DurableObjectLockStore(body.namespace === null ? null : env.LOCKS, body.options);
                return {
                  ok: true,
                  onRelease: typeof made.onRelease,
                  operationTimeoutMs: made.operationTimeoutMs ?? null,
                  permitWeights: made.permitWeights ?? null,
                };
              } catch (err) {
                return { ...errorOf(err), isLocksmiths: err instanceof InvalidArgumentError };
              }
            })(),
          );
        // holder() and proclaim() of a store whose objects never answer them ("hung"), or
        // fail on the way ("lost", as a dropped connection to an object does), with an
        // operationTimeoutMs of `ms`; and an election's leader() through the hung one.
        case "/holder-faults": {
          const ms = Number(q("ms", 200));
          const faulty = (call) => ({ idFromName: (name) => name, get: () => ({ holder: call, proclaim: call }) });
          const hung = new DurableObjectLockStore(
            faulty(() => new Promise(() => {})),
            { operationTimeoutMs: ms },
          );
          const lost = new DurableObjectLockStore(
            faulty(() => Promise.reject(new Error("Network connection lost."))),
            { operationTimeoutMs: ms },
          );
          const outcome = async (promise) => {
            const start = Date.now();
            try {
              return { value: await promise, ms: Date.now() - start };
            } catch (err) {
              return { ...errorOf(err).error, ms: Date.now() - start, isLocksmiths: err instanceof LockError };
            }
          };
          return Response.json({
            hungHolder: await outcome(hung.holder("k")),
            hungProclaim: await outcome(hung.proclaim("k", "o", "v", 1)),
            lostHolder: await outcome(lost.holder("k")),
            lostProclaim: await outcome(lost.proclaim("k", "o", "v", 1)),
            leader: await outcome(election("hung", { store: hung }).leader()),
          });
        }
        // A lock taken here and kept: its serialized form, to release from another request.
        case "/hold": {
          const l = new Lock(q("key"), Number(q("ttl", 10_000)), store);
          const taken = await l.acquire();
          return Response.json({ taken, token: l.fencingToken, serialized: taken ? l.serialize() : null });
        }
        case "/release":
          return Response.json({ released: await restoreLock(q("lock"), store).release() });
        // A waiter: acquire with a timeout; how long it took, by the worker's clock.
        case "/wait": {
          const l = q("kind") === "write" ? readWriteLock(q("key"), 5_000, store).writeLock() : new Lock(q("key"), 5_000, store);
          const start = Date.now();
          const acquired = await l.acquire({ timeout: Number(q("timeout")), retryDelay: Number(q("retryDelay")) });
          const waitedMs = Date.now() - start;
          const token = l.fencingToken;
          if (acquired) await l.release();
          return Response.json({ acquired, waitedMs, token });
        }
        // A waiter whose wait reaches the object after its refused attempt (held back
        // `delay` ms), then the holds in its way go: how long it took to get in.
        // kind=write: two readers hold and the writer waits. kind=read: a writer holds,
        // another writer's claim waits, and the reader waits for the readers' turn.
        // kind=semaphore: holds of 3 and 1 of 5 permits; the waiter needs 3, and the 3 go.
        case "/late-wait": {
          const key = q("key");
          const late = new DurableObjectLockStore(delayedWaits(env.LOCKS, Number(q("delay", 150))));
          const rw = (s) => readWriteLock(key, 5_000, s);
          const options = { timeout: Number(q("timeout", 4_000)), retryDelay: Number(q("retryDelay", 2_500)) };
          let holders;
          let waiter;
          let kept;
          if (q("kind") === "semaphore") {
            const [big, small] = [semaphore(key, 5, 5_000, store), semaphore(key, 5, 5_000, store)];
            if (!(await big.acquire({ permits: 3 })) || !(await small.acquire())) return Response.json({ error: { message: "a holder was refused" } });
            holders = [big];
            kept = small;
            waiter = semaphore(key, 5, 5_000, late);
            options.permits = 3;
          } else if (q("kind") === "write") {
            holders = [rw(store).readLock(), rw(store).readLock()];
            for (const h of holders) if (!(await h.acquire())) return Response.json({ error: { message: "a reader was refused" } });
            waiter = rw(late).writeLock();
          } else {
            holders = [rw(store).writeLock()];
            if (!(await holders[0].acquire())) return Response.json({ error: { message: "the writer was refused" } });
            if ((await store.acquirePermit(key, "other-writer", 5_000, "write", undefined)) !== false)
              return Response.json({ error: { message: "the second writer got in" } });
            waiter = rw(late).readLock();
          }
          const start = Date.now();
          const waiting = waiter.acquire(options);
          await sleep(50);
          for (const h of holders) await h.release();
          const acquired = await waiting;
          const waitedMs = Date.now() - start;
          if (acquired) await waiter.release();
          await kept?.release();
          await store.releasePermit(key, "other-writer", "write");
          return Response.json({ acquired, waitedMs });
        }
        // Two waiters of one semaphore in this isolate whose calls cross, as a host that
        // runs them on two threads may send them: both subscribe, then both try (the second
        // first), each refused; their waits reach the object later (held back `delay` ms),
        // after one permit was given back. Of 4 permits, holds of 3 and 1: "a" needs 1 and
        // fits once the 1 goes, "b" needs 3 and does not. What each wait answered.
        case "/crossed-waits": {
          const key = q("key");
          const late = new DurableObjectLockStore(delayedWaits(env.LOCKS, Number(q("delay", 150))));
          for (const [owner, permits] of [
            ["big", 3],
            ["small", 1],
          ]) {
            if (typeof (await store[TOKEN_METHODS.acquirePermit](key, owner, 10_000, "semaphore", 4, permits)) !== "number") {
              return Response.json({ error: { message: `${owner} was refused` } });
            }
          }
          const woken = { a: 0, b: 0 };
          const offA = late.onRelease(key, () => (woken.a += 1), "semaphore");
          const offB = late.onRelease(key, () => (woken.b += 1), "semaphore");
          const tried = {
            b: await late[TOKEN_METHODS.acquirePermit](key, "b", 10_000, "semaphore", 4, 3),
            a: await late[TOKEN_METHODS.acquirePermit](key, "a", 10_000, "semaphore", 4, 1),
          };
          await store.releasePermit(key, "small", "semaphore");
          await sleep(Number(q("delay", 150)) + 250);
          offA();
          offB();
          // "b" goes round once more, as a waiter does when woken: refused, it waits again.
          const offAgain = late.onRelease(key, () => (woken.bAgain += 1), "semaphore");
          woken.bAgain = 0;
          tried.bAgain = await late[TOKEN_METHODS.acquirePermit](key, "b", 10_000, "semaphore", 4, 3);
          await sleep(Number(q("delay", 150)) + 250);
          offAgain();
          await store.releasePermit(key, "big", "semaphore");
          const { free, waits } = await env.LOCKS.get(env.LOCKS.idFromName(key)).inspect();
          return Response.json({ tried, woken, free, waits });
        }
        // Fencing tokens of consecutive holds of a lock, a semaphore and a read-write lock.
        case "/fencing": {
          const tokens = [];
          for (let i = 0; i < 3; i++) {
            const l = new Lock(q("key"), 5_000, store);
            await l.acquire();
            tokens.push(l.fencingToken);
            await l.release();
          }
          const s = semaphore(q("key"), 2, 5_000, store);
          await s.acquire();
          tokens.push(s.fencingToken);
          await s.release();
          const w = readWriteLock(q("key"), 5_000, store).writeLock();
          await w.acquire();
          tokens.push(w.fencingToken);
          await w.release();
          return Response.json({ tokens });
        }
        // Eight contenders on a semaphore of three, each inside for a moment.
        case "/semaphore": {
          let inside = 0;
          let most = 0;
          const outcomes = await Promise.all(
            Array.from({ length: 8 }, () =>
              semaphore(q("key"), 3, 5_000, store).run(
                async (permit) => {
                  inside += 1;
                  most = Math.max(most, inside);
                  const count = await permit.count();
                  await sleep(60);
                  inside -= 1;
                  return count;
                },
                { timeout: 5_000, retryDelay: 2_000 },
              ),
            ),
          );
          return Response.json({ ran: outcomes.filter(([ran]) => ran).length, most, counts: outcomes.map(([, c]) => c) });
        }
        // Readers share; a waiting writer keeps new readers out and gets in when they go.
        case "/readers-writer": {
          const rw = () => readWriteLock(q("key"), 5_000, store);
          const readers = [rw().readLock(), rw().readLock()];
          const steps = {};
          steps.readersIn = await Promise.all(readers.map((r) => r.acquire()));
          steps.readCount = await readers[0].count();
          const writer = rw().writeLock();
          const start = Date.now();
          const writing = writer.acquire({ timeout: 3_000, retryDelay: 2_000 });
          await sleep(100);
          steps.lateReaderIn = await rw().readLock().acquire();
          await Promise.all(readers.map((r) => r.release()));
          steps.writerIn = await writing;
          steps.writerWaitedMs = Date.now() - start;
          steps.readerWhileWriting = await rw().readLock().acquire();
          steps.writeCount = await writer.count();
          await writer.release();
          steps.readerAfter = await rw().readLock().acquire();
          return Response.json(steps);
        }
        default:
          return new Response("not found", { status: 404 });
      }
    } catch (err) {
      return Response.json(errorOf(err));
    }
  },
};
