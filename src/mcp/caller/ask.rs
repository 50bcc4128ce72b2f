//! What the person at the calling client is asked: a form — the question's `responseSchema`, or one text
//! field (a choice of its `options` when it has them) — or, where the client takes only URL mode or the
//! question is too long for a form, a link to the question's page; and the messages each era carries it
//! in: `elicitation/create` on a 2025-11-25 response stream, an `inputRequests` entry in 2026-07-28.

use rmcp::model::{InputRequest, InputRequests};
use serde_json::{Value, json};

use super::Modes;
use crate::questions::{bodies::NewQuestion, channel::CALLER, model::Question};

/// The key of the one input request a 2026-07-28 call or task carries (its `inputRequests` and the
/// client's `inputResponses`).
pub const INPUT_KEY: &str = "ask_question";
/// The field a free-text answer is given in.
pub(super) const TEXT_FIELD: &str = "answer";
/// Longest question asked in a form when the client also takes URL mode: a longer one reads better on its
/// page (Markdown, the whole record) than in a client's dialog.
const FORM_MAX_CHARS: usize = 2_000;
/// What a JSON-RPC id of an elicitation this broker sent starts with; the question's id follows.
const REQUEST_ID_PREFIX: &str = "ark-caller/";

/// The elicitation stored with a question asked of its caller (without the link URL mode adds), or why the
/// client cannot be asked.
pub fn stored(question: &NewQuestion, modes: Modes) -> Result<Value, String> {
    if !modes.any() {
        return Err(format!(
            "channels: '{CALLER}' asks the person at this MCP client through elicitation, but the client did not \
             declare the elicitation capability; ask without '{CALLER}', or from a client that can show a form \
             or open a link"
        ));
    }
    let long = question.content.chars().count() > FORM_MAX_CHARS;
    if modes.form && !(long && modes.url) {
        let schema = question.response_schema.clone().unwrap_or_else(|| text_form(&question.options));
        return Ok(json!({"mode": "form", "message": question.content, "requestedSchema": schema}));
    }
    let excerpt: String = question.content.chars().take(200).collect();
    let more = if excerpt.len() < question.content.len() { "…" } else { "" };
    Ok(json!({"mode": "url", "message": format!("Please answer a question on its page: {excerpt}{more}")}))
}

/// A free-text answer's form: one required text field, or a choice of the options.
fn text_form(options: &[String]) -> Value {
    let mut field = json!({"type": "string", "title": "Your answer", "minLength": 1});
    if !options.is_empty() {
        field["enum"] = json!(options);
    }
    json!({"type": "object", "properties": {TEXT_FIELD: field}, "required": [TEXT_FIELD]})
}

/// The parameters of the elicitation for question `question_id`, as sent: the stored ones, and for URL mode
/// the link to the question's page under `page_base` and the elicitation's id (the question's).
pub fn params(stored: &Value, question_id: &str, page_base: &str) -> Value {
    let mut params = stored.clone();
    if params["mode"] == "url" {
        params["url"] = json!(format!("{}/ui/questions/{question_id}", page_base.trim_end_matches('/')));
        params["elicitationId"] = json!(question_id);
    }
    params
}

/// The parameters of `question`'s elicitation while its caller's reply is still awaited (it is pending,
/// asks its caller, and the client has not replied).
pub fn elicitation(question: &Question, page_base: &str) -> Option<Value> {
    let stored = question.caller_elicitation.as_ref()?;
    awaited(question).then(|| params(stored, &question.id, page_base))
}

/// Whether `question` waits for the person at its client: pending, asking its caller, and the client has
/// not replied. Its task is then `input_required` in both eras.
pub fn awaited(question: &Question) -> bool {
    question.status == crate::questions::model::QuestionStatus::Pending
        && question.caller_elicitation.is_some()
        && !question.caller_replied
}

/// The 2025-11-25 `elicitation/create` request for question `question_id`; for a task, tied to it.
pub fn request(params: Value, question_id: &str, task_id: Option<&str>) -> Value {
    let mut params = params;
    if let Some(task) = task_id {
        params["_meta"] = json!({crate::mcp::tasks::RELATED_TASK: {"taskId": task}});
    }
    json!({"jsonrpc": "2.0", "id": format!("{REQUEST_ID_PREFIX}{question_id}"), "method": "elicitation/create",
           "params": params})
}

/// The question a JSON-RPC response answers, when its id is one of this broker's elicitations.
pub fn question_of_request(id: &Value) -> Option<&str> {
    id.as_str()?.strip_prefix(REQUEST_ID_PREFIX).filter(|question| !question.is_empty())
}

/// What tells the client its elicitation is over once the question closed: for URL mode
/// `notifications/elicitation/complete`, for a form `notifications/cancelled` (a client that already replied
/// ignores it).
pub fn withdrawal(params: &Value, question_id: &str) -> Value {
    if params["mode"] == "url" {
        return json!({"jsonrpc": "2.0", "method": "notifications/elicitation/complete",
                      "params": {"elicitationId": question_id}});
    }
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
           "params": {"requestId": format!("{REQUEST_ID_PREFIX}{question_id}"),
                      "reason": "The question was answered or closed elsewhere."}})
}

/// The elicitation as a 2026-07-28 input request.
pub fn input_request(params: Value) -> Option<InputRequest> {
    serde_json::from_value(json!({"method": "elicitation/create", "params": params})).ok()
}

/// The one input request of a call or task that asks its caller.
pub fn input_requests(params: Value) -> Option<InputRequests> {
    input_request(params).map(|request| InputRequests::from([(INPUT_KEY.to_owned(), request)]))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{input_requests, params, question_of_request, request, stored, withdrawal};
    use crate::{mcp::caller::Modes, questions::bodies::NewQuestion};

    fn question(content: &str, options: &[&str], schema: Option<Value>) -> NewQuestion {
        let mut body = json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": content,
                              "options": options});
        if let Some(schema) = schema {
            body["responseSchema"] = schema;
        }
        serde_json::from_value(body).unwrap()
    }

    #[test]
    fn a_form_for_short_questions_a_link_for_long_ones_or_url_only_clients() {
        let (form, url, both) =
            (Modes { form: true, url: false }, Modes { form: false, url: true }, Modes { form: true, url: true });
        let typed = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]});
        let asked = stored(&question("Ship it?", &[], Some(typed.clone())), both).unwrap();
        assert_eq!(asked, json!({"mode": "form", "message": "Ship it?", "requestedSchema": typed}));
        let choice = stored(&question("Ship it?", &["Yes", "No"], None), form).unwrap();
        assert_eq!(choice["requestedSchema"]["properties"]["answer"]["enum"], json!(["Yes", "No"]));
        assert_eq!(choice["requestedSchema"]["required"], json!(["answer"]));
        let long = "x".repeat(2_001);
        assert_eq!(stored(&question(&long, &[], None), both).unwrap()["mode"], "url");
        assert_eq!(stored(&question(&long, &[], None), form).unwrap()["mode"], "form", "no URL mode: a form");
        let linked = stored(&question("Ship it?", &[], None), url).unwrap();
        assert_eq!(linked["mode"], "url");
        let sent = params(&linked, "q-1", "https://ark.example/");
        assert_eq!(sent["url"], "https://ark.example/ui/questions/q-1");
        assert_eq!(sent["elicitationId"], "q-1");
        assert!(stored(&question("Ship it?", &[], None), Modes::default()).unwrap_err().contains("'mcp:caller'"));
    }

    #[test]
    fn requests_name_their_question_and_each_mode_is_withdrawn_its_way() {
        let form = json!({"mode": "form", "message": "m", "requestedSchema": {"type": "object", "properties": {}}});
        let sent = request(form.clone(), "q-7", Some("t-1"));
        assert_eq!(question_of_request(&sent["id"]), Some("q-7"));
        assert_eq!(sent["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], "t-1");
        assert_eq!(question_of_request(&json!("other-7")), None);
        assert_eq!(question_of_request(&json!(7)), None);
        assert_eq!(withdrawal(&form, "q-7")["params"]["requestId"], sent["id"]);
        let url = params(&json!({"mode": "url", "message": "m"}), "q-7", "http://h:8080");
        assert_eq!(withdrawal(&url, "q-7")["method"], "notifications/elicitation/complete");
        for asked in [form, url] {
            let requests = input_requests(asked.clone()).expect("rmcp reads it as an input request");
            let wire = serde_json::to_value(&requests).unwrap();
            assert_eq!(wire["ask_question"]["params"]["mode"], asked["mode"], "{wire}");
        }
    }
}
