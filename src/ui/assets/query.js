// Keeps a Query's page live: replays its unified stream (text, tool calls, questions, phase changes) into
// the timeline and follows it as it happens, from whichever replica serves the page. Answers go through the
// REST API (first answer wins); without JavaScript the server-rendered page and its form posts still work.
"use strict";

(() => {
  const body = document.body;
  const timeline = document.getElementById("timeline");
  if (body.dataset.page !== "query" || !timeline || !window.EventSource) return;
  const empty = document.getElementById("empty");
  const phase = document.getElementById("phase");
  const formTemplate = document.getElementById("answer-template");

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function shown(value) {
    if (value === undefined || value === null) return "";
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  function duration(ms) {
    if (typeof ms !== "number") return "";
    return ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`;
  }

  function setPhase(to) {
    phase.textContent = to;
    phase.className = `phase phase-${to}`;
  }

  function append(node) {
    timeline.appendChild(node);
    empty.hidden = true;
  }

  function text(content) {
    const last = timeline.lastElementChild;
    if (last && last.classList.contains("text")) last.textContent += content;
    else append(el("li", "text", content));
  }

  function toolStart(data) {
    const item = el("li", "tool");
    item.id = `tool-${data.tool_call_id}`;
    item.dataset.toolCallId = data.tool_call_id;
    const details = el("details");
    const summary = el("summary");
    summary.append(el("span", "badge", "tool"), " ", el("code", "tool-name", data.tool_name), " ",
      el("span", "tool-status running", "running"), " ", el("span", "duration", ""));
    details.append(summary, el("p", "label", "Arguments"), el("pre", "args", shown(data.arguments)),
      el("p", "label", "Result"), el("pre", "result", ""));
    item.appendChild(details);
    append(item);
  }

  function toolResult(data) {
    const item = document.getElementById(`tool-${data.tool_call_id}`);
    if (!item) return;
    const ok = data.success !== false;
    const status = item.querySelector(".tool-status");
    status.className = `tool-status ${ok ? "ok" : "failed"}`;
    status.textContent = ok ? "succeeded" : "failed";
    item.querySelector(".duration").textContent = duration(data.duration_ms);
    item.querySelector(".result").textContent = shown(data.result);
  }

  function questionRaised(data) {
    if (document.getElementById(`question-${data.question_id}`)) return;
    const item = el("li", "question asked");
    item.id = `question-${data.question_id}`;
    item.dataset.id = data.question_id;
    const meta = el("p", "meta");
    meta.append(el("span", "badge", "question"), " to ", el("span", "recipient", data.recipient));
    const content = el("div", "content", data.content);
    item.append(meta, content);
    const form = formTemplate.content.firstElementChild.cloneNode(true);
    form.action = `/ui/questions/${encodeURIComponent(data.question_id)}/answer`;
    wireForm(item, form);
    item.appendChild(form);
    append(item);
    renderContent(data.question_id, content);
  }

  // The content as the server renders it from Markdown (sanitised; routes.rs, `card`), in place of the plain
  // text shown meanwhile; and the answer form the question takes (its typed fields, its options), or why this
  // person may not answer it, in place of the text box — unless someone already started answering.
  async function renderContent(id, content) {
    try {
      const reply = await fetch(`/ui/questions/${encodeURIComponent(id)}/card`);
      if (!reply.ok) return;
      const holder = document.createElement("template");
      holder.innerHTML = await reply.text();
      const rendered = holder.content.querySelector(".content");
      if (rendered) content.replaceChildren(...rendered.childNodes);
      const item = content.closest("li.question");
      const shown = item && item.querySelector("form.answer");
      if (!shown || shown.dataset.touched === "true" || shown.contains(document.activeElement)) return;
      const refused = holder.content.querySelector(".may-not-answer");
      const form = holder.content.querySelector("form.answer");
      if (refused) {
        shown.replaceWith(refused);
      } else if (form) {
        const back = document.createElement("input");
        back.type = "hidden";
        back.name = "back";
        back.value = body.dataset.back;
        form.prepend(back);
        wireForm(item, form);
        shown.replaceWith(form);
      }
    } catch (_) {
      // the plain text and the text box stay
    }
  }

  function outcome(item, status, response, by) {
    if (!item || item.querySelector(".outcome")) return;
    const form = item.querySelector("form.answer");
    if (form) form.remove();
    const line = el("p", "outcome");
    line.appendChild(el("span", `status ${status}`, status));
    if (response !== undefined && response !== null) {
      line.append(" ", el("span", "response", typeof response === "string" ? response : JSON.stringify(response)));
    }
    if (by) line.append(" — ", el("span", "by", by));
    item.appendChild(line);
  }

  function questionClosed(event, data) {
    const item = document.getElementById(`question-${data.question_id}`);
    outcome(item, event.replace("question_", ""), data.response ?? data.reason, data.answered_by || data.declined_by);
  }

  function wireForm(item, form) {
    form.addEventListener("input", () => {
      form.dataset.touched = "true";
    });
    form.addEventListener("submit", async (submitted) => {
      submitted.preventDefault();
      const { declining, url, body: request } = window.arkForms.request(form, item.dataset.id, submitted.submitter);
      const buttons = [...form.querySelectorAll("button")];
      const error = form.querySelector(".form-error");
      const say = (text) => {
        error.textContent = text;
        error.hidden = !text;
      };
      for (const button of buttons) button.disabled = true;
      say("");
      let reply = null;
      let result = {};
      try {
        reply = await fetch(url, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(request),
        });
        result = await reply.json().catch(() => ({}));
      } catch (_) {
        reply = null; // the broker could not be reached at all
      }
      const what = declining ? "decline" : "answer";
      if (reply && reply.ok) {
        outcome(item, result.status, result.response, result.answeredBy);
      } else if (reply && reply.status === 409 && result.question) {
        // Lost the race: show what won, and say that this answer (kept below) was not stored.
        const q = result.question;
        const typed = JSON.stringify(request.response ?? "");
        outcome(item, q.status, q.response, q.answeredBy);
        const by = q.answeredBy ? `${q.answeredBy} answered first` : `the question was ${q.status} first`;
        const yours = declining ? "" : ` Yours was: “${typeof request.response === "string" ? request.response : typed}”`;
        item.append(el("p", "form-error", `Your ${what} was not stored: ${by}.${yours}`));
      } else {
        // Nothing was stored: what was entered stays in the form to send again (or to correct: a 400 names
        // the field).
        for (const button of buttons) button.disabled = false;
        const why = !reply
          ? "the broker could not be reached"
          : `the broker answered ${reply.status}${result.error && result.error.message ? `: ${result.error.message}` : ""}`;
        say(`Your ${what} was not sent: ${why}. Your text is kept; send it again in a moment.`);
      }
    });
  }

  function apply(frame) {
    const data = frame.data || {};
    switch (frame.event) {
      case "text_delta": return text(data.content || "");
      case "tool_call_start": return toolStart(data);
      case "tool_call_result": return toolResult(data);
      case "question_raised": return questionRaised(data);
      case "question_answered":
      case "question_cancelled":
      case "question_expired":
      case "question_declined": return questionClosed(frame.event, data);
      case "phase_change":
        append(el("li", "phase-change", `Phase ${data.from || ""} → ${data.to}${data.reason ? ` (${data.reason})` : ""}`));
        return setPhase(data.to);
      case "completed_query":
        append(el("li", "completed", "Query completed"));
        return setPhase("completed");
      case "error":
        return append(el("li", "error", data.message || "error"));
      default:
        return undefined;
    }
  }

  // Each (re)connection replays the stream from its first event, so the timeline is rebuilt on open.
  const source = new EventSource(body.dataset.streamUrl);
  source.onopen = () => {
    timeline.replaceChildren();
    body.dataset.live = "true";
  };
  source.onmessage = (message) => {
    if (message.data === "[DONE]") {
      source.close();
      body.dataset.live = "ended";
      // Completed, unless it ended on an error (an error chunk, or its writer disconnected).
      if (!timeline.lastElementChild || !timeline.lastElementChild.classList.contains("error")) setPhase("completed");
      return;
    }
    try {
      apply(JSON.parse(message.data));
    } catch (_) {
      // a frame this page does not understand is skipped
    }
  };
  source.onerror = () => {
    if (body.dataset.live !== "ended") body.dataset.live = "reconnecting";
  };
})();
