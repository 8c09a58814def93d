// Run by Node for Windows under Wine (js-tests/cross.test.mjs) in the consumer folder:
// the shared conformance suite (copied beside this file, its build taken from
// ./wine-target.mjs, which imports the installed package) against the addon's memory
// stores. Node's test runner writes its TAP report to the file --test-reporter-destination
// names.
import { conformance } from "./conformance.mjs";
import { ls } from "./wine-target.mjs";

conformance("MemoryLockStore (win32-x64-gnu under Wine)", { makeStore: () => new ls.MemoryLockStore(), fencing: true, exactOwnership: true });
conformance("MemoryLockStore.shared (win32-x64-gnu under Wine)", {
  makeStore: () => ls.MemoryLockStore.shared("conformance"),
  fencing: true,
  exactOwnership: true,
});
