//! Who is calling: the `--auth` modes (`none`, `token` with a tokens file, `kubernetes` with TokenReview), the
//! person named by a trusted proxy's header, and the layer that answers 401 without a valid credential. The
//! [`Principal`] it finds travels in the request's extensions; tasks and questions are bound to it.

pub mod access_review;
pub mod directory;
mod file_watch;
mod layer;
mod token_review;
mod tokens;

use std::{fmt, path::PathBuf, sync::Arc, time::Duration};

use axum::http::{HeaderMap, HeaderName, Method, header};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use layer::{OPEN_PATHS, admit, require_credentials};
pub use token_review::ReviewError;
pub use tokens::TokensFileError;

use self::{token_review::TokenReviewer, tokens::TokenFile};
use crate::config::{AuthMode, Config};

/// Longest person name taken from the trusted user header.
const MAX_PERSON_NAME: usize = 256;

/// An authenticated caller: a tokens file's principal, a ServiceAccount's user name, or the person a trusted
/// proxy names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    name: Arc<str>,
    /// Its Kubernetes groups (from its TokenReview); none for the other kinds.
    groups: Arc<[String]>,
}

impl Principal {
    /// The principal called `name`.
    pub fn new(name: &str) -> Self {
        Principal { name: Arc::from(name), groups: Arc::new([]) }
    }

    /// The principal called `name`, a member of `groups`.
    pub fn with_groups(name: &str, groups: Vec<String>) -> Self {
        Principal { name: Arc::from(name), groups: groups.into() }
    }

    /// Its name, as `answeredBy` and the tasks' owner record it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The groups the Kubernetes API says it is in (`ark://teams/<group>` names them as teams).
    pub fn groups(&self) -> &[String] {
        &self.groups
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// Why authentication could not be set up at start.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    /// `--auth token` without a file.
    #[error("--auth token needs --auth-tokens-file (ARK_BROKER_AUTH_TOKENS_FILE)")]
    NoTokensFile,
    /// The tokens file is unusable.
    #[error(transparent)]
    TokensFile(#[from] TokensFileError),
    /// `--auth kubernetes` without a reachable API configuration.
    #[error("--auth kubernetes needs the Kubernetes API (in-cluster, a kubeconfig, or --kube-api-url): {0}")]
    NoKubernetes(String),
}

/// How a credential is checked.
#[derive(Debug, Clone)]
enum Verifier {
    Off,
    Tokens(TokenFile),
    Kubernetes(Box<TokenReviewer>),
}

/// The replica's authentication: how bearer tokens are checked and which header names a person.
#[derive(Debug, Clone)]
pub struct Authenticator {
    verifier: Verifier,
    trusted_user_header: Option<HeaderName>,
    /// `--auth-open-ark-routes`: the routes Ark's components call without a credential take none.
    open_ark_routes: bool,
}

/// What a request's credentials establish.
#[derive(Debug)]
pub enum Identified {
    /// Nobody in particular: authentication is off and no trusted header names a person.
    Anonymous,
    /// This principal.
    Principal(Principal),
    /// No valid credential (401); `presented` when a bearer token was sent but is not valid.
    Refused {
        /// Whether a token was presented.
        presented: bool,
    },
    /// The credential could not be checked right now (503).
    Unverifiable(ReviewError),
}

impl Authenticator {
    /// No authentication: today's behaviour, every caller anonymous.
    pub fn off() -> Self {
        Authenticator { verifier: Verifier::Off, trusted_user_header: None, open_ark_routes: false }
    }

    /// The authentication `config` asks for, and the task that reloads a tokens file.
    pub async fn from_config(
        config: &Config,
        shutdown: &CancellationToken,
    ) -> Result<(Self, Option<JoinHandle<()>>), AuthSetupError> {
        let (verifier, task) = match config.access.auth {
            AuthMode::None => (Verifier::Off, None),
            AuthMode::Token => {
                let path: &PathBuf = config.access.auth_tokens_file.as_ref().ok_or(AuthSetupError::NoTokensFile)?;
                let file = TokenFile::load(path)?;
                let task = file.spawn_reload(shutdown.clone());
                (Verifier::Tokens(file), Some(task))
            }
            AuthMode::Kubernetes => {
                let client = crate::kubernetes::client(config.kube_api_url.as_deref())
                    .await
                    .map_err(|e| AuthSetupError::NoKubernetes(e.to_string()))?;
                let audiences =
                    config.access.auth_audiences.iter().map(|a| a.trim().to_owned()).filter(|a| !a.is_empty());
                let ttl = Duration::from_secs(config.access.auth_cache_seconds);
                (Verifier::Kubernetes(Box::new(TokenReviewer::new(client, audiences.collect(), ttl))), None)
            }
        };
        let trusted_user_header = config.access.trusted_user_header.as_deref().and_then(|name| name.parse().ok());
        let open_ark_routes = config.access.auth_open_ark_routes;
        Ok((Authenticator { verifier, trusted_user_header, open_ark_routes }, task))
    }

    /// Whether callers must authenticate (and tasks are bound to them).
    pub fn is_on(&self) -> bool {
        !matches!(self.verifier, Verifier::Off)
    }

    /// Who sends a request of `method` to `path` with `headers`.
    pub async fn identify(&self, method: &Method, path: &str, headers: &HeaderMap) -> Identified {
        let person = self.person(headers);
        let verifier = match &self.verifier {
            Verifier::Off => return person.map_or(Identified::Anonymous, Identified::Principal),
            verifier => verifier,
        };
        if headers.get_all(header::AUTHORIZATION).iter().nth(1).is_some() {
            // Which of several credentials counts is not for the order of headers to decide.
            return Identified::Refused { presented: true };
        }
        let Some(token) = bearer_token(headers) else {
            // A person the proxy vouches for may do what the page does; Ark's own callers, when let, what they
            // call; everything else needs a token.
            return match person {
                Some(person) if person_may(method, path) => Identified::Principal(person),
                _ if self.open_ark_routes && ark_calls_without_credentials(method, path) => Identified::Anonymous,
                _ => Identified::Refused { presented: false },
            };
        };
        let verdict = match verifier {
            Verifier::Tokens(file) => Ok(file.principal_of(token)),
            Verifier::Kubernetes(reviewer) => reviewer.principal_of(token).await,
            Verifier::Off => unreachable!("returned above"),
        };
        match verdict {
            Ok(Some(principal)) => Identified::Principal(principal),
            Ok(None) => Identified::Refused { presented: true },
            Err(error) => Identified::Unverifiable(error),
        }
    }

    /// The person the trusted header names, if it is configured and set to a usable name.
    fn person(&self, headers: &HeaderMap) -> Option<Principal> {
        let value = headers.get(self.trusted_user_header.as_ref()?)?.to_str().ok()?.trim();
        (!value.is_empty() && value.len() <= MAX_PERSON_NAME && !value.contains('\0')).then(|| Principal::new(value))
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case, RFC 7235).
fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// What the page does: read the page, questions, streams and Queries, and answer, decline or cancel questions.
fn person_may(method: &Method, path: &str) -> bool {
    let under = |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
    let reads = under("/ui") || under("/questions") || under("/stream") || under("/queries");
    match *method {
        Method::GET | Method::HEAD => reads,
        Method::POST => {
            (path.starts_with("/ui/questions/") || path.starts_with("/questions/"))
                && (path.ends_with("/answer") || path.ends_with("/decline"))
        }
        Method::PATCH | Method::DELETE => path.starts_with("/questions/") && path.matches('/').count() == 2,
        _ => false,
    }
}

/// What Ark's components call with no header to carry a credential (they find the broker through the
/// discovery ConfigMaps): the executor's chunk POST and `/complete`, ark-api's read of one Query's stream, the
/// events of the executor and the controller, and the controller's OTLP spans.
fn ark_calls_without_credentials(method: &Method, path: &str) -> bool {
    let stream = path.strip_prefix("/stream/").filter(|rest| !rest.is_empty());
    match *method {
        Method::GET => stream.is_some_and(|id| !id.contains('/')),
        Method::POST => {
            path == "/events"
                || path == "/v1/traces"
                || stream.is_some_and(|rest| {
                    let id = rest.strip_suffix("/complete").unwrap_or(rest);
                    !id.is_empty() && !id.contains('/')
                })
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_the_authorization_header() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            bearer_token(&headers).map(str::to_owned)
        };
        assert_eq!(with("Bearer abc").as_deref(), Some("abc"));
        assert_eq!(with("bearer  abc ").as_deref(), Some("abc"));
        assert_eq!(with("Basic abc"), None);
        assert_eq!(with("Bearer "), None);
        assert_eq!(bearer_token(&HeaderMap::new()), None);
    }

    #[test]
    fn a_person_may_use_the_page_and_answer_but_nothing_else() {
        assert!(person_may(&Method::GET, "/ui"));
        assert!(person_may(&Method::GET, "/questions?watch=true".split('?').next().unwrap()));
        assert!(person_may(&Method::GET, "/stream/q-1"));
        assert!(person_may(&Method::POST, "/ui/questions/q1/answer"));
        assert!(person_may(&Method::POST, "/questions/q1/answer"));
        assert!(person_may(&Method::POST, "/ui/questions/q1/decline"));
        assert!(person_may(&Method::POST, "/questions/q1/decline"));
        assert!(person_may(&Method::PATCH, "/questions/q1"));
        assert!(person_may(&Method::DELETE, "/questions/q1"));
        assert!(!person_may(&Method::POST, "/questions"), "asking is for agents");
        assert!(!person_may(&Method::POST, "/stream/q-1"), "writing a stream");
        assert!(!person_may(&Method::GET, "/messages"));
        assert!(!person_may(&Method::DELETE, "/stream"));
        assert!(!person_may(&Method::GET, "/uix"));
    }

    #[test]
    fn ark_calls_without_credentials_are_its_stream_writes_and_read_events_and_spans() {
        for (method, path) in [
            (Method::POST, "/stream/q-1"),
            (Method::POST, "/stream/q-1/complete"),
            (Method::GET, "/stream/q-1"),
            (Method::POST, "/events"),
            (Method::POST, "/v1/traces"),
        ] {
            assert!(ark_calls_without_credentials(&method, path), "{method} {path}");
        }
        for (method, path) in [
            (Method::GET, "/stream"),
            (Method::GET, "/stream/"),
            (Method::DELETE, "/stream/q-1"),
            (Method::POST, "/stream/q-1/other"),
            (Method::POST, "/stream//complete"),
            (Method::GET, "/events"),
            (Method::POST, "/messages"),
            (Method::POST, "/questions"),
            (Method::POST, "/mcp"),
        ] {
            assert!(!ark_calls_without_credentials(&method, path), "{method} {path}");
        }
    }
}
