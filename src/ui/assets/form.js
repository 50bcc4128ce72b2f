// What the answer forms of both pages (app.js, query.js) send through the REST API when JavaScript runs:
// an answer — the text, the option chosen, or a typed form's fields as the object REST takes, made as the
// server makes it of a post without JavaScript (typed_answer.rs) — or, for the Decline button, a decline.
"use strict";

window.arkForms = (() => {
  // A `datetime-local` value (no offset, maybe no seconds) as RFC 3339 in UTC, as the server reads it
  // (typed_answer.rs, `date_time`).
  function dateTime(value) {
    if (/(Z|[+-]\d\d:\d\d)$/i.test(value)) return value;
    const [date, time = ""] = value.split("T");
    return `${date}T${time.length === 5 ? `${time}:00` : time.slice(0, 8)}Z`;
  }

  // A typed form's fields as the object REST takes, as the server makes it of a post (typed_answer.rs): numbers
  // as numbers, an unticked box as false, the ticked choices of a multi-select as a list, empty inputs left out.
  function typedAnswer(form) {
    const response = {};
    for (const input of form.elements) {
      if (!input.name || !input.name.startsWith("field.")) continue;
      const name = input.name.slice("field.".length);
      const kind = input.dataset.kind;
      if (kind === "multi") {
        response[name] ??= [];
        if (input.checked) response[name].push(input.value);
      } else if (kind === "boolean") {
        response[name] = input.checked;
      } else if (input.type === "radio") {
        if (input.checked) response[name] = input.value;
      } else {
        const value = input.value.trim();
        if (value === "") continue;
        if (kind === "number" || kind === "integer") response[name] = Number.isFinite(Number(value)) ? Number(value) : value;
        else if (input.dataset.format === "date-time") response[name] = dateTime(value);
        else response[name] = value;
      }
    }
    return response;
  }

  // The request the form's submission makes: to answer, or (its Decline button) to decline question `id`.
  function request(form, id, submitter) {
    const declining = Boolean(submitter && submitter.dataset.action === "decline");
    const data = new FormData(form);
    const by = String(data.get("answeredBy") || "").trim();
    const question = `/questions/${encodeURIComponent(id)}`;
    if (declining) {
      const body = {};
      const reason = String(data.get("reason") || "").trim();
      if (reason) body.reason = reason;
      if (by) body.declinedBy = by;
      return { declining, url: `${question}/decline`, body };
    }
    const body = { response: form.classList.contains("typed") ? typedAnswer(form) : data.get("response") };
    if (by) body.answeredBy = by;
    return { declining, url: `${question}/answer`, body };
  }

  return { request };
})();
