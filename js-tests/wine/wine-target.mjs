// What js-tests/support/target.mjs gives the conformance suite, for the run under Wine:
// the installed package by name, which must have loaded its native addon.
export const TARGET = "native";
export const ls = await import("locksmith-js");
if (ls.backend !== "native") throw new Error(`locksmith: the ${ls.backend} build loaded under Wine, not the addon`);

let next = 0;
/** A key no other test uses. */
export const uniqueKey = (name) => `test:${name}:${process.pid}:${next++}`;
export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
