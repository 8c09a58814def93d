// locksmith-js/testing: test code that uses locks without sleeping. A TestStore keeps
// locks as the memory store does, on a TestClock that times every lock over it; its
// controls end holds, give keys to other owners and inject store faults. withFaults()
// injects the same faults into a real store. Works with either build of locksmith-js,
// whichever the test imports.
export { TestClock } from "./testing/clock.mjs";
export { STORE_CALLS } from "./testing/faults.mjs";
export { TestStore, withFaults } from "./testing/store.mjs";
