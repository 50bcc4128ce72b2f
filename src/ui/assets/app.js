// Keeps the questions page live from the questions watch — new questions appear (and are announced to
// screen readers), closed ones leave the Pending tab and appear on the Closed tab — and answers through the
// REST API without leaving the page, saying what happened when an answer loses a race or cannot be sent.
// Without JavaScript the page still works: the forms POST and the server redirects back, and searching and
// paging are plain links and GET forms.
"use strict";

(() => {
  const body = document.body;
  const view = body.dataset.view;
  const list = document.getElementById(view);
  if (!list || !window.EventSource) return;
  const empty = document.getElementById("empty");
  const count = document.getElementById("pending-count");
  const banner = document.getElementById("connection");
  const announcer = document.getElementById("announcer");
  const search = { q: body.dataset.q, recipient: body.dataset.recipient, sender: body.dataset.sender, query: body.dataset.query };
  // The server's exact count of pending questions under the search (every page's, read in the same snapshot
  // as the list), kept up from the watch: +1 for each matching question asked, -1 for each that closes.
  let pendingCount = Number(count.textContent) || 0;
  // The questions that have left the count: each leaves once, whether this page's answer or the watch said so
  // first.
  const left = new Set();

  function leaves(id) {
    if (left.has(id)) return;
    left.add(id);
    pendingCount = Math.max(0, pendingCount - 1);
  }

  function age(iso) {
    const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (seconds < 60) return "just now";
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
    return `${Math.floor(seconds / 86400)} d ago`;
  }

  // An answer as the page shows it: text as it is, a typed answer as its compact JSON (as cards.rs does).
  function shown(response) {
    return typeof response === "string" ? response : JSON.stringify(response);
  }

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function refreshCounts() {
    count.textContent = String(pendingCount);
    document.title = `(${pendingCount}) ${body.dataset.title} · Ark Broker`;
    empty.hidden = list.children.length > 0;
  }

  function announce(text) {
    announcer.textContent = text;
  }

  // The search and filters the server applied, applied to a question that arrives live (the watch already
  // filters by recipient and sender; the content search ignores case, as the server's does).
  function matches(question) {
    if (search.recipient && question.recipient !== search.recipient) return false;
    if (search.sender && question.sender !== search.sender) return false;
    if (search.q && !question.content.toLowerCase().includes(search.q.toLowerCase())) return false;
    if (search.query) {
      const query = question.query || {};
      const [ns, name] = search.query.includes("/") ? search.query.split("/", 2) : [undefined, search.query];
      if (query.name !== name || (ns !== undefined && query.namespace !== ns)) return false;
    }
    return true;
  }

  // The card as the server renders it (see routes.rs, `card`, for why the server and not this script).
  async function fetchCard(id) {
    try {
      const reply = await fetch(`/ui/questions/${encodeURIComponent(id)}/card`);
      if (!reply.ok) return null;
      const holder = document.createElement("template");
      holder.innerHTML = (await reply.text()).trim();
      return holder.content.firstElementChild;
    } catch (_) {
      return null;
    }
  }

  // Someone is answering this card: they typed or chose something, the focus is in it, or their answer is on
  // its way.
  function busy(card) {
    const text = card.querySelector("textarea");
    return (text && text.value.trim() !== "") || card.dataset.touched === "true" || card.contains(document.activeElement)
      || card.dataset.sending === "true";
  }

  // "answered by erin · just now" and the answer, as the server draws a closed card (cards.rs, `outcome`).
  function outcomeLine(question) {
    const outcome = el("div", "outcome");
    const line = el("p", "outcome-line");
    line.append(el("span", `status ${question.status}`, question.status));
    if (question.answeredBy) line.append(" by ", el("span", "by", question.answeredBy));
    const at = question.closedAt || question.answeredAt;
    if (at) {
      const time = el("time", "age closed-at", age(at));
      time.dateTime = at;
      time.title = at;
      line.append(" · ", time);
    }
    outcome.append(line);
    if (question.response !== undefined && question.response !== null) outcome.append(el("p", "response", shown(question.response)));
    if (question.declineReason) outcome.append(el("p", "reason", question.declineReason));
    return outcome;
  }

  // Closed while someone was answering it: the card stays, says how it closed, and keeps their text (to
  // copy) until they dismiss it; it can no longer be sent.
  function markClosed(card, question) {
    if (card.dataset.status !== "pending") return;
    leaves(card.dataset.id);
    card.dataset.status = question.status;
    card.classList.add("closed", "closed-here");
    const form = card.querySelector("form.answer");
    if (!form) {
      card.querySelector(".may-not-answer")?.remove();
      card.querySelector(".content").after(outcomeLine(question));
      return refreshCounts();
    }
    for (const button of form.querySelectorAll("button[type=submit]")) button.disabled = true;
    form.before(outcomeLine(question));
    const dismiss = el("button", "dismiss", "Dismiss");
    dismiss.type = "button";
    dismiss.addEventListener("click", () => {
      card.remove();
      refreshCounts();
    });
    form.querySelector(".row").append(dismiss);
    refreshCounts();
  }

  function lostRace(question) {
    const by = question.answeredBy ? `${question.answeredBy} answered first` : "someone answered first";
    switch (question.status) {
      case "answered": return `Your answer was not stored: ${by}: “${shown(question.response)}”.`;
      case "declined": return `Your answer was not stored: ${question.answeredBy || "someone"} declined it first.`;
      case "cancelled": return "Your answer was not stored: the question was cancelled.";
      case "expired": return "Your answer was not stored: the question expired.";
      default: return "Your answer was not stored: the question is no longer pending.";
    }
  }

  function wireForm(card) {
    const form = card.querySelector("form.answer");
    if (!form) return;
    const error = form.querySelector(".form-error");
    const say = (text) => {
      error.textContent = text;
      error.hidden = !text;
    };
    form.addEventListener("input", () => {
      card.dataset.touched = "true";
    });
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const { declining, url, body } = window.arkForms.request(form, card.dataset.id, event.submitter);
      const buttons = [...form.querySelectorAll("button[type=submit]")];
      for (const button of buttons) button.disabled = true;
      card.dataset.sending = "true";
      say("");
      let reply = null;
      let result = {};
      try {
        reply = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        });
        result = await reply.json().catch(() => ({}));
      } catch (_) {
        reply = null; // the broker could not be reached at all
      }
      delete card.dataset.sending;
      const what = declining ? "decline" : "answer";
      if (reply && reply.ok) {
        leaves(card.dataset.id);
        card.remove();
        refreshCounts();
        announce(declining ? "Declined." : "Answer sent.");
      } else if (reply && reply.status === 409 && result.question) {
        markClosed(card, result.question);
        say(lostRace(result.question));
      } else if (reply && reply.status === 404) {
        markClosed(card, { status: "gone" });
        say(`Your ${what} was not stored: this question no longer exists.`);
      } else {
        // Nothing was stored: what was typed stays in the form to send again (or to correct: a 400 names the
        // field, a 403 says why this person may not answer).
        for (const button of buttons) button.disabled = card.dataset.status !== "pending";
        const why = !reply
          ? "the broker could not be reached"
          : reply.status === 503
            ? "the broker is unavailable right now (503)"
            : `the broker answered ${reply.status}${result.error && result.error.message ? `: ${result.error.message}` : ""}`;
        const again = reply && (reply.status === 400 || reply.status === 403) ? "" : "; send it again in a moment";
        say(`Your ${what} was not sent: ${why}. Your text is kept${again}.`);
      }
    });
  }

  // The channels and where each delivery stands, as the server draws them (cards.rs, `delivery`).
  function showChannels(card, question) {
    const place = card.querySelector(".channels");
    if (!place) return;
    place.replaceChildren();
    for (const channel of question.channels || []) {
      const delivery = (question.deliveries || []).find((d) => d.channel === channel);
      const status = delivery ? delivery.status : "";
      const link = delivery && /^https?:\/\//.test(delivery.url || "") ? delivery.url : null;
      const element = el(status === "delivered" && link ? "a" : "span", "channel");
      let words = channel;
      if (status === "delivered") {
        element.classList.add("delivered");
        if (link) element.href = link;
        words += " · delivered";
      } else if (status === "failed") {
        element.classList.add("failed");
        element.title = delivery.error || "";
        words += ` · not delivered: ${delivery.error || ""}`;
      } else if (delivery && delivery.error) {
        element.classList.add("retrying");
        element.title = delivery.error;
        words += " · retrying";
      } else if (delivery) {
        element.classList.add("sending");
        words += " · sending";
      }
      element.textContent = words;
      place.append(" ", element);
    }
  }

  async function created(question) {
    if (!matches(question)) return;
    pendingCount += 1;
    refreshCounts();
    // New questions belong on the last page of the pending list, after every other.
    if (view !== "pending" || body.dataset.lastPage !== "true") return;
    if (document.getElementById(`question-${question.id}`)) return;
    const card = await fetchCard(question.id);
    if (!card || card.dataset.status !== "pending" || document.getElementById(card.id)) return;
    wireForm(card);
    list.append(card);
    refreshCounts();
    const from = card.querySelector(".sender");
    announce(`New question from ${from ? from.textContent : question.sender}: ${card.querySelector(".content").textContent.slice(0, 200)}`);
  }

  async function closed(question) {
    if (matches(question)) leaves(question.id);
    if (view === "pending") {
      const card = document.getElementById(`question-${question.id}`);
      if (card && busy(card)) markClosed(card, question);
      else if (card) card.remove();
      return refreshCounts();
    }
    refreshCounts();
    if (!matches(question)) return;
    // The closed list runs newest first: a question that just closed goes on top of its first page.
    if (body.dataset.firstPage !== "true") return;
    const card = await fetchCard(question.id);
    if (!card || card.dataset.status === "pending") return;
    const old = document.getElementById(card.id);
    if (old) old.remove();
    list.prepend(card);
    refreshCounts();
  }

  function updated(question) {
    const card = document.getElementById(`question-${question.id}`);
    if (card && card.dataset.status === "pending") showChannels(card, question);
  }

  // Changes are handled one after the other, in the watch's order, even while a card is being fetched.
  let queue = Promise.resolve();
  function handle(fn, question) {
    queue = queue.then(() => fn(question)).catch(() => {});
  }

  // The live connection. EventSource retries by itself after a network error (a replica going away); after
  // an HTTP error (503 while the database is down, 410 when the page's version is older than the watch log
  // keeps) it gives up, so the page tries again itself, backing off, from the last change it saw.
  let version = body.dataset.resourceVersion;
  let source = null;
  let delay = 1000;

  function watchUrl() {
    const params = new URLSearchParams({ watch: "true", resourceVersion: version });
    if (search.recipient) params.set("recipient", search.recipient);
    if (search.sender) params.set("sender", search.sender);
    return `/questions?${params}`;
  }

  function online(up) {
    banner.hidden = up;
    body.dataset.live = up ? "true" : "offline";
  }

  function connect() {
    source = new EventSource(watchUrl());
    source.addEventListener("open", () => {
      online(true);
      delay = 1000;
    });
    source.addEventListener("error", () => {
      online(false);
      if (source.readyState === EventSource.CLOSED) {
        setTimeout(reconnect, delay);
        delay = Math.min(delay * 2, 15000);
      }
    });
    const on = (kind, fn) => source.addEventListener(kind, (e) => {
      if (e.lastEventId) version = e.lastEventId;
      handle(fn, JSON.parse(e.data));
    });
    on("question_created", created);
    on("question_updated", updated);
    for (const kind of ["question_answered", "question_cancelled", "question_expired", "question_declined"]) on(kind, closed);
  }

  async function reconnect() {
    let status = 0;
    try {
      // Only the status matters: whether the watch can resume from here at all.
      const controller = new AbortController();
      status = (await fetch(watchUrl(), { signal: controller.signal })).status;
      controller.abort();
    } catch (_) {
      status = 0;
    }
    if (status !== 410) return connect();
    // Too old to resume: a fresh list is needed. Reload, unless someone is typing an answer.
    if (![...list.children].some(busy)) return location.reload();
    banner.textContent = "This page is out of date. Reload it once you have sent your answer.";
  }

  for (const card of list.children) wireForm(card);
  setInterval(() => {
    for (const time of document.querySelectorAll("time.age")) time.textContent = age(time.dateTime);
  }, 30000);
  refreshCounts();
  connect();
})();
