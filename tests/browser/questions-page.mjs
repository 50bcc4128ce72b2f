// Drives the /ui page in headless Chromium across two broker replicas. Run by tests/api/ui.rs with
// BROKER_A (REST) and BROKER_B (the page); SCREENSHOT_DIR, when set, receives laptop and phone screenshots.
// Prints one line per check and exits non-zero on the first failure.
import assert from "node:assert/strict";
import { A, B, check, launch, rest, shots, summary } from "./harness.mjs";



async function ask(content) {
  const { status, body } = await rest("POST", `${A}/questions`, {
    sender: "ark://agents/reviewer",
    recipient: "ark://users/dave",
    content,
    query: { namespace: "team-a", name: "review-42" },
  });
  assert.equal(status, 201);
  return body;
}


const browser = await launch();
try {
  const live = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await live.goto(`${B}/ui`);
  await live.waitForSelector("body[data-live=true]");

  let first;
  await check("a question created on replica A appears on replica B's page without a reload", async () => {
    first = await ask("Merge PR #42 into main?");
    const card = live.locator(`#question-${first.id}`);
    await card.waitFor({ timeout: 10000 });
    assert.equal(await card.locator(".content").textContent(), "Merge PR #42 into main?");
    assert.equal(await card.locator(".query").textContent(), "team-a/review-42");
    assert.equal(await live.locator("#pending-count").textContent(), "1");
  });

  if (shots) {
    await live.screenshot({ path: `${shots}/ui-laptop.png`, fullPage: true });
  }

  await check("answering from the page stores the answer (read back on replica A) and the card leaves", async () => {
    const card = live.locator(`#question-${first.id}`);
    await card.locator("textarea[name=response]").fill("Yes, merge it");
    await card.locator("input[name=answeredBy]").fill("dave");
    await card.locator("button[type=submit]").click();
    await card.waitFor({ state: "detached", timeout: 10000 });
    const { status, body } = await rest("GET", `${A}/questions/${first.id}`);
    assert.equal(status, 200);
    assert.equal(body.status, "answered");
    assert.equal(body.response, "Yes, merge it");
    assert.equal(body.answeredBy, "dave");
    assert.ok(await live.locator("#empty").isVisible(), "the empty state shows again");
  });

  await check("a question answered elsewhere leaves the page without a reload", async () => {
    const other = await ask("Rotate the API keys?");
    const card = live.locator(`#question-${other.id}`);
    await card.waitFor({ timeout: 10000 });
    const { status } = await rest("PATCH", `${A}/questions/${other.id}`, { response: "done" });
    assert.equal(status, 200);
    await card.waitFor({ state: "detached", timeout: 10000 });
  });

  await check("a question's Slack delivery shows as sending, then delivered with its link, without a reload", async () => {
    const { status, body } = await rest("POST", `${A}/questions`, {
      sender: "ark://agents/reviewer",
      recipient: "ark://users/dave",
      content: "Page the on-call?",
      channels: ["slack:#ops"],
    });
    assert.equal(status, 201);
    const card = live.locator(`#question-${body.id}`);
    await card.waitFor({ timeout: 10000 });
    // Created with the delivery pending; delivered is only ever learnt from the watch's question_updated.
    const delivered = card.locator("a.channel.delivered");
    await delivered.waitFor({ timeout: 10000 });
    assert.equal(await delivered.textContent(), "slack:#ops · delivered");
    assert.match(await delivered.getAttribute("href"), /^http:\/\/127\.0\.0\.1:\d+\/archives\/C0FAKECHAN\/p\d+$/);
    await rest("DELETE", `${A}/questions/${body.id}`);
    await card.waitFor({ state: "detached", timeout: 10000 });
  });

  await check("without JavaScript the form posts, redirects back, and the answer is stored", async () => {
    const question = await ask("Scale the cluster to 5 nodes?");
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto(`${B}/ui`);
    const card = page.locator(`#question-${question.id}`);
    await card.locator("textarea[name=response]").fill("No, 3 is enough");
    await Promise.all([page.waitForURL(/\/ui\?answered=/), card.locator("button[type=submit]").click()]);
    assert.match(await page.locator(".flash.ok").textContent(), new RegExp(question.id));
    assert.equal(await page.locator(`#question-${question.id}`).count(), 0, "the answered question is gone");
    const { body } = await rest("GET", `${A}/questions/${question.id}`);
    assert.equal(body.status, "answered");
    assert.equal(body.response, "No, 3 is enough");
    await context.close();
  });

  await check("answered questions are listed on the second tab", async () => {
    await live.goto(`${B}/ui?view=closed`);
    const card = live.locator(`#question-${first.id}`);
    assert.equal(await card.locator(".status").textContent(), "answered");
    assert.equal(await card.locator(".response").textContent(), "Yes, merge it");
  });

  await check("the page fits a phone screen without sideways scrolling", async () => {
    await ask("A question with a rather long text that has to wrap nicely on a small phone screen, right?");
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true });
    await phone.goto(`${B}/ui`);
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than the phone`);
    if (shots) await phone.screenshot({ path: `${shots}/ui-phone.png`, fullPage: true });
  });
} finally {
  await browser.close();
}
summary();
