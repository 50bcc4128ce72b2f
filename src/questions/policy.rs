//! Who may answer (or decline) a question, with authentication on (`--answer-policy`): any principal; only
//! its recipient — the user it is addressed to, a member of the team it is addressed to (the teams file, or
//! the principal's Kubernetes groups), and once it escalated, those it escalated to; or whoever Kubernetes
//! RBAC lets update Queries in its namespace (a SubjectAccessReview). In every policy the principal that
//! asked may not answer its own question — except through `mcp:caller`, where the asker chose to ask the
//! person at its own client: there only that principal may answer, under the same policy otherwise. A
//! channel identity (`slack:U0123`) answers as the principal the identities file maps it to.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{
    bodies::NewQuestion,
    model::{QueryRef, Question},
    timeout::EscalateTo,
};
use crate::{
    auth::{
        Principal,
        access_review::AccessReviewer,
        directory::{DirectoryFile, DirectoryFileError, Shape},
    },
    config::{AnswerPolicy as Mode, Config},
};

/// What the policy reads of a question: who asked it, whom it is for, and its Query's namespace.
struct Asked<'a> {
    owner: Option<&'a str>,
    recipients: Vec<&'a str>,
    namespace: Option<&'a str>,
}

impl<'a> Asked<'a> {
    /// A question asked by `owner` of `recipient`, and of those it escalates to when `escalated_to` is given.
    fn new(
        owner: Option<&'a str>,
        recipient: &'a str,
        escalated_to: Option<&'a EscalateTo>,
        query: Option<&'a QueryRef>,
    ) -> Self {
        let mut recipients = vec![recipient];
        recipients.extend(escalated_to.iter().flat_map(|to| to.recipients.iter().map(String::as_str)));
        Asked { owner, recipients, namespace: query.and_then(|query| query.namespace.as_deref()) }
    }
}

/// Who is answering.
#[derive(Debug, Clone, Copy)]
pub enum Answerer<'a> {
    /// An authenticated principal (or the person a trusted proxy names).
    Principal(&'a Principal),
    /// A channel's identity: `slack:<user>`, `github:<login>`.
    Channel(&'a str),
    /// Whoever the client says (`answeredBy`), with authentication off; maybe nobody.
    Named(Option<&'a str>),
    /// The person at the MCP client that asked (`mcp:caller`), under the principal that client
    /// authenticates with (`None` with authentication off).
    Caller(Option<&'a Principal>),
}

impl<'a> Answerer<'a> {
    /// Who the question records as its answerer.
    pub fn recorded(self) -> Option<&'a str> {
        match self {
            Answerer::Principal(principal) => Some(principal.name()),
            Answerer::Channel(name) => Some(name),
            Answerer::Named(name) => name,
            Answerer::Caller(principal) => principal.map(Principal::name),
        }
    }
}

/// Why the policy cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum PolicySetupError {
    /// `recipient` or `kubernetes` without authentication: nobody's principal is known.
    #[error("--answer-policy recipient and kubernetes need authentication (--auth token or kubernetes)")]
    NeedsAuth,
    /// `kubernetes` without a reachable Kubernetes API configuration.
    #[error("--answer-policy kubernetes needs the Kubernetes API (in-cluster, a kubeconfig, or --kube-api-url): {0}")]
    NoKubernetes(String),
    /// A directory file cannot be used.
    #[error(transparent)]
    File(#[from] DirectoryFileError),
}

/// The answer policy of this replica.
#[derive(Debug, Clone)]
pub struct AnswerPolicy {
    /// Off with authentication off: everyone may answer, as before.
    on: bool,
    mode: Mode,
    teams: Option<DirectoryFile>,
    identities: Option<DirectoryFile>,
    /// With `kubernetes`: who asks RBAC.
    access: Option<AccessReviewer>,
}

impl AnswerPolicy {
    /// Everyone may answer.
    pub fn off() -> Self {
        AnswerPolicy { on: false, mode: Mode::Any, teams: None, identities: None, access: None }
    }

    /// The policy `config` asks for, with its files loaded (and re-read until `shutdown`).
    pub async fn from_config(
        config: &Config,
        auth_on: bool,
        shutdown: &CancellationToken,
    ) -> Result<(Self, Vec<JoinHandle<()>>), PolicySetupError> {
        if config.access.answer_policy != Mode::Any && !auth_on {
            return Err(PolicySetupError::NeedsAuth);
        }
        let access = match config.access.answer_policy {
            Mode::Kubernetes => Some(AccessReviewer::new(
                crate::kubernetes::client(config.kube_api_url.as_deref())
                    .await
                    .map_err(|error| PolicySetupError::NoKubernetes(error.to_string()))?,
            )),
            _ => None,
        };
        let load = |path: Option<&std::path::PathBuf>, shape| path.map(|p| DirectoryFile::load(p, shape)).transpose();
        let teams = load(config.access.teams_file.as_ref(), Shape::Team)?;
        let identities = load(config.access.identities_file.as_ref(), Shape::Identity)?;
        let reloads = teams.iter().chain(identities.iter()).map(|file| file.spawn_reload(shutdown.clone())).collect();
        Ok((AnswerPolicy { on: auth_on, mode: config.access.answer_policy, teams, identities, access }, reloads))
    }

    /// Whether `answerer` may answer (or decline) `question`; why not, in words for the person.
    pub async fn check(&self, question: &Question, answerer: Answerer<'_>) -> Result<(), String> {
        let escalated_to = question.escalate_to.as_ref().filter(|_| question.escalated_at.is_some());
        let asked = Asked::new(question.owner.as_deref(), &question.recipient, escalated_to, question.query.as_ref());
        self.decide(asked, answerer).await
    }

    /// Whether `answerer` could answer `question` once it is asked or once it escalates: `mcp:caller` asks
    /// this first, so a caller the policy would always refuse is told so instead of being asked in vain.
    pub async fn check_before_asking(&self, question: &NewQuestion, answerer: Answerer<'_>) -> Result<(), String> {
        let (owner, escalated_to) = (question.owner.as_deref(), question.escalate_to.as_ref());
        self.decide(Asked::new(owner, &question.recipient, escalated_to, question.query.as_ref()), answerer).await
    }

    async fn decide(&self, question: Asked<'_>, answerer: Answerer<'_>) -> Result<(), String> {
        if !self.on {
            return Ok(());
        }
        let principal = match answerer {
            Answerer::Principal(principal) => Some(principal.clone()),
            Answerer::Channel(identity) => {
                self.identities.as_ref().and_then(|ids| ids.values_of(identity).pop()).map(|name| Principal::new(&name))
            }
            Answerer::Named(_) => None,
            Answerer::Caller(principal) => principal.cloned(),
        };
        let asker = |principal: &Principal| question.owner == Some(principal.name());
        match (answerer, &principal) {
            (Answerer::Caller(_), Some(principal)) if !asker(principal) => {
                return Err(format!("{principal} did not ask this question, so it cannot answer it as its caller"));
            }
            (Answerer::Caller(_), None) => return Err("who is answering is not known".to_owned()),
            (Answerer::Caller(_), Some(_)) => {}
            (_, Some(principal)) if asker(principal) => {
                return Err(format!("{principal} asked this question and may not answer it"));
            }
            _ => {}
        }
        if self.mode == Mode::Any {
            return Ok(());
        }
        let Some(principal) = principal else {
            return Err(match answerer {
                Answerer::Channel(identity) => {
                    format!("{identity} is not mapped to a principal, so who may answer cannot be checked")
                }
                _ => "who is answering is not known".to_owned(),
            });
        };
        if let Some(access) = &self.access {
            return Self::check_rbac(access, question.namespace, &principal).await;
        }
        if question.recipients.iter().any(|recipient| self.covers(recipient, &principal)) {
            return Ok(());
        }
        Err(format!("{principal} is not a recipient of this question ({})", question.recipients.join(", ")))
    }

    /// `kubernetes`: RBAC decides, in the namespace of the question's Query.
    async fn check_rbac(access: &AccessReviewer, namespace: Option<&str>, principal: &Principal) -> Result<(), String> {
        let Some(namespace) = namespace else {
            return Err("the question names no Query namespace, so Kubernetes cannot say who may answer it".into());
        };
        match access.may_update_queries(principal, namespace).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("{principal} may not update queries in namespace {namespace} (Kubernetes RBAC)")),
            Err(error) => Err(format!("who may answer cannot be checked right now: {error}")),
        }
    }

    /// Whether `recipient` (an `ark://` address) names `principal`: as the user, or a team it is in (by the
    /// teams file, or one of its Kubernetes groups).
    fn covers(&self, recipient: &str, principal: &Principal) -> bool {
        if let Some(user) = recipient.strip_prefix("ark://users/") {
            return user == principal.name();
        }
        let Some(team) = recipient.strip_prefix("ark://teams/") else { return false };
        principal.groups().iter().any(|group| group == team)
            || self.teams.as_ref().is_some_and(|teams| teams.values_of(team).iter().any(|m| m == principal.name()))
    }
}
