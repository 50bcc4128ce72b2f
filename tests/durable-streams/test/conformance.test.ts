// The Durable Streams server conformance suite, every group (subscriptions included), against the broker at
// DS_BASE_URL (a round-robin proxy over several replicas in CI); DS_LONG_POLL_MS is the replicas'
// `--durable-long-poll-ms`, which the suite's long-poll tests wait out.
import { describe } from "vitest"
import { runConformanceTests } from "@durable-streams/server-conformance-tests"

const baseUrl = process.env.DS_BASE_URL
if (!baseUrl) throw new Error("DS_BASE_URL must name the broker (no trailing slash)")

describe("Ark Broker", () => {
  runConformanceTests({
    baseUrl,
    longPollTimeoutMs: Number(process.env.DS_LONG_POLL_MS ?? "1000"),
    // The reserved subscription APIs run unless DS_SUBSCRIPTIONS=false.
    subscriptions: process.env.DS_SUBSCRIPTIONS !== "false",
  })
})
