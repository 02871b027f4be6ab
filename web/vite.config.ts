import { defineConfig } from "vitest/config";
import react from "@vitejs/plugin-react";

// The dashboard is served by hangar itself at /, next to the API under /rpc and /api, so the
// dev server (npm run dev) proxies those to a running `hangar dev`.
const api = process.env.HANGAR_URL ?? "http://127.0.0.1:8080";

export default defineConfig({
  plugins: [react()],
  build: { outDir: "dist", emptyOutDir: false, sourcemap: false },
  server: { proxy: { "/rpc": api, "/api": api } },
  test: { environment: "jsdom", globals: true, setupFiles: ["src/test-setup.ts"], testTimeout: 30000 },
});
