import { defineConfig } from "vitest/config"

// The suite's own timeouts (vitest's defaults, and the long-poll ones it derives from DS_LONG_POLL_MS).
export default defineConfig({ test: { include: ["test/**/*.test.ts"] } })
