//! Where a question may be delivered: `slack:<channel id or #name>`, `github:<owner>/<repo>#<number>` (an
//! issue or pull request), and `mcp:caller` (the person at the MCP client that asked, through elicitation;
//! only `ask_question` can name it). Entries of another kind, or of a kind this replica has no credentials
//! for, are refused when the question is asked, naming the entry.

use std::fmt;

use crate::{
    config::Config,
    validate::{Checked, Invalid},
};

/// A parsed channel entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Channel {
    /// A Slack conversation: an id (`C0123ABCD`) or a `#name`.
    Slack {
        /// As given after `slack:`.
        channel: String,
    },
    /// A GitHub issue or pull request.
    GitHub {
        /// The repository's owner.
        owner: String,
        /// The repository.
        repo: String,
        /// The issue or pull request number.
        number: u64,
    },
    /// The person at the MCP client that called `ask_question` (MCP elicitation).
    Caller,
}

/// The `mcp:caller` entry.
pub const CALLER: &str = "mcp:caller";

impl Channel {
    /// Reads `entry`, or says what is wrong with it.
    pub fn parse(entry: &str) -> Result<Channel, String> {
        if entry == CALLER {
            return Ok(Channel::Caller);
        }
        let (kind, target) = entry.split_once(':').ok_or_else(|| unknown(entry))?;
        match kind {
            "slack" if is_slack_channel(target) => Ok(Channel::Slack { channel: target.to_owned() }),
            "slack" => Err(format!("channels: '{entry}' is not slack:<channel id> or slack:#<name>")),
            "github" => {
                github(target).ok_or_else(|| format!("channels: '{entry}' is not github:<owner>/<repo>#<number>"))
            }
            _ => Err(unknown(entry)),
        }
    }

    /// `slack`, `github` or `mcp`.
    pub fn kind(&self) -> &'static str {
        match self {
            Channel::Slack { .. } => "slack",
            Channel::GitHub { .. } => "github",
            Channel::Caller => "mcp",
        }
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Channel::Slack { channel } => write!(f, "slack:{channel}"),
            Channel::GitHub { owner, repo, number } => write!(f, "github:{owner}/{repo}#{number}"),
            Channel::Caller => f.write_str(CALLER),
        }
    }
}

fn unknown(entry: &str) -> String {
    format!(
        "channels: '{entry}' is not a channel this broker delivers to (slack:<channel>, github:<owner>/<repo>#<number>, \
         mcp:caller)"
    )
}

/// A Slack channel id (`C…`, `G…`, `D…`) or `#name` (lower-case letters, digits, `-`, `_`, up to 80).
fn is_slack_channel(target: &str) -> bool {
    match target.strip_prefix('#') {
        Some(name) => {
            (1..=80).contains(&name.len())
                && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        }
        None => {
            (9..=20).contains(&target.len())
                && target.starts_with(['C', 'G', 'D'])
                && target.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        }
    }
}

/// `<owner>/<repo>#<number>` with GitHub's name rules.
fn github(target: &str) -> Option<Channel> {
    let (path, number) = target.rsplit_once('#')?;
    let (owner, repo) = path.split_once('/')?;
    let owner_ok = (1..=39).contains(&owner.len())
        && owner.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !owner.starts_with('-');
    let repo_ok = (1..=100).contains(&repo.len())
        && repo.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && repo != "."
        && repo != "..";
    let number: u64 = number.parse().ok().filter(|n| *n > 0)?;
    // GitHub's names are case-insensitive: one spelling, so a webhook's `acme/app` finds `Acme/App`'s questions.
    (owner_ok && repo_ok).then(|| Channel::GitHub {
        owner: owner.to_ascii_lowercase(),
        repo: repo.to_ascii_lowercase(),
        number,
    })
}

/// Checks a question's channel entries: each must name a channel this replica has credentials for (the
/// error names the first entry that does not). The entries are then written one way each
/// (`github:Acme/App#07` as `github:acme/app#7`), once each.
pub fn check_entries(config: &Config, entries: &mut Vec<String>) -> Checked {
    let mut canonical: Vec<String> = Vec::with_capacity(entries.len());
    for entry in entries.iter() {
        let channel = Channel::parse(entry).map_err(Invalid)?;
        let configured = match channel {
            Channel::Slack { .. } => config.channels.slack_bot_token.is_some(),
            Channel::GitHub { .. } => config.channels.github_token.is_some(),
            // Asked through the calling client's own connection: no credentials of the broker's.
            Channel::Caller => true,
        };
        if !configured {
            return Err(Invalid(format!(
                "channels: '{entry}' needs --{}-{} on the broker, which is not set",
                channel.kind(),
                if channel.kind() == "slack" { "bot-token" } else { "token" }
            )));
        }
        let entry = channel.to_string();
        if !canonical.contains(&entry) {
            canonical.push(entry);
        }
    }
    *entries = canonical;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::Channel;

    #[test]
    fn slack_and_github_entries_parse_and_nothing_else_does() {
        assert_eq!(Channel::parse("slack:#ops"), Ok(Channel::Slack { channel: "#ops".into() }));
        assert_eq!(Channel::parse("slack:C0123ABCD"), Ok(Channel::Slack { channel: "C0123ABCD".into() }));
        let pr = Channel::parse("github:mckinsey/agents-at-scale-ark#42").unwrap();
        assert_eq!(pr, Channel::GitHub { owner: "mckinsey".into(), repo: "agents-at-scale-ark".into(), number: 42 });
        assert_eq!(pr.to_string(), "github:mckinsey/agents-at-scale-ark#42");
        assert_eq!(Channel::parse("mcp:caller"), Ok(Channel::Caller));
        assert_eq!(Channel::Caller.to_string(), "mcp:caller");
        let spelled = Channel::parse("github:McKinsey/Agents-At-Scale-ARK#042").unwrap();
        assert_eq!(spelled.to_string(), "github:mckinsey/agents-at-scale-ark#42", "one spelling of each");
        for bad in [
            "slack",
            "github",
            "email:a@b",
            "slack:",
            "slack:#",
            "slack:#Ops",
            "slack:c0123abcd",
            "slack:#a b",
            "github:owner/repo",
            "github:owner#1",
            "github:owner/repo#0",
            "github:owner/repo#x",
            "github:/repo#1",
            "github:-owner/repo#1",
            "github:owner/..#1",
            "mcp:",
            "mcp:callers",
            "mcp:Caller",
        ] {
            let error = Channel::parse(bad).unwrap_err();
            assert!(error.contains(&format!("'{bad}'")), "{bad}: {error}");
        }
    }
}
