//! Who may answer (or decline) a question, with authentication on (`--answer-policy`): any principal, or only
//! its recipient — the user it is addressed to, a member of the team it is addressed to (the teams file), and
//! once it escalated, those it escalated to. In every policy the principal that asked may not answer its own
//! question. A channel identity (`slack:U0123`) answers as the principal the identities file maps it to.

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::model::Question;
use crate::{
    auth::directory::{DirectoryFile, DirectoryFileError, Shape},
    config::{AnswerPolicy as Mode, Config},
};

/// Who is answering.
#[derive(Debug, Clone, Copy)]
pub enum Answerer<'a> {
    /// An authenticated principal (or the person a trusted proxy names).
    Principal(&'a str),
    /// A channel's identity: `slack:<user>`, `github:<login>`.
    Channel(&'a str),
    /// Whoever the client says (`answeredBy`), with authentication off; maybe nobody.
    Named(Option<&'a str>),
}

impl<'a> Answerer<'a> {
    /// Who the question records as its answerer.
    pub fn recorded(self) -> Option<&'a str> {
        match self {
            Answerer::Principal(name) | Answerer::Channel(name) => Some(name),
            Answerer::Named(name) => name,
        }
    }
}

/// Why the policy cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum PolicySetupError {
    /// `recipient` without authentication: nobody's principal is known.
    #[error("--answer-policy recipient needs authentication (--auth token or kubernetes)")]
    NeedsAuth,
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
}

impl AnswerPolicy {
    /// Everyone may answer.
    pub fn off() -> Self {
        AnswerPolicy { on: false, mode: Mode::Any, teams: None, identities: None }
    }

    /// The policy `config` asks for, with its files loaded (and re-read until `shutdown`).
    pub fn from_config(
        config: &Config,
        auth_on: bool,
        shutdown: &CancellationToken,
    ) -> Result<(Self, Vec<JoinHandle<()>>), PolicySetupError> {
        if config.answer_policy == Mode::Recipient && !auth_on {
            return Err(PolicySetupError::NeedsAuth);
        }
        let load = |path: Option<&std::path::PathBuf>, shape| path.map(|p| DirectoryFile::load(p, shape)).transpose();
        let teams = load(config.teams_file.as_ref(), Shape::Team)?;
        let identities = load(config.identities_file.as_ref(), Shape::Identity)?;
        let reloads = teams.iter().chain(identities.iter()).map(|file| file.spawn_reload(shutdown.clone())).collect();
        Ok((AnswerPolicy { on: auth_on, mode: config.answer_policy, teams, identities }, reloads))
    }

    /// Whether `answerer` may answer (or decline) `question`; why not, in words for the person.
    pub fn check(&self, question: &Question, answerer: Answerer<'_>) -> Result<(), String> {
        if !self.on {
            return Ok(());
        }
        let principal = match answerer {
            Answerer::Principal(name) => Some(name.to_owned()),
            Answerer::Channel(identity) => self.identities.as_ref().and_then(|ids| ids.values_of(identity).pop()),
            Answerer::Named(_) => None,
        };
        if let (Some(principal), Some(owner)) = (&principal, &question.owner)
            && principal == owner
        {
            return Err(format!("{principal} asked this question and may not answer it"));
        }
        if self.mode == Mode::Any {
            return Ok(());
        }
        let Some(principal) = principal else {
            return Err(match answerer {
                Answerer::Channel(identity) => {
                    format!("{identity} is not mapped to a principal, so it cannot be told to be a recipient")
                }
                _ => "who is answering is not known".to_owned(),
            });
        };
        let mut recipients = vec![question.recipient.as_str()];
        if question.escalated_at.is_some()
            && let Some(to) = &question.escalate_to
        {
            recipients.extend(to.recipients.iter().map(String::as_str));
        }
        if recipients.iter().any(|recipient| self.covers(recipient, &principal)) {
            return Ok(());
        }
        Err(format!("{principal} is not a recipient of this question ({})", recipients.join(", ")))
    }

    /// Whether `recipient` (an `ark://` address) names `principal`: as the user, or a team it is in.
    fn covers(&self, recipient: &str, principal: &str) -> bool {
        if let Some(user) = recipient.strip_prefix("ark://users/") {
            return user == principal;
        }
        match (recipient.strip_prefix("ark://teams/"), &self.teams) {
            (Some(team), Some(teams)) => teams.values_of(team).iter().any(|member| member == principal),
            _ => false,
        }
    }
}
