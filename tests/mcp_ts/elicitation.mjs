#!/usr/bin/env node
// `mcp:caller` with the official MCP TypeScript SDK's `Client` as the host, a scripted person at it, against three
// Ark Broker replicas. Its requests go round-robin over A, B and C (as a Service spreads them), so the call and the
// elicitation's reply reach different replicas. The SDK speaks 2025-11-25: `elicitation/create` arrives on the
// call's own response stream, and the reply is POSTed.
//
//   - a client that declares URL mode only is sent a link to the question's page: the person opens it, answers
//     there, and the call returns that answer; the broker then says the elicitation is complete;
//   - a form client answers a typed question in the form;
//   - while the person still looks at the form, an answer over REST wins: the broker withdraws the form (the
//     handler's signal is aborted) and the call returns the REST answer.
//
// Environment: MCP_A/B/C, REST_A/B/C as for client.mjs; MCP_TEST_TIMEOUT (default 20).

import { randomUUID } from "node:crypto";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, ElicitationCompleteNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

import { TIMEOUT_MS, env, expect, findPending, main, restCall, toolPayload, within } from "./common.mjs";

const RECIPIENT = "ark://users/dave";

/** A fetch that sends each request to the next replica's MCP endpoint. */
function roundRobin(urls) {
  let next = 0;
  return (input, init) => {
    const url = new URL(urls[next++ % urls.length]);
    return fetch(url, init);
  };
}

/** A connected client declaring `elicitation`, whose person answers with `person(params, extra)`. */
async function connect(urls, elicitation, person, open) {
  const client = new Client({ name: "ark-broker-tests-person", version: "0.0.0" }, { capabilities: { elicitation } });
  const seen = { asked: [], completed: [] };
  client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
    seen.asked.push(request.params);
    return person.reply(request.params, extra);
  });
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (notification) => {
    seen.completed.push(notification.params.elicitationId);
  });
  const transport = new StreamableHTTPClientTransport(new URL(urls[0]), { fetch: roundRobin(urls) });
  await within("connect", client.connect(transport, { timeout: TIMEOUT_MS }));
  open.push({ client });
  return { client, seen };
}

function ask(client, content, extra = {}) {
  const args = { recipient: RECIPIENT, content, channels: ["mcp:caller"], ...extra };
  return within(`ask_question ${content}`, client.callTool({ name: "ask_question", arguments: args }, undefined, {
    timeout: 5 * TIMEOUT_MS,
  }), 5 * TIMEOUT_MS);
}

async function answerOnPage(base, id, response) {
  const body = new URLSearchParams({ response });
  const reply = await within("the page's form", fetch(`${base}/ui/questions/${id}/answer`, {
    method: "POST", body, redirect: "manual",
  }));
  expect(reply.status === 303, `the page's answer: HTTP ${reply.status}`);
}

async function run(report, open) {
  const urls = [env("MCP_A"), env("MCP_B"), env("MCP_C")];
  const [restA, restB, restC] = [env("REST_A"), env("REST_B"), env("REST_C")];

  report.start("a URL-mode-only client is sent the question's page; the answer given there returns");
  const person = {};
  const linked = await connect(urls, { url: {} }, person, open);
  const content = `elicitation.mjs url ${randomUUID()}`;
  person.reply = async (params) => {
    expect(params.mode === "url", `mode ${params.mode}`);
    const id = params.elicitationId;
    expect(params.url.endsWith(`/ui/questions/${id}`), `url ${params.url}`);
    const page = await within("the question's page", fetch(params.url));
    const html = await page.text();
    expect(page.status === 200 && html.includes(content), `the page: HTTP ${page.status}`);
    await answerOnPage(restB, id, "answered on the page");
    return { action: "accept" };
  };
  const answered = toolPayload(await ask(linked.client, content));
  expect(answered.response === "answered on the page", `response ${JSON.stringify(answered)}`);
  const completed = Date.now() + TIMEOUT_MS;
  while (!linked.seen.completed.includes(answered.questionId) && Date.now() < completed) {
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(linked.seen.completed.includes(answered.questionId), "no notifications/elicitation/complete");
  report.ok();

  report.start("a form client answers a typed question in its form");
  const formPerson = {};
  const form = await connect(urls, { form: {} }, formPerson, open);
  const schema = { type: "object", properties: { region: { type: "string", enum: ["eu", "us"] } }, required: ["region"] };
  formPerson.reply = async (params) => {
    expect(params.mode === undefined || params.mode === "form", `mode ${params.mode}`);
    expect(JSON.stringify(params.requestedSchema) === JSON.stringify(schema), `schema ${JSON.stringify(params.requestedSchema)}`);
    return { action: "accept", content: { region: "eu" } };
  };
  const typed = toolPayload(await ask(form.client, `elicitation.mjs typed ${randomUUID()}`, { responseSchema: schema }));
  expect(JSON.stringify(typed.response) === JSON.stringify({ region: "eu" }), `response ${JSON.stringify(typed)}`);
  report.ok();

  report.start("an answer over REST wins while the person looks at the form, and the form is withdrawn");
  const raced = `elicitation.mjs race ${randomUUID()}`;
  let withdrawn;
  formPerson.reply = (params, extra) =>
    new Promise((resolve) => {
      withdrawn = new Promise((aborted) => extra.signal.addEventListener("abort", () => aborted(true)));
      setTimeout(() => resolve({ action: "accept", content: { region: "us" } }), 10 * TIMEOUT_MS).unref();
    });
  const call = ask(form.client, raced, { responseSchema: schema });
  const question = await findPending(restC, raced);
  await restCall("POST", `${restA}/questions/${question.id}/answer`, { response: { region: "eu" } });
  const won = toolPayload(await call);
  expect(won.response.region === "eu", `response ${JSON.stringify(won)}`);
  expect(await within("the form withdrawn", withdrawn), "the handler's signal was not aborted");
  report.ok();
}

await main(run);
