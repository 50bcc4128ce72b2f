//! A question's timeout — the one word for when its wait ends (`timeoutSeconds`, or `ttlSeconds` as upstream
//! says it; `expiresAt`) and what happens then: what it does (`onTimeout`), to whom it escalates
//! (`escalateTo`), and which of those a due question gets ([`at_timeout`]). The store acts on it
//! (`store::timeout`), exactly once, as [`TIMEOUT_ACTOR`].

mod action;

pub use action::{AtTimeout, TIMEOUT_ACTOR, at_timeout};

use rmcp::schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// What a question's timeout does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[schemars(crate = "rmcp::schemars")]
pub enum OnTimeout {
    /// It expires (unanswered).
    #[default]
    Expire,
    /// It is answered with its `responseSchema`'s defaults, by `system:timeout`.
    Default,
    /// `escalateTo` is notified and the question gets a second timeout of the same length; then it expires.
    Escalate,
}

impl OnTimeout {
    /// The stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            OnTimeout::Expire => "expire",
            OnTimeout::Default => "default",
            OnTimeout::Escalate => "escalate",
        }
    }

    /// Whether it only expires (what a question does unless told otherwise).
    pub fn is_expire(&self) -> bool {
        *self == OnTimeout::Expire
    }

    /// Reads the stored form (an unknown one expires, as before this existed).
    pub fn parse(raw: &str) -> Self {
        match raw {
            "default" => OnTimeout::Default,
            "escalate" => OnTimeout::Escalate,
            _ => OnTimeout::Expire,
        }
    }
}

/// Who else hears of a question when its timeout escalates it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(crate = "rmcp::schemars")]
pub struct EscalateTo {
    /// More people or teams who may answer (`ark://users|teams/<name>`).
    #[serde(default)]
    pub recipients: Vec<String>,
    /// More channels it is delivered to (`slack:<channel>`, `github:<owner>/<repo>#<n>`).
    #[serde(default)]
    pub channels: Vec<String>,
}
