//! How long rows are kept: the default TTLs of messages and events and the sessions' TTL together, and the
//! check that ties them (upstream refuses to start on the same condition, in its config schema); the same
//! start-up check refuses a Slack app token Socket Mode cannot use.

use super::Config;

impl Config {
    /// The default TTLs of messages and events, and the sessions' TTL.
    pub fn ttls(&self) -> Ttls {
        Ttls {
            message_seconds: self.message_ttl_seconds as i64,
            event_seconds: self.event_ttl_seconds as i64,
            session_seconds: self.session_ttl_seconds as i64,
        }
    }

    /// What no single flag can check: a start-up with these settings is refused.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.session_ttl_seconds < self.message_ttl_seconds.max(self.event_ttl_seconds) {
            return Err(ConfigError::SessionTtlTooShort {
                session: self.session_ttl_seconds,
                message: self.message_ttl_seconds,
                event: self.event_ttl_seconds,
            });
        }
        if let Some(token) = &self.channels.slack_app_token {
            if !token.expose().starts_with("xapp-") {
                return Err(ConfigError::SlackAppToken("is not an app-level token (xapp-…)"));
            }
            if self.channels.slack_bot_token.is_none() {
                return Err(ConfigError::SlackAppToken("needs --slack-bot-token, to answer and update messages"));
            }
        }
        Ok(())
    }
}

/// Settings that cannot go together.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    /// Sessions would disappear while the messages and events they index are still kept.
    #[error(
        "SESSIONS_VISIBILITY_TTL_SECONDS (--session-ttl-seconds, {session}) must be at least \
         MESSAGE_VISIBILITY_TTL_SECONDS (--message-ttl-seconds, {message}) and EVENT_VISIBILITY_TTL_SECONDS \
         (--event-ttl-seconds, {event}), so a session is never hidden while its messages and events are kept"
    )]
    SessionTtlTooShort {
        /// The sessions' TTL.
        session: u64,
        /// The messages' default TTL.
        message: u64,
        /// The events' default TTL.
        event: u64,
    },
    /// Socket Mode cannot work with this `--slack-app-token`: why.
    #[error("--slack-app-token (ARK_BROKER_SLACK_APP_TOKEN) {0}")]
    SlackAppToken(&'static str),
}

/// How long rows are kept, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ttls {
    /// A message whose POST sets no `ttl_seconds`.
    pub message_seconds: i64,
    /// An event whose POST sets no `ttl_seconds`.
    pub event_seconds: i64,
    /// A session after its latest event or message.
    pub session_seconds: i64,
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[test]
    fn a_session_ttl_shorter_than_the_message_or_event_ttl_is_refused() {
        let mut config = Config::parse_from(["ark-broker"]);
        assert_eq!(config.check(), Ok(()), "the defaults are all 30 days");
        config.message_ttl_seconds = config.session_ttl_seconds + 1;
        let error = config.check().unwrap_err().to_string();
        assert!(
            error.starts_with("SESSIONS_VISIBILITY_TTL_SECONDS (--session-ttl-seconds, 2592000) must be"),
            "{error}"
        );
        config.message_ttl_seconds = 60;
        config.event_ttl_seconds = config.session_ttl_seconds + 1;
        assert!(config.check().is_err(), "the event TTL counts too");
        config.session_ttl_seconds = config.event_ttl_seconds;
        assert_eq!(config.check(), Ok(()), "equal is enough");
    }

    #[test]
    fn a_slack_app_token_must_be_an_xapp_token_and_come_with_the_bot_token() {
        let mut config = Config::parse_from(["ark-broker"]);
        config.channels.slack_app_token = Some("xoxb-not-an-app-token".parse().unwrap());
        config.channels.slack_bot_token = Some("xoxb-bot".parse().unwrap());
        let error = config.check().unwrap_err().to_string();
        assert!(error.contains("not an app-level token"), "{error}");
        config.channels.slack_app_token = Some("xapp-1-A1-1-abc".parse().unwrap());
        assert_eq!(config.check(), Ok(()));
        config.channels.slack_bot_token = None;
        let error = config.check().unwrap_err().to_string();
        assert!(error.contains("needs --slack-bot-token"), "{error}");
    }
}
