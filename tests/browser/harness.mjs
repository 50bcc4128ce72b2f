// What every browser scenario shares: the two replicas' URLs, REST calls, numbered checks, and Debian's
// headless Chromium through playwright-core.
import { chromium } from "playwright-core";
import assert from "node:assert/strict";
import { createInterface } from "node:readline";

export const A = process.env.BROKER_A;
export const B = process.env.BROKER_B;
export const shots = process.env.SCREENSHOT_DIR;
assert.ok(A && B, "BROKER_A and BROKER_B must be set");

/// A REST call with a JSON body (or a string body of `type`); the reply's status and parsed body.
export async function rest(method, url, body, type = "application/json") {
  const reply = await fetch(url, {
    method,
    headers: body === undefined ? {} : { "content-type": type },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await reply.text();
  return { status: reply.status, body: text ? JSON.parse(text) : null };
}

let passed = 0;

/// Runs one named check; a failure throws and ends the scenario.
export async function check(name, fn) {
  await fn();
  passed += 1;
  console.log(`ok - ${name}`);
}

/// Prints the summary line the Rust test looks for.
export function summary() {
  console.log(`${passed} passed, 0 failed`);
  // An open stdin (see `cluster`) would keep node running.
  lines?.close();
}

export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
  });
}

let lines;
let replies;

/// Asks the Rust test driving this scenario to do something to the cluster (`stop-database`,
/// `start-database`, `kill-b`): prints `@@ <what>` and waits for its line on stdin saying it is done.
export async function cluster(what) {
  lines ??= createInterface({ input: process.stdin });
  replies ??= lines[Symbol.asyncIterator]();
  console.log(`@@ ${what}`);
  const { value, done } = await replies.next();
  assert.ok(!done && value === "done", `the test did not do ${what}: ${value}`);
}
