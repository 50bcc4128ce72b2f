//! Answering and declining a question, the one way every face does it (REST, the page, Slack, GitHub, MCP's
//! own tests): an answer is checked against the question's form — its `responseSchema`, or free text — before
//! the first answer wins.

use serde_json::Value;

use super::{
    form::ResponseSchema,
    model::{Question, QuestionStatus},
    policy::{AnswerPolicy, Answerer},
    store::{Change, QuestionStore},
};
use crate::{
    db::{StoreResult, outage},
    validate::{self, Invalid},
};

/// What an attempt to answer came to.
#[derive(Debug)]
pub enum Outcome {
    /// The store's verdict: answered, too late (the question as it is), or no such question.
    Changed(Box<Change>),
    /// The answer does not fit the question's form; nothing changed.
    Refused(Invalid),
    /// The answer policy does not let this person answer it (why); nothing changed but the record.
    Forbidden(String),
}

/// An answer as it arrived.
#[derive(Debug, Clone, Copy)]
pub enum Given<'a> {
    /// JSON, from the API: text, or the object of a typed question's fields.
    Json(&'a Value),
    /// Text a person typed in a channel or a form: for a typed question, a JSON object (in a fenced block
    /// or not) or `field: value` lines.
    Text(&'a str),
}

/// Answers question `id` with `response` if it fits the question's form (a typed answer gets the defaults of
/// the fields it left out).
pub async fn answer(
    store: &QuestionStore,
    policy: &AnswerPolicy,
    id: &str,
    response: Given<'_>,
    answerer: Answerer<'_>,
    via: &str,
) -> StoreResult<Outcome> {
    let answered_by = answerer.recorded();
    if let Some(by) = answered_by
        && let Err(invalid) = validate::key("answeredBy", by)
    {
        return Ok(Outcome::Refused(invalid));
    }
    // A read before the write: repeatable, so it rides an outage as the write does (a primary switching over).
    let Some(question) = outage::ride(|| store.get(id)).await? else {
        return Ok(Outcome::Changed(Box::new(Change::NotFound)));
    };
    // Before anything else: a 409 would show someone who may not answer what the answer was.
    if let Err(why) = policy.check(&question, answerer).await {
        store.record_refusal(id, answered_by, via, &why).await?;
        return Ok(Outcome::Forbidden(why));
    }
    let response = match (response, &question.response_schema) {
        (Given::Json(value), _) => value.clone(),
        (Given::Text(text), None) => Value::String(text.trim().to_owned()),
        (Given::Text(text), Some(_)) => match typed_from_text(text) {
            Ok(value) => value,
            Err(invalid) => return Ok(Outcome::Refused(invalid)),
        },
    };
    // A malformed answer is refused as such even when the question is closed (then 409 tells it is too late).
    let response = match fitted(&question, &response) {
        Ok(response) => response,
        Err(invalid) => return Ok(Outcome::Refused(invalid)),
    };
    if question.status != QuestionStatus::Pending {
        return Ok(Outcome::Changed(Box::new(Change::Conflict(question))));
    }
    Ok(Outcome::Changed(Box::new(store.answer(id, &response, answered_by, Some(via)).await?)))
}

/// `response` as the question takes it: an object of its form's fields for a typed question, otherwise
/// text that is not only white space.
pub fn fitted(question: &Question, response: &Value) -> Result<Value, Invalid> {
    match &question.response_schema {
        Some(schema) => ResponseSchema::parse(schema)?.check(response),
        None => match response {
            Value::String(text) if text.trim().is_empty() => Err(Invalid("response: must not be empty".into())),
            Value::String(text) if text.contains('\0') => Err(Invalid("response: must not contain NUL".into())),
            Value::String(_) => Ok(response.clone()),
            _ => Err(Invalid("response: expected text (this question has no responseSchema)".into())),
        },
    }
}

/// A typed answer typed as text: a JSON object (optionally in a fenced code block), or one `field: value`
/// per line; a value is read as JSON when it is JSON (`true`, `3`, `["eu","us"]`), else as text, and a
/// comma-separated list where the field takes several choices is left for the form's check to refuse.
pub fn typed_from_text(text: &str) -> Result<Value, Invalid> {
    let trimmed = text.trim();
    let unfenced = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|rest| rest.trim_end().strip_suffix("```"))
        .unwrap_or(trimmed)
        .trim();
    if unfenced.starts_with('{') {
        return serde_json::from_str::<Value>(unfenced)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| Invalid("response: not a valid JSON object".into()));
    }
    let mut fields = serde_json::Map::new();
    for line in unfenced.lines().map(str::trim).filter(|line| !line.is_empty()) {
        let Some((name, value)) = line.split_once(':') else {
            return Err(Invalid(format!("response: expected `field: value` lines or a JSON object, got '{line}'")));
        };
        let value = value.trim();
        let value = serde_json::from_str::<Value>(value).unwrap_or_else(|_| Value::String(value.to_owned()));
        fields.insert(name.trim().to_owned(), value);
    }
    Ok(Value::Object(fields))
}

/// Declines question `id` on behalf of `answerer` (the person refuses to answer), if the policy lets them
/// answer it.
pub async fn decline(
    store: &QuestionStore,
    policy: &AnswerPolicy,
    id: &str,
    reason: Option<&str>,
    answerer: Answerer<'_>,
    via: &str,
) -> StoreResult<Outcome> {
    let declined_by = answerer.recorded();
    if let Some(reason) = reason
        && (reason.contains('\0') || reason.chars().count() > MAX_REASON_CHARS)
    {
        return Ok(Outcome::Refused(Invalid(format!("reason: at most {MAX_REASON_CHARS} characters, without NUL"))));
    }
    if let Some(by) = declined_by
        && let Err(invalid) = validate::key("declinedBy", by)
    {
        return Ok(Outcome::Refused(invalid));
    }
    // A read before the write: repeatable, so it rides an outage as the write does (a primary switching over).
    let Some(question) = outage::ride(|| store.get(id)).await? else {
        return Ok(Outcome::Changed(Box::new(Change::NotFound)));
    };
    if let Err(why) = policy.check(&question, answerer).await {
        store.record_refusal(id, declined_by, via, &why).await?;
        return Ok(Outcome::Forbidden(why));
    }
    Ok(Outcome::Changed(Box::new(store.decline(id, reason, declined_by, Some(via)).await?)))
}

/// Longest decline reason.
const MAX_REASON_CHARS: usize = 2_000;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::typed_from_text;

    #[test]
    fn a_typed_answer_typed_as_text_is_a_json_object_or_field_lines() {
        let fenced = "```json\n{\"decision\": \"approve\", \"replicas\": 2}\n```";
        assert_eq!(typed_from_text(fenced).unwrap(), json!({"decision": "approve", "replicas": 2}));
        let lines = "decision: approve\nreplicas: 2\nnotify: true\nregions: [\"eu\", \"us\"]\nnote: ship it: now";
        assert_eq!(
            typed_from_text(lines).unwrap(),
            json!({"decision": "approve", "replicas": 2, "notify": true, "regions": ["eu", "us"], "note": "ship it: now"})
        );
        assert!(typed_from_text("{not json").unwrap_err().0.contains("not a valid JSON object"));
        assert!(typed_from_text("just words").unwrap_err().0.contains("`field: value` lines"));
    }
}
