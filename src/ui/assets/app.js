// Keeps the pending list live from the questions watch (new questions appear, answered, cancelled and
// expired ones leave) and answers through the REST API without leaving the page. Without JavaScript the
// page still works: the forms POST and the server redirects back.
"use strict";

(() => {
  const body = document.body;
  const list = document.getElementById("pending");
  if (body.dataset.view !== "pending" || !list) return;
  const template = document.getElementById("question-template");
  const empty = document.getElementById("empty");
  const count = document.getElementById("pending-count");

  function age(iso) {
    const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (seconds < 60) return "just now";
    if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
    return `${Math.floor(seconds / 86400)} d ago`;
  }

  function refreshCounts() {
    const n = list.children.length;
    count.textContent = String(n);
    empty.hidden = n > 0;
  }

  function wireForm(card) {
    const form = card.querySelector("form.answer");
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const data = new FormData(form);
      const answer = { response: data.get("response") };
      const by = String(data.get("answeredBy") || "").trim();
      if (by) answer.answeredBy = by;
      const button = form.querySelector("button");
      button.disabled = true;
      try {
        const reply = await fetch(`/questions/${encodeURIComponent(card.dataset.id)}/answer`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(answer),
        });
        if (reply.ok || reply.status === 409 || reply.status === 404) {
          card.remove();
          refreshCounts();
        } else {
          button.disabled = false;
        }
      } catch (_) {
        form.submit(); // network trouble: fall back to the plain form post
      }
    });
  }

  function add(question) {
    if (question.status !== "pending" || document.getElementById(`question-${question.id}`)) return;
    const card = template.content.firstElementChild.cloneNode(true);
    card.id = `question-${question.id}`;
    card.dataset.id = question.id;
    card.querySelector(".sender").textContent = question.sender;
    card.querySelector(".recipient").textContent = question.recipient;
    const time = card.querySelector("time.age");
    time.dateTime = question.createdAt;
    time.title = question.createdAt;
    time.textContent = age(question.createdAt);
    if (question.query) {
      const ns = question.query.namespace ? `${question.query.namespace}/` : "";
      const link = card.querySelector(".query");
      link.textContent = ns + question.query.name;
      if (question.query.namespace) {
        link.href = `/ui/queries/${encodeURIComponent(question.query.namespace)}/${encodeURIComponent(question.query.name)}`;
      }
      card.querySelector(".query-part").hidden = false;
    }
    showChannels(card, question);
    card.querySelector(".content").textContent = question.content;
    card.querySelector("form.answer").action = `/ui/questions/${encodeURIComponent(question.id)}/answer`;
    wireForm(card);
    list.appendChild(card);
    refreshCounts();
  }

  // The channels and where each delivery stands, as the server draws them (page.rs, `delivery`).
  function showChannels(card, question) {
    const place = card.querySelector(".channels");
    if (!place) return;
    place.replaceChildren();
    for (const channel of question.channels || []) {
      const delivery = (question.deliveries || []).find((d) => d.channel === channel);
      const status = delivery ? delivery.status : "";
      const link = delivery && /^https?:\/\//.test(delivery.url || "") ? delivery.url : null;
      const element = document.createElement(status === "delivered" && link ? "a" : "span");
      element.className = "channel";
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

  function update(question) {
    const card = document.getElementById(`question-${question.id}`);
    if (card) showChannels(card, question);
  }

  function remove(question) {
    const card = document.getElementById(`question-${question.id}`);
    if (card) card.remove();
    refreshCounts();
  }

  for (const card of list.children) wireForm(card);
  setInterval(() => {
    for (const time of document.querySelectorAll("time.age")) time.textContent = age(time.dateTime);
  }, 30000);

  // EventSource resends the last id on reconnect, which the watch resumes from.
  const watch = new EventSource(`/questions?watch=true&resourceVersion=${encodeURIComponent(body.dataset.resourceVersion)}`);
  watch.addEventListener("question_created", (e) => add(JSON.parse(e.data)));
  watch.addEventListener("question_updated", (e) => update(JSON.parse(e.data)));
  for (const kind of ["question_answered", "question_cancelled", "question_expired"]) {
    watch.addEventListener(kind, (e) => remove(JSON.parse(e.data)));
  }
  watch.addEventListener("error", () => {
    // A closed stream (e.g. 410: our version is too old) cannot resume: reload for a fresh list.
    if (watch.readyState === EventSource.CLOSED) setTimeout(() => location.reload(), 3000);
  });
  body.dataset.live = "true";
})();
