//! Who may call and who may answer: the `--auth` mode and its credentials, the trusted proxy's header, the
//! routes Ark's own components call without a credential, and the answer policy with its files.

use std::path::PathBuf;

use clap::Args;

use super::values::{AnswerPolicy, AuthMode, header_name};

/// The access flags, flattened into [`super::Config`].
#[derive(Debug, Clone, Args)]
pub struct Access {
    /// Who may call: `none` (anyone who reaches the broker), `token` (a bearer token from
    /// `--auth-tokens-file`), or `kubernetes` (a bearer token the Kubernetes API accepts in a TokenReview).
    /// With `token` or `kubernetes`, every route but `/health` and `/readyz` needs a credential, and MCP tasks
    /// and pending-question lists are each caller's own.
    #[arg(long, env = "ARK_BROKER_AUTH", value_enum, default_value_t = AuthMode::None)]
    pub auth: AuthMode,

    /// The tokens of `--auth token`: one `<token> <principal>` per line, `#` comments; re-read when it changes.
    #[arg(long, env = "ARK_BROKER_AUTH_TOKENS_FILE")]
    pub auth_tokens_file: Option<PathBuf>,

    /// Audiences a token must be valid for under `--auth kubernetes` (comma-separated; empty: the API
    /// server's own).
    #[arg(long, env = "ARK_BROKER_AUTH_AUDIENCES", value_delimiter = ',')]
    pub auth_audiences: Vec<String>,

    /// Seconds a TokenReview's verdict is reused for the same token.
    #[arg(long, env = "ARK_BROKER_AUTH_CACHE_SECONDS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub auth_cache_seconds: u64,

    /// A header set by an authenticating proxy in front of the page (e.g. oauth2-proxy's
    /// `X-Auth-Request-User`) naming the person; it becomes `answeredBy`. With auth on, a request carrying it
    /// and no token may do what the page does (read, answer, cancel). Set it only when the proxy overwrites the
    /// header on every request that can reach the broker.
    #[arg(long, env = "ARK_BROKER_TRUSTED_USER_HEADER", value_parser = header_name)]
    pub trusted_user_header: Option<String>,

    /// Who may answer (or decline) a question, with authentication on: `any` principal, its `recipient`, or
    /// whoever `kubernetes` RBAC lets update Queries in its namespace (a SubjectAccessReview). In every policy
    /// the principal that asked may not answer its own question.
    #[arg(long, env = "ARK_BROKER_ANSWER_POLICY", value_enum, default_value = "any")]
    pub answer_policy: AnswerPolicy,

    /// `recipient` policy: a file of `<team> <principal> <principal>…` lines, re-read when it changes.
    #[arg(long, env = "ARK_BROKER_TEAMS_FILE")]
    pub teams_file: Option<PathBuf>,

    /// Channel identities as principals: `<identity> <principal>` lines (`slack:U0123 alice`), re-read on change.
    #[arg(long, env = "ARK_BROKER_IDENTITIES_FILE")]
    pub identities_file: Option<PathBuf>,

    /// Let Ark's own callers that send no credential use the routes they call, with auth on: the executor's
    /// chunk POSTs and `/complete` (`POST /stream/{id}`, `POST /stream/{id}/complete`), the events it and the
    /// controller post (`POST /events`), the controller's spans (`POST /v1/traces`), and ark-api's read of a
    /// Query's stream (`GET /stream/{id}`). Ark sends no header on these (it finds the broker through the
    /// `ark-config-streaming` and `ark-config-broker` ConfigMaps, which carry none), so without this they get
    /// 401. Anyone who reaches the port may then write and read streams and post events: admit only Ark's
    /// namespaces with a NetworkPolicy.
    #[arg(long, env = "ARK_BROKER_AUTH_OPEN_ARK_ROUTES", default_value_t = false)]
    pub auth_open_ark_routes: bool,
}
