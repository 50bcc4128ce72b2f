//! The kinds of value the flags take: the enums, and the secrets whose `Debug` form hides them (a database URL's
//! password, tokens), so a printed or logged configuration never shows one.

use std::{convert::Infallible, fmt, str::FromStr};

use clap::ValueEnum;

/// How callers authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AuthMode {
    /// Not at all.
    None,
    /// A bearer token from the tokens file.
    Token,
    /// A bearer token checked with a Kubernetes TokenReview.
    Kubernetes,
}

/// Who may answer a question, with authentication on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum AnswerPolicy {
    /// Any principal (but not the one that asked).
    Any,
    /// The principal it is addressed to: `ark://users/<principal>`, a member of `ark://teams/<team>` (the
    /// teams file, or a Kubernetes group of its), and once it escalated, those it escalated to.
    Recipient,
    /// Whoever Kubernetes RBAC lets `update` `queries` in the question's namespace (a SubjectAccessReview).
    Kubernetes,
}

/// Whether the broker patches Query status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusPatching {
    /// When Kubernetes is reachable (in-cluster, kubeconfig, or `--kube-api-url`).
    Auto,
    /// Never.
    Off,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// JSON when stdout is not a terminal, text otherwise.
    Auto,
    /// One JSON object per line.
    Json,
    /// Human-readable text.
    Text,
}

/// A PostgreSQL connection URL. Its `Debug` form hides the password, so a logged or printed configuration
/// never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl(pub(super) String);

impl DatabaseUrl {
    /// The URL itself, to connect with.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl FromStr for DatabaseUrl {
    type Err = Infallible;

    fn from_str(url: &str) -> Result<Self, Infallible> {
        Ok(DatabaseUrl(url.to_owned()))
    }
}

/// A secret setting (a token, a signing secret): its `Debug` form never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, to use it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl FromStr for Secret {
    type Err = Infallible;

    fn from_str(secret: &str) -> Result<Self, Infallible> {
        Ok(Secret(secret.to_owned()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"***\"")
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `scheme://user:password@host…`: everything between the user's `:` and the last `@` of the authority.
        let url = &self.0;
        let authority_start = url.find("://").map_or(0, |i| i + 3);
        let authority_end = url[authority_start..].find(['/', '?']).map_or(url.len(), |i| authority_start + i);
        let authority = &url[authority_start..authority_end];
        match (authority.rfind('@'), authority.find(':')) {
            (Some(at), Some(colon)) if colon < at => {
                write!(f, "\"{}{}:***{}\"", &url[..authority_start], &authority[..colon], &url[authority_start + at..])
            }
            _ => write!(f, "{url:?}"),
        }
    }
}

/// A flag that names an HTTP header must name a valid one.
pub(super) fn header_name(raw: &str) -> Result<String, String> {
    axum::http::HeaderName::from_bytes(raw.trim().as_bytes())
        .map(|name| name.as_str().to_owned())
        .map_err(|_| format!("'{raw}' is not an HTTP header name"))
}

#[cfg(test)]
mod tests {
    use super::DatabaseUrl;
    use crate::config::Config;

    #[test]
    fn the_database_password_never_shows_in_debug_output() {
        let url: DatabaseUrl = "postgres://ark:s3cret@db.example:5432/ark?sslmode=require".parse().unwrap();
        assert_eq!(format!("{url:?}"), r#""postgres://ark:***@db.example:5432/ark?sslmode=require""#);
        let config = Config::for_database("postgres://u:p%40ss@h/db");
        let printed = format!("{config:?}");
        assert!(!printed.contains("p%40ss") && printed.contains("u:***@h/db"), "{printed}");
        let mut config = Config::for_database("postgres://u@h/db");
        config.channels.slack_bot_token = Some("xoxb-s3cret".parse().unwrap());
        config.channels.github_token = Some("ghp_s3cret".parse().unwrap());
        assert!(!format!("{config:?}").contains("s3cret"), "no token in Debug");
        let no_password: DatabaseUrl = "postgres://postgres@127.0.0.1:5432/postgres".parse().unwrap();
        assert_eq!(format!("{no_password:?}"), r#""postgres://postgres@127.0.0.1:5432/postgres""#);
    }
}
