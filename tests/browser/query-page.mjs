// Drives a Query's page in headless Chromium across two broker replicas. Run by tests/api/query_page.rs with
// BROKER_A (the controller's writes, REST answers) and BROKER_B (the page). Prints one line per check and
// exits non-zero on the first failure.
import assert from "node:assert/strict";
import { A, B, check, launch, rest, shots, summary } from "./harness.mjs";

const NS = "team-a";
const NAME = `deploy-${Date.now()}`;

// The controller's writes: NDJSON lines to the Query's stream on replica A.
async function stream(...lines) {
  const ndjson = lines.map((line) => `${JSON.stringify(line)}\n`).join("");
  const { status } = await rest("POST", `${A}/stream/${NAME}`, ndjson, "application/x-ndjson");
  assert.equal(status, 200);
}

const chunk = (delta, finish = null) => ({ choices: [{ index: 0, delta, finish_reason: finish }] });

async function ask(content) {
  const { status, body } = await rest("POST", `${A}/questions`, {
    sender: "ark://agents/deployer",
    recipient: "ark://users/dave",
    content,
    query: { namespace: NS, name: NAME },
  });
  assert.equal(status, 201);
  return body;
}


const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(`${B}/ui/queries/${NS}/${NAME}`);
  await page.waitForSelector("body[data-live=true]");

  await check("text streamed on replica A appears on replica B's page as it streams", async () => {
    await stream(chunk({ role: "assistant", content: "I have prepared " }));
    await page.waitForFunction(() => document.querySelector("#timeline .text")?.textContent === "I have prepared ");
    await stream(chunk({ content: "the deployment." }));
    await page.waitForFunction(
      () => document.querySelector("#timeline .text")?.textContent === "I have prepared the deployment.",
    );
  });

  await check("a tool call shows as a badge with its name, then its duration, outcome and result", async () => {
    await stream(
      chunk({ tool_calls: [{ index: 0, id: "call_plan", type: "function", function: { name: "kubectl_diff", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"namespace":"prod"}' } }] }),
      chunk({}, "tool_calls"),
    );
    const tool = page.locator("#tool-call_plan");
    await tool.waitFor({ timeout: 10000 });
    assert.equal(await tool.locator(".tool-name").textContent(), "kubectl_diff");
    assert.equal(await tool.locator(".tool-status").textContent(), "running");
    await stream({ event: "tool_call_result", data: { tool_call_id: "call_plan", success: true, result: "3 changes", duration_ms: 1500 } });
    await page.waitForFunction(() => document.querySelector("#tool-call_plan .tool-status")?.textContent === "succeeded");
    assert.equal(await tool.locator(".duration").textContent(), "1.5 s");
    assert.equal(await tool.locator(".result").isVisible(), false, "results are collapsed");
    await tool.locator("summary").click();
    assert.equal(await tool.locator(".result").textContent(), "3 changes");
  });

  let question;
  await check("a question appears inline (Markdown rendered) with its form and the Query's phase turns waiting", async () => {
    question = await ask("**Deploy** to prod?");
    const card = page.locator(`#question-${question.id}`);
    await card.waitFor({ timeout: 10000 });
    // Markdown, rendered by the server (the same as on the questions page).
    await card.locator(".content strong").waitFor({ timeout: 10000 });
    assert.equal(await card.locator(".content").textContent(), "Deploy to prod?");
    await page.waitForFunction(() => document.getElementById("phase").textContent === "waiting");
    if (shots) await page.screenshot({ path: `${shots}/query-laptop.png`, fullPage: true });
  });

  await check("an answer given on replica A shows up on B's page within a second", async () => {
    // A second person has the page open without JavaScript, with the form.
    const noScript = await browser.newContext({ javaScriptEnabled: false });
    const other = await noScript.newPage();
    await other.goto(`${B}/ui/queries/${NS}/${NAME}`);
    await other.waitForSelector(`#question-${question.id} form.answer`);
    const { status } = await rest("POST", `${A}/questions/${question.id}/answer`, { response: "Yes, go", answeredBy: "erin" });
    assert.equal(status, 200);
    const started = Date.now();
    await page.waitForSelector(`#question-${question.id} .outcome .response`, { timeout: 5000 });
    const took = Date.now() - started;
    assert.ok(took < 1000, `the answer took ${took} ms to show`);
    assert.equal(await page.locator(`#question-${question.id} .by`).textContent(), "erin");
    assert.equal(await page.locator(`#question-${question.id} form`).count(), 0, "no form once answered");
    await page.waitForFunction(() => document.getElementById("phase").textContent === "running");
    // Their answer now loses the race: the page comes back saying so, showing the answer that won.
    await other.locator(`#question-${question.id} textarea[name=response]`).fill("No, wait");
    await Promise.all([other.waitForURL(/conflict=/), other.locator(`#question-${question.id} button.send`).click()]);
    assert.match(await other.locator(".flash.warn").textContent(), /already answered/);
    assert.equal(await other.locator(`#question-${question.id} .response`).textContent(), "Yes, go");
    await noScript.close();
  });

  await check("a question answered from the page is stored (read back on A) and the stream completes", async () => {
    const next = await ask("Also restart the workers?");
    const card = page.locator(`#question-${next.id}`);
    await card.locator("textarea[name=response]").fill("Yes");
    await card.locator("input[name=answeredBy]").fill("dave");
    await card.locator("button.send").click();
    await card.locator(".outcome .response").waitFor({ timeout: 10000 });
    const { body } = await rest("GET", `${A}/questions/${next.id}`);
    assert.equal(body.status, "answered");
    assert.equal(body.answeredBy, "dave");
    await stream({ choices: [], ark: { completedQuery: { metadata: { name: NAME }, status: { phase: "done" } } } });
    assert.equal((await rest("POST", `${A}/stream/${NAME}/complete`, {})).status, 200);
    await page.waitForSelector("body[data-live=ended]");
    assert.equal(await page.locator("#phase").textContent(), "completed");
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true });
    await phone.goto(`${B}/ui/queries/${NS}/${NAME}`);
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than the phone`);
    if (shots) await phone.screenshot({ path: `${shots}/query-phone.png`, fullPage: true });
  });
} finally {
  await browser.close();
}
summary();
