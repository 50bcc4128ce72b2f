// Drives the /ui page in headless Chromium across two broker replicas. Run by tests/api/ui.rs with
// BROKER_A (REST) and BROKER_B (the page); SCREENSHOT_DIR, when set, receives laptop and phone screenshots.
// Prints one line per check and exits non-zero on the first failure.
import assert from "node:assert/strict";
import { A, B, check, launch, rest, shots, summary } from "./harness.mjs";

const laptop = { width: 1280, height: 800 };

async function ask(content, extra = {}) {
  const { status, body } = await rest("POST", `${A}/questions`, {
    sender: "ark://agents/reviewer",
    recipient: "ark://users/dave",
    content,
    query: { namespace: "team-a", name: "review-42" },
    ...extra,
  });
  assert.equal(status, 201);
  return body;
}

// Matches the REST answer request of one question (the page's JavaScript path).
const answerOf = (id) => (url) => url.pathname === `/questions/${id}/answer`;

const browser = await launch();
try {
  const live = await browser.newPage({ viewport: laptop });
  await live.goto(`${B}/ui`);
  await live.waitForSelector("body[data-live=true]");

  let first;
  await check("a question created on replica A appears on replica B's page without a reload, announced and counted", async () => {
    first = await ask("Merge PR #42 into main?");
    const card = live.locator(`#question-${first.id}`);
    await card.waitFor({ timeout: 10000 });
    assert.equal(await card.locator(".content").textContent(), "Merge PR #42 into main?");
    assert.equal(await card.locator(".query").textContent(), "team-a/review-42");
    assert.equal(await live.locator("#pending-count").textContent(), "1");
    assert.equal(await live.title(), "(1) Questions · Ark Broker");
    assert.equal(await live.locator("#announcer").getAttribute("aria-live"), "polite");
    assert.equal(await live.locator("#announcer").textContent(), "New question from reviewer (agent): Merge PR #42 into main?");
  });

  await check("senders and recipients have friendly names, the full address on hover", async () => {
    const card = live.locator(`#question-${first.id}`);
    assert.equal(await card.locator(".sender").textContent(), "reviewer (agent)");
    assert.equal(await card.locator(".sender").getAttribute("title"), "ark://agents/reviewer");
    assert.equal(await card.locator(".recipient").textContent(), "dave (user)");
    assert.equal(await card.locator(".recipient").getAttribute("title"), "ark://users/dave");
  });

  if (shots) {
    await live.screenshot({ path: `${shots}/ui-laptop.png`, fullPage: true });
  }

  await check("answering from the page stores the answer (read back on replica A) and the card leaves", async () => {
    const card = live.locator(`#question-${first.id}`);
    await card.locator("textarea[name=response]").fill("Yes, merge it");
    await card.locator("input[name=answeredBy]").fill("dave");
    await card.locator("button.send").click();
    await card.waitFor({ state: "detached", timeout: 10000 });
    const { status, body } = await rest("GET", `${A}/questions/${first.id}`);
    assert.equal(status, 200);
    assert.equal(body.status, "answered");
    assert.equal(body.response, "Yes, merge it");
    assert.equal(body.answeredBy, "dave");
    assert.ok(await live.locator("#empty").isVisible(), "the empty state shows again");
    assert.equal(await live.title(), "(0) Questions · Ark Broker");
  });

  await check("a question answered elsewhere leaves the page without a reload", async () => {
    const other = await ask("Rotate the API keys?");
    const card = live.locator(`#question-${other.id}`);
    await card.waitFor({ timeout: 10000 });
    const { status } = await rest("PATCH", `${A}/questions/${other.id}`, { response: "done" });
    assert.equal(status, 200);
    await card.waitFor({ state: "detached", timeout: 10000 });
  });

  await check("a card answered elsewhere while someone types in it stays, marked answered by whom and what, text kept", async () => {
    const question = await ask("Restart the ingest workers?");
    const card = live.locator(`#question-${question.id}`);
    await card.waitFor({ timeout: 10000 });
    await card.locator("textarea[name=response]").fill("Yes, but only after");
    const { status } = await rest("PATCH", `${A}/questions/${question.id}`, { response: "Already done", answeredBy: "erin" });
    assert.equal(status, 200);
    await card.locator(".outcome .by").waitFor({ timeout: 10000 });
    assert.equal(await card.locator(".outcome .by").textContent(), "erin");
    assert.equal(await card.locator(".outcome .status").textContent(), "answered");
    assert.equal(await card.locator(".outcome .response").textContent(), "Already done");
    assert.equal(await card.locator("textarea[name=response]").inputValue(), "Yes, but only after");
    assert.ok(await card.locator("button.send").isDisabled(), "it can no longer be sent");
    assert.equal(await live.locator("#pending-count").textContent(), "0");
    await card.locator("button.dismiss").click();
    await card.waitFor({ state: "detached" });
  });

  await check("an answer that loses the race (a real 409 from replica B after A stored erin's) says who answered first and what", async () => {
    const question = await ask("Approve the release notes?");
    const card = live.locator(`#question-${question.id}`);
    await card.waitFor({ timeout: 10000 });
    await card.locator("textarea[name=response]").fill("Approved with edits");
    // erin answers on replica A while this page's answer is on its way to replica B.
    const answering = answerOf(question.id);
    await live.route(answering, async (route) => {
      await rest("PATCH", `${A}/questions/${question.id}`, { response: "Approved", answeredBy: "erin" });
      await route.continue();
    });
    const reply = live.waitForResponse((response) => answering(new URL(response.url())));
    await card.locator("button.send").click();
    assert.equal((await reply).status(), 409);
    const error = card.locator(".form-error");
    await error.waitFor({ state: "visible" });
    assert.equal(await error.textContent(), "Your answer was not stored: erin answered first: “Approved”.");
    assert.equal(await card.locator(".outcome .by").textContent(), "erin");
    assert.equal(await card.locator("textarea[name=response]").inputValue(), "Approved with edits");
    if (shots) await card.screenshot({ path: `${shots}/ui-lost-race.png` });
    await live.unroute(answering);
    await card.locator("button.dismiss").click();
  });

  await check("an answer that cannot be sent says so, keeps the text, and goes once it can", async () => {
    const question = await ask("Bump the chart version?");
    const card = live.locator(`#question-${question.id}`);
    await card.waitFor({ timeout: 10000 });
    await card.locator("textarea[name=response]").fill("Yes, to 1.4.0");
    const answering = answerOf(question.id);
    await live.route(answering, (route) => route.abort("connectionrefused"));
    await card.locator("button.send").click();
    const error = card.locator(".form-error");
    await error.waitFor({ state: "visible" });
    assert.match(await error.textContent(), /^Your answer was not sent: the broker could not be reached\. Your text is kept/);
    assert.equal(await card.locator("textarea[name=response]").inputValue(), "Yes, to 1.4.0");
    await live.unroute(answering);
    await card.locator("button.send").click();
    await card.waitFor({ state: "detached", timeout: 10000 });
    assert.equal((await rest("GET", `${A}/questions/${question.id}`)).body.response, "Yes, to 1.4.0");
  });

  await check("a question's Slack delivery shows as sending, then delivered with its link, without a reload", async () => {
    const body = await ask("Page the on-call?", { query: undefined, channels: ["slack:#ops"] });
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
    await Promise.all([page.waitForURL(/\/ui\?answered=/), card.locator("button.send").click()]);
    assert.match(await page.locator(".flash.ok").textContent(), new RegExp(question.id));
    assert.equal(await page.locator(`#question-${question.id}`).count(), 0, "the answered question is gone");
    const { body } = await rest("GET", `${A}/questions/${question.id}`);
    assert.equal(body.status, "answered");
    assert.equal(body.response, "No, 3 is enough");
    await context.close();
  });

  await check("markdown is rendered safely, live and on reload: links clickable, a <script> shown as text and never run", async () => {
    const question = await ask(
      "**Deploy** `v2` to prod?\n\n- runbook: https://example.com/runbook\n- [the PR](https://github.com/o/r/pull/7)\n\n" +
        '<script>window.pwned = true</script>\n\n<img src="x" onerror="window.pwned = true">',
    );
    for (const reload of [false, true]) {
      if (reload) await live.reload();
      const content = live.locator(`#question-${question.id} .content`);
      await content.waitFor({ timeout: 10000 });
      assert.equal(await content.locator("strong").textContent(), "Deploy");
      assert.equal(await content.locator("code").textContent(), "v2");
      const links = content.locator("a");
      assert.equal(await links.count(), 2);
      assert.equal(await links.nth(0).getAttribute("href"), "https://example.com/runbook");
      assert.equal(await links.nth(1).getAttribute("href"), "https://github.com/o/r/pull/7");
      for (const i of [0, 1]) assert.equal(await links.nth(i).getAttribute("rel"), "noopener nofollow");
      assert.equal(await content.locator("script, img").count(), 0);
      assert.match(await content.textContent(), /<script>window\.pwned = true<\/script>/);
      assert.equal(await live.evaluate(() => window.pwned), undefined, "nothing ran");
    }
    await live.waitForSelector("body[data-live=true]");
    await rest("DELETE", `${A}/questions/${question.id}`);
  });

  await check("the Closed tab shows when and by whom each question was answered or cancelled, and is live", async () => {
    const page = await browser.newPage({ viewport: laptop });
    await page.goto(`${B}/ui?view=closed`);
    await page.waitForSelector("body[data-live=true]");
    const old = page.locator(`#question-${first.id}`);
    assert.equal(await old.locator(".status").textContent(), "answered");
    assert.equal(await old.locator(".by").textContent(), "dave");
    assert.equal(await old.locator(".response").textContent(), "Yes, merge it");
    assert.ok(await old.locator("time.closed-at").getAttribute("datetime"));
    const answered = await ask("Tag the release?");
    const cancelled = await ask("Drop the old index?");
    await rest("PATCH", `${A}/questions/${answered.id}`, { response: "Tagged v2.0.0", answeredBy: "erin" });
    await rest("DELETE", `${A}/questions/${cancelled.id}`);
    await page.locator(`#question-${cancelled.id}`).waitFor({ timeout: 10000 });
    assert.equal(await page.locator("#closed > li").first().getAttribute("id"), `question-${cancelled.id}`, "newest first");
    assert.equal(await page.locator(`#question-${cancelled.id} .status`).textContent(), "cancelled");
    const card = page.locator(`#question-${answered.id}`);
    assert.equal(await card.locator(".by").textContent(), "erin");
    assert.equal(await card.locator(".response").textContent(), "Tagged v2.0.0");
    assert.equal(await card.locator("time.closed-at").textContent(), "just now");
    if (shots) await page.screenshot({ path: `${shots}/ui-closed.png`, fullPage: true });
    await page.close();
  });

  await check("an offline banner shows while the live connection is refused, and goes once it is back", async () => {
    const page = await browser.newPage({ viewport: laptop });
    const watch = (url) => url.pathname === "/questions" && url.searchParams.get("watch") === "true";
    await page.route(watch, (route) => route.fulfill({ status: 503, contentType: "application/json", body: "{}" }));
    await page.goto(`${B}/ui`);
    const banner = page.locator("#connection");
    await banner.waitFor({ state: "visible", timeout: 10000 });
    assert.equal(await banner.textContent(), "Offline — reconnecting…");
    await page.unroute(watch);
    await banner.waitFor({ state: "hidden", timeout: 15000 });
    await page.waitForSelector("body[data-live=true]");
    await page.close();
  });

  await check("the page fits a phone screen without sideways scrolling", async () => {
    await ask("A question with a rather long text that has to wrap nicely on a small phone screen, right?");
    await ask(`Long lines: \`${"x".repeat(120)}\` and https://example.com/${"a".repeat(120)}\n\n\`\`\`\n${"y".repeat(200)}\n\`\`\``);
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true });
    await phone.goto(`${B}/ui`);
    await phone.locator("details.filters summary").click();
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than the phone`);
    if (shots) await phone.screenshot({ path: `${shots}/ui-phone.png`, fullPage: true });
  });
} finally {
  await browser.close();
}
summary();
