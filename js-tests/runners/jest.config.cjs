// Jest's config for kit.jest.cjs (run by js-tests/runners.test.mjs): that file only, in
// Node, untransformed, as an application's CommonJS tests would run.
module.exports = {
  rootDir: __dirname,
  testMatch: ["<rootDir>/kit.jest.cjs"],
  testEnvironment: "node",
  transform: {},
  watchman: false,
};
