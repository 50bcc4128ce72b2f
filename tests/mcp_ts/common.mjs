// Helpers the TypeScript SDK scenarios share: checks, bounded waits, the REST calls, and the report.

import { McpError } from "@modelcontextprotocol/sdk/types.js";

export const TIMEOUT_S = Number(process.env.MCP_TEST_TIMEOUT ?? "20");
export const TIMEOUT_MS = TIMEOUT_S * 1000;

export class CheckFailed extends Error {}

export function env(name) {
  const value = (process.env[name] ?? "").trim();
  if (!value) throw new CheckFailed(`environment variable ${name} is not set`);
  return value.replace(/\/+$/, "");
}

export function expect(cond, message) {
  if (!cond) throw new CheckFailed(message);
}

/** `promise`, failing with a clear message after `ms`. */
export async function within(what, promise, ms = TIMEOUT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CheckFailed(`timed out after ${ms / 1000}s waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** structuredContent, or else the first text content block that parses as a JSON object. */
export function toolPayload(result) {
  const structured = result.structuredContent;
  if (structured && typeof structured === "object" && !Array.isArray(structured)) return structured;
  for (const block of result.content ?? []) {
    if (block.type !== "text") continue;
    let value;
    try {
      value = JSON.parse(block.text);
    } catch {
      continue;
    }
    if (value && typeof value === "object" && !Array.isArray(value)) return value;
  }
  throw new CheckFailed(`tool result has neither structured content nor JSON text content: ${JSON.stringify(result)}`);
}

export async function restCall(method, url, body) {
  const init = { method, signal: AbortSignal.timeout(TIMEOUT_MS) };
  if (body !== undefined) {
    init.headers = { "content-type": "application/json" };
    init.body = JSON.stringify(body);
  }
  const response = await within(`${method} ${url}`, fetch(url, init));
  const text = await within(`${method} ${url}'s body`, response.text());
  expect(response.status === 200, `${method} ${url}: HTTP ${response.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

/** The pending question whose content is `content`, polling briefly in case it is not visible yet. */
export async function findPending(base, content) {
  const url = `${base}/questions?status=pending`;
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    const list = await restCall("GET", url);
    expect(Array.isArray(list.items), `GET ${url}: no items list: ${JSON.stringify(list).slice(0, 300)}`);
    const found = list.items.filter((q) => q.content === content);
    expect(found.length <= 1, `${found.length} questions with content ${JSON.stringify(content)}`);
    if (found.length === 1) return found[0];
    if (Date.now() > deadline) {
      throw new CheckFailed(`timed out after ${TIMEOUT_S}s waiting for question ${JSON.stringify(content)} in GET ${url}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

export class Reporter {
  passed = 0;
  current = null;
  start(name) {
    this.current = name;
  }
  ok() {
    console.log(`ok - ${this.current}`);
    this.passed += 1;
    this.current = null;
  }
}

/** Runs `run(report, open)`, closes the clients it opened, prints the report and exits with its status. */
export async function main(run) {
  const report = new Reporter();
  const open = [];
  let failed = false;
  try {
    await run(report, open);
  } catch (error) {
    failed = true;
    console.log(`not ok - ${report.current ?? "setup"}`);
    if (error instanceof CheckFailed) console.error(`  error: ${error.message}`);
    else if (error instanceof McpError) console.error(`  MCP error ${error.code}: ${error.message} (data: ${JSON.stringify(error.data)})`);
    else console.error(error?.stack ?? String(error));
  }
  for (const { client } of open) await within("client.close()", client.close()).catch(() => {});
  if (failed) {
    console.log(`${report.passed} passed, 1 failed`);
    process.exit(1);
  }
  console.log(`${report.passed} passed, 0 failed`);
  process.exit(0);
}
