//! What a question's passed timeout does to it: expire it, answer it with its form's defaults, or escalate
//! it once (a second timeout as long as the first) — decided from the question alone, so every replica
//! decides the same.

use serde_json::Value;

use super::OnTimeout;
use crate::questions::form::ResponseSchema;

/// Who acts when a timeout passes: the actor of every step it makes (expired, answered with the defaults,
/// escalated).
pub const TIMEOUT_ACTOR: &str = "system:timeout";

/// What a passed timeout does to a question.
#[derive(Debug, Clone, PartialEq)]
pub enum AtTimeout {
    /// It expires, unanswered.
    Expire,
    /// It is answered with these defaults of its form.
    Answer(Value),
    /// It escalates to its `escalateTo`, for a second timeout.
    Escalate,
}

/// What question's passed timeout does: its `onTimeout`, its form (`responseSchema`) and whether it escalated
/// already. `default` without defaults to give, and a second timeout after an escalation, expire it.
pub fn at_timeout(on_timeout: OnTimeout, response_schema: Option<&Value>, escalated: bool) -> AtTimeout {
    match on_timeout {
        OnTimeout::Default => match response_schema.and_then(|s| ResponseSchema::parse(s).ok()?.defaults()) {
            Some(defaults) => AtTimeout::Answer(defaults),
            None => AtTimeout::Expire,
        },
        OnTimeout::Escalate if !escalated => AtTimeout::Escalate,
        _ => AtTimeout::Expire,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{AtTimeout, at_timeout};
    use crate::questions::timeout::OnTimeout;

    #[test]
    fn a_timeout_expires_answers_with_defaults_or_escalates_once() {
        let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean", "default": false}}});
        assert_eq!(at_timeout(OnTimeout::Expire, Some(&schema), false), AtTimeout::Expire);
        assert_eq!(at_timeout(OnTimeout::Default, Some(&schema), false), AtTimeout::Answer(json!({"ok": false})));
        assert_eq!(at_timeout(OnTimeout::Default, None, false), AtTimeout::Expire, "no defaults to give");
        assert_eq!(at_timeout(OnTimeout::Escalate, None, false), AtTimeout::Escalate);
        assert_eq!(at_timeout(OnTimeout::Escalate, None, true), AtTimeout::Expire, "the second timeout expires it");
    }
}
