// Drives the /ui page's search box, filters and paging in headless Chromium across two broker replicas (with
// and without JavaScript). Run by tests/api/ui.rs with BROKER_A (REST) and BROKER_B (the page). Prints one line
// per check and exits non-zero on the first failure.
import assert from "node:assert/strict";
import { A, B, check, launch, rest, shots, summary } from "./harness.mjs";

const laptop = { width: 1280, height: 800 };

async function ask(content, sender, recipient, query) {
  const { status, body } = await rest("POST", `${A}/questions`, { sender, recipient, content, query });
  assert.equal(status, 201);
  return body;
}

// The ids of the cards a page lists, in order.
const listed = (page) => page.locator("#pending > li").evaluateAll((cards) => cards.map((card) => card.dataset.id));

const certs = await ask("Rotate the TLS certificates?", "ark://agents/security", "ark://users/erin", { namespace: "team-b", name: "certs" });
const wildcard = await ask("Renew the tls wildcard?", "ark://agents/security", "ark://teams/sre");
const scale = await ask("Scale the workers?", "ark://agents/scaler", "ark://users/erin", { namespace: "team-b", name: "scale" });

const browser = await launch();
try {
  await check("the search box finds questions by their text, ignoring case, with and without JavaScript", async () => {
    for (const javaScriptEnabled of [true, false]) {
      const context = await browser.newContext({ javaScriptEnabled, viewport: laptop });
      const page = await context.newPage();
      await page.goto(`${B}/ui`);
      assert.equal((await listed(page)).length, 3);
      await page.locator("input[name=q]").fill("TLS");
      await Promise.all([page.waitForURL(/\/ui\?q=TLS&/), page.locator("form.search button[type=submit]").click()]);
      assert.deepEqual(await listed(page), [certs.id, wildcard.id]);
      assert.equal(await page.locator("input[name=q]").inputValue(), "TLS", "the box keeps the search");
      assert.equal(await page.locator("#pending-count").textContent(), "2");
      await Promise.all([page.waitForURL(`${B}/ui`), page.locator("a.clear").click()]);
      assert.equal((await listed(page)).length, 3);
      await context.close();
    }
  });

  let page;
  await check("filters by recipient, sender and Query narrow the list, and a name on a card filters by it", async () => {
    page = await browser.newPage({ viewport: laptop });
    await page.goto(`${B}/ui`);
    await page.locator("details.filters summary").click();
    await page.locator("input[name=recipient]").fill("ark://users/erin");
    await Promise.all([page.waitForURL(/recipient=ark/), page.locator("input[name=recipient]").press("Enter")]);
    assert.deepEqual(await listed(page), [certs.id, scale.id]);
    assert.ok(await page.locator("details.filters").getAttribute("open") !== null, "the filters stay open while used");
    await page.locator("input[name=query]").fill("team-b/certs");
    await Promise.all([page.waitForURL(/query=team-b%2Fcerts/), page.locator("input[name=query]").press("Enter")]);
    assert.deepEqual(await listed(page), [certs.id]);
    await page.locator("input[name=query]").fill("scale");
    await Promise.all([page.waitForURL(/query=scale/), page.locator("input[name=query]").press("Enter")]);
    assert.deepEqual(await listed(page), [scale.id]);
    await page.goto(`${B}/ui`);
    await Promise.all([page.waitForURL(/sender=ark%3A%2F%2Fagents%2Fsecurity/), page.locator(`#question-${certs.id} .sender`).click()]);
    assert.deepEqual(await listed(page), [certs.id, wildcard.id]);
    assert.equal(await page.locator("input[name=sender]").inputValue(), "ark://agents/security");
  });

  await check("questions asked while a search is shown appear only when the search would list them", async () => {
    await page.goto(`${B}/ui?q=tls`);
    await page.waitForSelector("body[data-live=true]");
    const unrelated = await ask("Unrelated: drain node 3?", "ark://agents/security", "ark://users/erin");
    const related = await ask("Check the TLS ciphers?", "ark://agents/security", "ark://users/erin");
    // The watch's changes are handled in order: once the second is shown, the first was passed over.
    await page.locator(`#question-${related.id}`).waitFor({ timeout: 10000 });
    assert.equal(await page.locator(`#question-${unrelated.id}`).count(), 0);
    assert.equal(await page.locator("#pending-count").textContent(), "3");
    await page.close();
  });

  await check("past 500 pending questions the list pages on (Next page, First page) and the count is exact, live too", async () => {
    const bulk = "ark://users/bulk";
    for (let start = 0; start < 510; start += 30) {
      const batch = Array.from({ length: Math.min(30, 510 - start) }, (_, i) =>
        ask(`Bulk question ${String(start + i).padStart(3, "0")}?`, "ark://agents/bulk", bulk),
      );
      await Promise.all(batch);
    }
    const paged = await browser.newPage({ viewport: laptop });
    await paged.goto(`${B}/ui?recipient=${encodeURIComponent(bulk)}`);
    const firstPage = await listed(paged);
    assert.equal(firstPage.length, 500);
    assert.equal(await paged.locator("#pending-count").textContent(), "510");
    assert.equal(await paged.title(), "(510) Questions · Ark Broker");
    assert.equal(await paged.locator(".pager a.first").count(), 0);
    // Asked and answered on replica A while the first page is open: counted, though listed on the last page.
    await paged.waitForSelector("body[data-live=true]");
    const extra = await ask("Bulk question 510?", "ark://agents/bulk", bulk);
    await paged.waitForFunction(() => document.getElementById("pending-count").textContent === "511");
    assert.equal(await paged.title(), "(511) Questions · Ark Broker");
    assert.equal(await paged.locator(`#question-${extra.id}`).count(), 0, "not on the first page");
    const { status } = await rest("POST", `${A}/questions/${extra.id}/answer`, { response: "done" });
    assert.equal(status, 200);
    await paged.waitForFunction(() => document.getElementById("pending-count").textContent === "510");
    assert.equal(await paged.title(), "(510) Questions · Ark Broker");
    await Promise.all([paged.waitForURL(/cursor=/), paged.locator(".pager a.next").click()]);
    const secondPage = await listed(paged);
    assert.equal(secondPage.length, 10);
    assert.ok(secondPage.every((id) => !firstPage.includes(id)), "no question on both pages");
    assert.equal(await paged.locator(".pager a.next").count(), 0);
    assert.equal(new Set([...firstPage, ...secondPage]).size, 510);
    await Promise.all([paged.waitForURL(/\/ui\?recipient=[^&]+$/), paged.locator(".pager a.first").click()]);
    assert.equal((await listed(paged)).length, 500);
    await paged.close();
  });

  await check("on a phone the search, the open filters and the pager fit without sideways scrolling", async () => {
    const phone = await browser.newPage({ viewport: { width: 390, height: 844 }, isMobile: true });
    await phone.goto(`${B}/ui?recipient=${encodeURIComponent("ark://users/bulk")}&q=bulk`);
    assert.ok(await phone.locator("details.filters").getAttribute("open") !== null);
    const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 0, `the page is ${overflow}px wider than the phone`);
    if (shots) await phone.screenshot({ path: `${shots}/ui-phone-search.png` });
  });
} finally {
  await browser.close();
}
summary();
