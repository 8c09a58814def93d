// Vitest's config for kit.vitest.mjs (run by js-tests/runners.test.mjs): that file only,
// in Node, twice. Vitest hands a package's files under node_modules to Node as they are,
// and runs other files through Vite's transforms; the package's own files here are
// outside node_modules, so one project marks them external, as an installed package's
// would be, and the other lets Vite transform them, as a package linked into a workspace
// would be. Vite's cache goes to the repository's node_modules.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

const kit = { include: ["kit.vitest.mjs"], environment: "node" };

export default defineConfig({
  root: import.meta.dirname,
  cacheDir: fileURLToPath(new URL("../../node_modules/.vite", import.meta.url)),
  test: {
    watch: false,
    projects: [
      { extends: true, test: { ...kit, name: "installed", server: { deps: { external: [/\/js\/.*\.mjs$/] } } } },
      { extends: true, test: { ...kit, name: "linked" } },
    ],
  },
});
