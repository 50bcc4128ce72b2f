//! The rules a new question keeps: addresses, sizes, TTL, its form, no NUL (an answer's are in
//! [`super::answering`]). Each check returns the
//! domain's [`Invalid`], which REST answers with 400 and MCP with invalid params.

use super::{
    bodies::NewQuestion,
    channel::{CALLER, check_entries},
    form::ResponseSchema,
    timeout::OnTimeout,
};
use crate::{
    config::Config,
    validate::{self, Checked, Invalid},
};

/// Longest `ttlSeconds` accepted (a year).
const MAX_TTL_SECONDS: i64 = 365 * 24 * 3600;
/// Most channels one question can be routed to.
const MAX_CHANNELS: usize = 16;
/// Most options a question offers (Slack shows at most 25 elements in an actions block).
const MAX_OPTIONS: usize = 10;
/// Longest option (Slack's limit for a button's text).
const MAX_OPTION_CHARS: usize = 75;

impl NewQuestion {
    /// Everything a question must keep to be asked here: [`NewQuestion::validate`], and channel entries this
    /// replica has credentials for, written one way each (REST and both MCP eras ask through this).
    pub fn admit(&mut self, config: &Config) -> Checked {
        self.validate()?;
        check_entries(config, &mut self.channels)?;
        if self.channels.iter().any(|c| c == CALLER) && self.caller_elicitation.is_none() {
            return Err(Invalid(format!(
                "channels: '{CALLER}' asks the person at the calling MCP client, so only ask_question over MCP can \
                 name it"
            )));
        }
        match &mut self.escalate_to {
            Some(to) if to.channels.iter().any(|c| c == CALLER) => Err(Invalid(format!(
                "escalateTo.channels: '{CALLER}' is not a channel a question escalates to (its caller was asked \
                 from the start)"
            ))),
            Some(to) => check_entries(config, &mut to.channels),
            None => Ok(()),
        }
    }

    /// Checks the addresses, content, channels and TTL.
    pub fn validate(&self) -> Checked {
        ark_url("sender", &self.sender)?;
        ark_url("recipient", &self.recipient)?;
        if self.content.trim().is_empty() {
            return Err(Invalid("content: must not be empty".into()));
        }
        no_nul("content", &self.content)?;
        if self.channels.len() > MAX_CHANNELS {
            return Err(Invalid(format!("channels: at most {MAX_CHANNELS}")));
        }
        for channel in &self.channels {
            validate::key("channels", channel)?;
        }
        if self.options.len() > MAX_OPTIONS {
            return Err(Invalid(format!("options: at most {MAX_OPTIONS}")));
        }
        for option in &self.options {
            if option.trim().is_empty() || option.chars().count() > MAX_OPTION_CHARS {
                return Err(Invalid(format!(
                    "options: each must be 1 to {MAX_OPTION_CHARS} characters, got '{option}'"
                )));
            }
            no_nul("options", option)?;
        }
        if let Some(schema) = &self.response_schema {
            if !self.options.is_empty() {
                return Err(Invalid("options: not with responseSchema (give the choices as an enum field)".into()));
            }
            ResponseSchema::parse(schema)?;
        }
        if let Some(query) = &self.query {
            validate::key("query.name", &query.name)?;
            if let Some(namespace) = &query.namespace {
                validate::key("query.namespace", namespace)?;
            }
        }
        if let Some(tool_call_id) = &self.tool_call_id {
            validate::key("toolCallId", tool_call_id)?;
        }
        for (field, seconds) in [
            ("ttlSeconds", self.ttl_seconds),
            ("timeoutSeconds", self.timeout_seconds),
            ("remindEverySeconds", self.remind_every_seconds),
        ] {
            if seconds.is_some_and(|s| s <= 0 || s > MAX_TTL_SECONDS) {
                return Err(Invalid(format!("{field}: must be between 1 and {MAX_TTL_SECONDS}")));
            }
        }
        self.validate_timeout()
    }

    /// A timeout is given once, and what it does can be done.
    fn validate_timeout(&self) -> Checked {
        let given = [self.ttl_seconds.is_some(), self.timeout_seconds.is_some(), self.expires_at.is_some()];
        if given.iter().filter(|given| **given).count() > 1 {
            return Err(Invalid("timeoutSeconds: give one of ttlSeconds, timeoutSeconds and expiresAt".into()));
        }
        if let Some(at) = self.expires_at {
            let now = chrono::Utc::now();
            if at <= now || at > now + chrono::Duration::seconds(MAX_TTL_SECONDS) {
                return Err(Invalid("expiresAt: must be in the future, within a year".into()));
            }
        }
        let on_timeout = self.on_timeout.unwrap_or_default();
        if on_timeout != OnTimeout::Expire && !given.contains(&true) {
            return Err(Invalid(format!("onTimeout: {} needs timeoutSeconds or expiresAt", on_timeout.as_str())));
        }
        if on_timeout == OnTimeout::Default {
            let defaults = self.response_schema.as_ref().and_then(|s| ResponseSchema::parse(s).ok()?.defaults());
            if defaults.is_none() {
                return Err(Invalid(
                    "onTimeout: default needs a responseSchema whose defaults answer every required field".into(),
                ));
            }
        }
        match (&self.escalate_to, on_timeout) {
            (Some(_), mode) if mode != OnTimeout::Escalate => {
                Err(Invalid("escalateTo: only with onTimeout: escalate".into()))
            }
            (None, OnTimeout::Escalate) => Err(Invalid("escalateTo: required with onTimeout: escalate".into())),
            (Some(to), _) => {
                if to.recipients.is_empty() && to.channels.is_empty() {
                    return Err(Invalid("escalateTo: name at least one recipient or channel".into()));
                }
                if to.recipients.len() > MAX_CHANNELS || to.channels.len() > MAX_CHANNELS {
                    return Err(Invalid(format!("escalateTo: at most {MAX_CHANNELS} recipients and channels each")));
                }
                for recipient in &to.recipients {
                    ark_url("escalateTo.recipients", recipient)?;
                }
                for channel in &to.channels {
                    validate::key("escalateTo.channels", channel)?;
                }
                Ok(())
            }
            (None, _) => Ok(()),
        }
    }
}

/// Checks an `ark://agents|users|teams|channels/<name>` address.
pub fn ark_url(field: &str, value: &str) -> Checked {
    let invalid = || Invalid(format!("{field}: must be ark://agents|users|teams|channels/<name>, got '{value}'"));
    no_nul(field, value)?;
    let rest = value.strip_prefix("ark://").ok_or_else(invalid)?;
    let (kind, name) = rest.split_once('/').ok_or_else(invalid)?;
    let name_ok =
        !name.is_empty() && name.len() <= 253 && !name.contains('/') && !name.chars().any(char::is_whitespace);
    if matches!(kind, "agents" | "users" | "teams" | "channels") && name_ok { Ok(()) } else { Err(invalid()) }
}

fn no_nul(field: &str, value: &str) -> Checked {
    if value.contains('\0') {
        return Err(Invalid(format!("{field}: must not contain NUL")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::ark_url;

    #[test]
    fn ark_urls_name_a_kind_and_one_name() {
        for good in ["ark://agents/reviewer", "ark://users/john.doe@example.com", "ark://teams/a", "ark://channels/ops"]
        {
            assert!(ark_url("x", good).is_ok(), "{good}");
        }
        for bad in ["", "ark://robots/x", "ark://users/", "ark://users/a/b", "http://users/x", "ark://users/a b"] {
            assert!(ark_url("x", bad).is_err(), "{bad}");
        }
    }
}
