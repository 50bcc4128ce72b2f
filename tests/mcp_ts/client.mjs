#!/usr/bin/env node
// The official MCP TypeScript SDK's `Client` (@modelcontextprotocol/sdk, pinned in package.json) against three
// Ark Broker replicas over Streamable HTTP.
//
// On A: connect (the initialize handshake) must negotiate a version the broker serves, the newest the SDK speaks;
// tools/list has ask_question; a blocking `ask_question`, found over REST on C and answered with
// `POST /questions/{id}/answer` on B, returns that answer. A second client on C lists ask_question too.
//
// Environment:
//   MCP_A, MCP_B, MCP_C     MCP endpoints of three replicas, e.g. http://127.0.0.1:8081/mcp
//   REST_A, REST_B, REST_C  REST base URLs of the same replicas, e.g. http://127.0.0.1:8081
//   MCP_TEST_TIMEOUT        seconds any single wait may take (default 20)
//
// Prints `ok - <check>` per check and `N passed, 0 failed`; exits 1 at the first failure.

import { randomUUID } from "node:crypto";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";

import { CheckFailed, TIMEOUT_MS, env, expect, findPending, main, restCall, toolPayload, within } from "./common.mjs";

const RECIPIENT = "ark://users/dave";
// The versions the broker serves (src/mcp/server.rs' VERSIONS).
const BROKER_VERSIONS = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"];
async function connect(url, name) {
  const client = new Client({ name: `ark-broker-tests-${name}`, version: "0.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await within(`connect to ${url}`, client.connect(transport, { timeout: TIMEOUT_MS }));
  return { client, transport };
}

async function listsAskQuestion(client, where) {
  const listed = await within(`tools/list on ${where}`, client.listTools(undefined, { timeout: TIMEOUT_MS }));
  const names = listed.tools.map((t) => t.name).sort();
  expect(names.includes("ask_question"), `ask_question not listed on ${where}: ${JSON.stringify(names)}`);
}

async function run(report, open) {
  const [mcpA, , mcpC] = [env("MCP_A"), env("MCP_B"), env("MCP_C")];
  const [, restB, restC] = [env("REST_A"), env("REST_B"), env("REST_C")];

  report.start(`[A] connect negotiates ${LATEST_PROTOCOL_VERSION}, which the broker serves`);
  const a = await connect(mcpA, "a");
  open.push(a);
  const version = a.transport.protocolVersion;
  const server = a.client.getServerVersion();
  console.log(`# negotiated protocol version ${version} with ${server?.name} ${server?.version}`);
  expect(BROKER_VERSIONS.includes(version), `negotiated ${JSON.stringify(version)}, not one the broker serves`);
  expect(version === LATEST_PROTOCOL_VERSION, `negotiated ${version}, want the SDK's newest ${LATEST_PROTOCOL_VERSION}`);
  expect(server !== undefined, "no serverInfo after initialize");
  report.ok();

  report.start("[A] tools/list has ask_question");
  await listsAskQuestion(a.client, "A");
  report.ok();

  report.start("[A] blocking ask_question returns the answer given over REST on B (found on C)");
  const content = `client.mjs ${randomUUID()}`;
  const abort = new AbortController();
  let done = false;
  const call = a.client
    .callTool({ name: "ask_question", arguments: { recipient: RECIPIENT, content } }, undefined, {
      timeout: 3 * TIMEOUT_MS,
      signal: abort.signal,
    })
    .finally(() => {
      done = true;
    });
  call.catch(() => {}); // awaited below; a failure before then must not be an unhandled rejection
  let result, qid;
  try {
    const question = await findPending(restC, content);
    qid = question.id;
    if (done) {
      const outcome = await call.catch((e) => String(e));
      throw new CheckFailed(`tools/call returned before the question was answered: ${JSON.stringify(outcome)}`);
    }
    await restCall("POST", `${restB}/questions/${qid}/answer`, { response: "yes" });
    result = await within("the blocking tools/call to return", call);
  } finally {
    if (!done) abort.abort();
  }
  expect(!result.isError, `tools/call isError: ${JSON.stringify(result)}`);
  const payload = toolPayload(result);
  expect(payload.questionId === qid, `questionId ${JSON.stringify(payload.questionId)}, want ${JSON.stringify(qid)}`);
  expect(payload.response === "yes", `response ${JSON.stringify(payload.response)}, want "yes": ${JSON.stringify(payload)}`);
  report.ok();

  report.start("[C] a second client connects and tools/list has ask_question");
  const c = await connect(mcpC, "c");
  open.push(c);
  expect(c.transport.protocolVersion === version, `C negotiated ${c.transport.protocolVersion}, A ${version}`);
  await listsAskQuestion(c.client, "C");
  report.ok();
}

await main(run);
