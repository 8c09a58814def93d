import { conformance } from "./conformance.mjs";
import { mapStore } from "../support/js-stores.mjs";
import { TARGET, ls } from "../support/target.mjs";

conformance("MemoryLockStore", { makeStore: () => new ls.MemoryLockStore(), fencing: true, exactOwnership: true });
if (TARGET === "native") {
  conformance("MemoryLockStore.shared", {
    makeStore: () => ls.MemoryLockStore.shared("conformance"),
    fencing: true,
    exactOwnership: true,
  });
}
conformance("a plain-JS store", { makeStore: mapStore, fencing: false, exactOwnership: false });
conformance("a plain-JS store with isHeldBy", {
  makeStore: () => mapStore({ withIsHeldBy: true }),
  fencing: false,
  exactOwnership: true,
});
conformance("a plain-JS store with fencing tokens and onRelease", {
  makeStore: () => mapStore({ withIsHeldBy: true, withFencing: true, withOnRelease: true }),
  fencing: true,
  exactOwnership: true,
});
