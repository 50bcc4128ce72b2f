//! How long rows are kept: the default TTLs of messages and events and the sessions' TTL together, and the
//! check that ties them (upstream refuses to start on the same condition, in its config schema).

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
}
