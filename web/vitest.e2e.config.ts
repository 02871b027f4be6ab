import { defineConfig } from "vitest/config";

// The browser tests: node, not jsdom (they drive a real Chromium), one file at a time, with
// deadlines for a busy machine.
export default defineConfig({
  test: { include: ["e2e/**/*.e2e.ts"], environment: "node", globals: true, testTimeout: 120000, hookTimeout: 120000, fileParallelism: false },
});
