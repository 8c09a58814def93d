// The SQL stores' fair decision (js/stores/sql-core.cjs `decideFair`), on its own: what a
// fair attempt does with the key's live rows as read under the key's lock. The stores'
// own tests (sql-stores.test.mjs) and the history checker run it against the servers;
// this names each rule.
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, it } from "node:test";

const { decideFair, decidePermit } = createRequire(import.meta.url)("../../js/stores/sql-core.cjs");

const place = (owner, arrival, permits = 1) => ({ owner, role: "place", limit: null, permits, arrival });
const mark = (owner) => ({ owner, role: "mark", limit: null, permits: 1, arrival: 1 });
const fairHolder = (owner, permits = 1, limit = 3) => ({ owner, role: "fair", limit, permits, arrival: 1 });
const plainHolder = (owner, permits = 1, limit = 3) => ({ owner, role: "semaphore", limit, permits, arrival: 1 });

describe("decideFair: a fair lock", () => {
  const lock = (rows, owner, holder, waits = true) => decideFair(rows, "lock", owner, undefined, 1, waits, holder);

  it("grants a free key when nobody waits, or when the owner's place heads the line", () => {
    assert.deepEqual(lock([], "a", null), { grant: true, others: false, roomLeft: false });
    assert.deepEqual(lock([place("a", 5), place("b", 7)], "a", null), { grant: true, others: true, roomLeft: false });
  });

  it("puts a newcomer at the end of the line, renews a place, drops one that does not wait", () => {
    assert.deepEqual(lock([place("b", 7)], "a", null), { place: "take" }, "free, but b is in line");
    assert.deepEqual(lock([place("b", 7), place("a", 9)], "a", null), { place: "renew" }, "second in line");
    assert.deepEqual(lock([place("b", 7), place("a", 9)], "a", null, false), { place: "drop" });
    assert.deepEqual(lock([place("b", 7)], "a", null, false), { place: undefined });
    assert.deepEqual(lock([mark("h"), place("a", 3)], "a", "h"), { place: "renew" }, "first in line, but held");
  });

  it("orders places by their numbers, not by the order the rows were read in", () => {
    assert.deepEqual(lock([place("b", 9), place("a", 4)], "a", null), { grant: true, others: true, roomLeft: false });
    assert.deepEqual(lock([place("a", 9), place("b", 4)], "a", null), { place: "renew" });
  });

  it("refuses a key held without a mark (a handle that is not fair), and answers held to its own holder", () => {
    assert.deepEqual(lock([], "a", "h"), { unfair: true });
    assert.deepEqual(lock([mark("other")], "a", "h"), { unfair: true }, "a mark of another owner is not the holder's");
    assert.deepEqual(lock([mark("a")], "a", "a"), { held: true });
  });
});

describe("decideFair: a fair semaphore", () => {
  const sem = (rows, owner, weight = 1, limit = 3, waits = true) => decideFair(rows, "semaphore", owner, limit, weight, waits, null);

  it("grants while the permits fit, saying whether any are left for the next in line", () => {
    assert.deepEqual(sem([fairHolder("h", 1)], "a", 1), { grant: true, others: false, roomLeft: true });
    assert.deepEqual(sem([fairHolder("h", 1), place("a", 2), place("b", 3)], "a", 2), { grant: true, others: true, roomLeft: false });
  });

  it("never lets a later, smaller request past an earlier, larger one", () => {
    assert.deepEqual(sem([fairHolder("h", 2), place("big", 4, 2)], "small", 1), { place: "take" });
    assert.deepEqual(sem([fairHolder("h", 2), place("big", 4, 2), place("small", 6)], "small", 1), { place: "renew" });
  });

  it("refuses plain holders and a different limit, and answers held to a holder", () => {
    assert.deepEqual(sem([plainHolder("h")], "a"), { unfair: true });
    assert.deepEqual(sem([fairHolder("h", 1, 2)], "a", 1, 3), { heldLimit: 2 });
    assert.deepEqual(sem([fairHolder("a")], "a"), { held: true });
  });
});

describe("decidePermit: a plain semaphore on a fair key", () => {
  it("is refused while a fair holder or a place lives", () => {
    assert.deepEqual(decidePermit([fairHolder("h")], "semaphore", "a", 3, 1), { fair: true });
    assert.deepEqual(decidePermit([place("w", 2)], "semaphore", "a", 3, 1), { fair: true });
    assert.equal(decidePermit([plainHolder("h")], "semaphore", "a", 3, 1).admitted, true);
  });
});
