// Drives a typed question's form on the /ui page in headless Chromium across two broker replicas. Run by
// tests/api/ui_forms.rs with BROKER_A (REST) and BROKER_B (the page). Prints one line per check and exits
// non-zero on the first failure.
import assert from "node:assert/strict";
import { A, B, check, launch, rest, shots, summary } from "./harness.mjs";

const form = {
  type: "object",
  properties: {
    decision: { type: "string", title: "Decision", oneOf: [{ const: "approve", title: "Approve" }, { const: "reject", title: "Reject" }] },
    replicas: { type: "integer", title: "Replicas", minimum: 1, maximum: 10, default: 3 },
    regions: { type: "array", title: "Regions", minItems: 1, items: { type: "string", enum: ["eu", "us", "ap"] } },
    notify: { type: "boolean", title: "Notify the team", default: true },
    note: { type: "string", title: "Note", maxLength: 80 },
  },
  required: ["decision", "replicas"],
};

async function ask(content, extra = {}) {
  const { status, body } = await rest("POST", `${A}/questions`, {
    sender: "ark://agents/deployer",
    recipient: "ark://users/dave",
    content,
    responseSchema: form,
    ...extra,
  });
  assert.equal(status, 201);
  return body;
}

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${B}/ui`);
  await page.waitForSelector("body[data-live=true]");

  let first;
  await check("a typed question asked on replica A arrives on B's page with its form, rendered by the server", async () => {
    first = await ask("Roll out build 9?");
    const card = page.locator(`#question-${first.id}`);
    await card.waitFor({ timeout: 10000 });
    assert.equal(await card.locator("input[name='field.decision']").count(), 2, "radio buttons for one of two");
    assert.equal(await card.locator("input[name='field.replicas']").inputValue(), "3", "the default filled in");
    assert.equal(await card.locator("input[name='field.regions']").count(), 3, "checkboxes for several");
    assert.ok(await card.locator("input[name='field.notify']").isChecked(), "the box ticked by its default");
    assert.equal(await card.locator("textarea[name=response]").count(), 0, "no text box");
    assert.equal(await card.locator("details.history li").count(), 1, "its history: asked");
  });

  await check("a multi-select left empty is refused by name, the card stays and keeps what was entered", async () => {
    const card = page.locator(`#question-${first.id}`);
    await card.getByLabel("Approve").check();
    await card.locator("input[name='field.replicas']").fill("4");
    await card.locator("button.send").click();
    const error = card.locator(".form-error");
    await error.waitFor({ state: "visible", timeout: 10000 });
    assert.match(await error.textContent(), /the broker answered 400: response\.regions: choose 1 to any number, got 0/);
    assert.equal(await card.locator("input[name='field.replicas']").inputValue(), "4");
    assert.ok(await card.locator("button.send").isEnabled(), "it can be sent again");
    const { body } = await rest("GET", `${A}/questions/${first.id}`);
    assert.equal(body.status, "pending");
  });

  await check("the typed form filled with JavaScript on is stored as the typed answer (read on A) and the card leaves", async () => {
    const card = page.locator(`#question-${first.id}`);
    await card.getByLabel("eu", { exact: true }).check();
    await card.getByLabel("ap", { exact: true }).check();
    await card.getByLabel("Notify the team").uncheck();
    await card.locator("input[name=answeredBy]").fill("dave");
    if (shots) await page.screenshot({ path: `${shots}/ui-typed.png`, fullPage: true });
    await card.locator("button.send").click();
    await card.waitFor({ state: "detached", timeout: 10000 });
    const { status, body } = await rest("GET", `${A}/questions/${first.id}`);
    assert.equal(status, 200);
    assert.equal(body.status, "answered");
    assert.deepEqual(body.response, { decision: "approve", replicas: 4, regions: ["eu", "ap"], notify: false });
    assert.equal(body.answeredBy, "dave");
  });

  await check("Decline with a reason declines it (read on A) without filling the form, and the card leaves", async () => {
    const second = await ask("Roll back build 8?");
    const card = page.locator(`#question-${second.id}`);
    await card.waitFor({ timeout: 10000 });
    await card.locator("details.decline summary").click();
    await card.locator("input[name=reason]").fill("not my service");
    await card.locator("input[name=answeredBy]").fill("dave");
    await card.locator("button.decline").click();
    await card.waitFor({ state: "detached", timeout: 10000 });
    const { body } = await rest("GET", `${A}/questions/${second.id}`);
    assert.equal(body.status, "declined");
    assert.equal(body.declineReason, "not my service");
    assert.equal(body.answeredBy, "dave");
  });

  await check("on a Query's page, a typed question raised live gets its typed form, which answers it", async () => {
    const name = `rollout-${Date.now()}`;
    const chunk = { choices: [{ index: 0, delta: { role: "assistant", content: "Checking." }, finish_reason: null }] };
    const streamed = await rest("POST", `${A}/stream/${name}`, `${JSON.stringify(chunk)}\n`, "application/x-ndjson");
    assert.equal(streamed.status, 200);
    const query = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    await query.goto(`${B}/ui/queries/team-a/${name}`);
    await query.waitForSelector("body[data-live=true]");
    const third = await ask("Roll out to prod?", { query: { namespace: "team-a", name } });
    const item = query.locator(`#question-${third.id}`);
    await item.locator("input[name='field.decision']").first().waitFor({ timeout: 10000 });
    assert.equal(await item.locator("input[name=back]").inputValue(), `/ui/queries/team-a/${name}`);
    await item.getByLabel("Reject").check();
    await item.getByLabel("us", { exact: true }).check();
    await item.locator("button.send").click();
    await item.locator(".outcome .status").waitFor({ timeout: 10000 });
    assert.equal(await item.locator(".outcome .status").textContent(), "answered");
    const { body } = await rest("GET", `${A}/questions/${third.id}`);
    assert.deepEqual(body.response, { decision: "reject", replicas: 3, regions: ["us"], notify: true });
  });
} finally {
  await browser.close();
}
summary();
