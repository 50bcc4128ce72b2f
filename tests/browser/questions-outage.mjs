// Drives the /ui page in headless Chromium through real outages: the database stopped and started again,
// then replica B (which serves the page) killed. Run by tests/api/ui.rs, which does what `cluster()` asks,
// with BROKER_A (REST) and BROKER_B (the page). Prints one line per check and exits non-zero on the first
// failure.
import assert from "node:assert/strict";
import { A, B, check, cluster, launch, rest, shots, summary } from "./harness.mjs";

async function ask(content) {
  const { status, body } = await rest("POST", `${A}/questions`, {
    sender: "ark://agents/deployer",
    recipient: "ark://users/dave",
    content,
  });
  assert.equal(status, 201);
  return body;
}

const browser = await launch();
try {
  const rollback = await ask("Roll back the release?");
  const freeze = await ask("Freeze deploys for the weekend?");
  const live = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await live.goto(`${B}/ui`);
  await live.waitForSelector("body[data-live=true]");
  const card = live.locator(`#question-${rollback.id}`);
  await card.locator("textarea[name=response]").fill("Yes, roll back to 1.3");
  // A second person, without JavaScript, has typed an answer too.
  const noScript = await browser.newContext({ javaScriptEnabled: false });
  const plain = await noScript.newPage();
  await plain.goto(`${B}/ui`);
  await plain.locator(`#question-${freeze.id} textarea[name=response]`).fill("No, we ship on Saturday");
  await plain.locator(`#question-${freeze.id} input[name=answeredBy]`).fill("erin");

  await cluster("stop-database");

  await check("with the database down past the ride-through window, an answer from the page gets a real 503: it says so and keeps the text", async () => {
    const reply = live.waitForResponse((response) => response.url().endsWith(`/questions/${rollback.id}/answer`));
    await card.locator("button.send").click();
    assert.equal((await reply).status(), 503);
    const error = card.locator(".form-error");
    await error.waitFor({ state: "visible" });
    assert.match(await error.textContent(), /^Your answer was not sent: the broker is unavailable right now \(503\)\. Your text is kept/);
    assert.equal(await card.locator("textarea[name=response]").inputValue(), "Yes, roll back to 1.3");
    assert.ok(await card.locator("button.send").isEnabled(), "it can be sent again");
  });

  await check("with the database down past the ride-through window, the page and the form post are HTML error pages (never JSON), the post's text offered again", async () => {
    const other = await browser.newPage();
    const reply = await other.goto(`${B}/ui`);
    assert.equal(reply.status(), 503);
    assert.match(reply.headers()["content-type"], /^text\/html/);
    assert.equal(await other.locator("h1").textContent(), "The broker is unavailable right now");
    assert.ok(!(await other.locator("body").textContent()).includes('"error"'), "no JSON body");
    if (shots) await other.screenshot({ path: `${shots}/ui-database-down.png` });
    await other.close();
    const [response] = await Promise.all([
      plain.waitForResponse((r) => r.url().endsWith(`/ui/questions/${freeze.id}/answer`)),
      plain.locator(`#question-${freeze.id} button.send`).click(),
    ]);
    assert.equal(response.status(), 503);
    assert.match(response.headers()["content-type"], /^text\/html/);
    await plain.waitForSelector(".unsent");
    assert.match(await plain.locator(".unsent").textContent(), /was not stored/);
    assert.equal(await plain.locator(".unsent textarea[name=response]").inputValue(), "No, we ship on Saturday");
    assert.equal(await plain.locator(".unsent input[name=answeredBy]").inputValue(), "erin");
    if (shots) await plain.screenshot({ path: `${shots}/ui-answer-not-stored.png` });
  });

  await cluster("start-database");

  await check("once the database is back, the kept answers are sent, from the page and from the error page", async () => {
    await card.locator("button.send").click();
    await card.waitFor({ state: "detached", timeout: 10000 });
    assert.equal((await rest("GET", `${A}/questions/${rollback.id}`)).body.response, "Yes, roll back to 1.3");
    await Promise.all([plain.waitForURL(/\/ui\?answered=/), plain.locator(".unsent button.send").click()]);
    const { body } = await rest("GET", `${A}/questions/${freeze.id}`);
    assert.equal(body.response, "No, we ship on Saturday");
    assert.equal(body.answeredBy, "erin");
    await noScript.close();
  });

  await check("when the replica serving the page goes down, an offline banner shows and typed text stays", async () => {
    const next = await ask("Promote the canary?");
    const typed = live.locator(`#question-${next.id}`);
    await typed.waitFor({ timeout: 10000 });
    await typed.locator("textarea[name=response]").fill("Not yet");
    assert.ok(await live.locator("#connection").isHidden());
    await cluster("kill-b");
    await live.locator("#connection").waitFor({ state: "visible", timeout: 10000 });
    assert.equal(await live.locator("#connection").textContent(), "Offline — reconnecting…");
    assert.equal(await typed.locator("textarea[name=response]").inputValue(), "Not yet");
    if (shots) await live.screenshot({ path: `${shots}/ui-offline.png` });
  });
} finally {
  await browser.close();
}
summary();
