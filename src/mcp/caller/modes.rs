//! The kinds of elicitation a client declared: `form` and `url` (a bare `elicitation: {}` means form, as the
//! 2025-11-25 specification has it for clients older than URL mode). A 2026-07-28 client declares its
//! capabilities on every request; a 2025-11-25 one only in `initialize`, so a client that declared
//! elicitation there gets an `Mcp-Session-Id` that spells the modes, and any replica reads them back from the
//! header the client sends on every later request: nothing is kept on the server.

use serde_json::Value;
use uuid::Uuid;

/// What a session id carrying elicitation modes starts with.
const SESSION_PREFIX: &str = "ark-elicit.";

/// The elicitation modes a client supports (none: it cannot be asked).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Modes {
    /// Form mode: the person fills in fields the server gives.
    pub form: bool,
    /// URL mode: the person opens a link the server gives.
    pub url: bool,
}

impl Modes {
    /// The modes in a `ClientCapabilities` object (an `initialize`'s, or a 2026-07-28 request's `_meta`).
    pub fn of(capabilities: &Value) -> Self {
        let Some(elicitation) = capabilities.get("elicitation").filter(|e| e.is_object()) else {
            return Modes::default();
        };
        let (form, url) = (elicitation.get("form").is_some(), elicitation.get("url").is_some());
        if form || url { Modes { form, url } } else { Modes { form: true, url: false } }
    }

    /// Whether the client can be asked at all.
    pub fn any(self) -> bool {
        self.form || self.url
    }

    /// A session id for a 2025-11-25 client with these modes (`ark-elicit.form+url.<uuid>`); none when it
    /// declared no elicitation, which keeps such clients sessionless as before.
    pub fn session_id(self) -> Option<String> {
        let modes: Vec<&str> =
            [(self.form, "form"), (self.url, "url")].into_iter().filter_map(|(on, name)| on.then_some(name)).collect();
        (!modes.is_empty()).then(|| format!("{SESSION_PREFIX}{}.{}", modes.join("+"), Uuid::new_v4().simple()))
    }

    /// The modes a session id spells (none for any other id).
    pub fn from_session_id(id: &str) -> Self {
        let Some((modes, _)) = id.strip_prefix(SESSION_PREFIX).and_then(|rest| rest.split_once('.')) else {
            return Modes::default();
        };
        let has = |name| modes.split('+').any(|mode| mode == name);
        Modes { form: has("form"), url: has("url") }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Modes;

    #[test]
    fn declared_modes_are_read_and_round_trip_through_a_session_id() {
        let (form, url, both) =
            (Modes { form: true, url: false }, Modes { form: false, url: true }, Modes { form: true, url: true });
        assert_eq!(Modes::of(&json!({"elicitation": {}})), form, "a bare capability is form mode");
        assert_eq!(Modes::of(&json!({"elicitation": {"url": {}}})), url);
        assert_eq!(Modes::of(&json!({"elicitation": {"form": {}, "url": {}}})), both);
        assert_eq!(Modes::of(&json!({"sampling": {}})), Modes::default());
        assert_eq!(Modes::default().session_id(), None);
        for modes in [form, url, both] {
            let id = modes.session_id().unwrap();
            assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "visible ASCII: {id}");
            assert_eq!(Modes::from_session_id(&id), modes);
        }
        assert_eq!(Modes::from_session_id("some-other-server-session"), Modes::default());
        assert_eq!(Modes::from_session_id("ark-elicit.sampling.x"), Modes::default());
    }
}
