import { defineConfig } from "vitest/config"

// The suite's cases keep their own timeouts where they set one. The default one (5 s) bounds cases that make
// hundreds of sequential requests (the fast-check properties: 25 runs of up to 16 appends), which on a
// 2-core CI machine running PostgreSQL, three debug-built replicas and the proxy take 3–6 s: 30 s still
// catches a hang without failing a correct server on a busy machine.
export default defineConfig({ test: { include: ["test/**/*.test.ts"], testTimeout: 30_000 } })
