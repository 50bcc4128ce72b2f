//! `--auth token`: the tokens file (`<token> <principal>` per line, `#` comments), looked up in constant time
//! and reloaded when the file changes (a mounted Secret is updated in place). Only SHA-256 digests of the
//! tokens are kept, so no token can end up in a `Debug` print or a log line.

use crate::telemetry::chain;
use std::{
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Principal, file_watch};

type Sha256Digest = [u8; 32];

/// The tokens of the file, as digests.
#[derive(Default)]
struct TokenTable {
    entries: Vec<(Sha256Digest, Principal)>,
}

/// Why the tokens file cannot be used. Never contains a token.
#[derive(Debug, thiserror::Error)]
pub enum TokensFileError {
    /// It cannot be read.
    #[error("cannot read the tokens file {path}: {error}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// A line is not `<token> <principal>`, or repeats a token.
    #[error("tokens file {path}, line {line}: {problem}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based.
        line: usize,
        /// What is wrong.
        problem: &'static str,
    },
}

/// The tokens file, reloaded in the background.
#[derive(Clone)]
pub struct TokenFile {
    path: Arc<Path>,
    table: Arc<RwLock<Arc<TokenTable>>>,
}

impl std::fmt::Debug for TokenFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenFile").field("path", &self.path).field("tokens", &self.current().entries.len()).finish()
    }
}

impl TokenFile {
    /// Reads `path`; a file that cannot be read or parsed stops the start.
    pub fn load(path: &Path) -> Result<Self, TokensFileError> {
        let table = read(path)?;
        if table.entries.is_empty() {
            tracing::warn!(path = %path.display(), "the tokens file holds no token: every request will get 401");
        }
        Ok(TokenFile { path: Arc::from(path), table: Arc::new(RwLock::new(Arc::new(table))) })
    }

    /// The principal `token` belongs to. Every entry is compared, each in constant time, so the time taken
    /// says nothing about which token matched or how much of one did.
    pub fn principal_of(&self, token: &str) -> Option<Principal> {
        let presented: Sha256Digest = Sha256::digest(token.as_bytes()).into();
        let table = self.current();
        let mut found = None;
        for (digest, principal) in &table.entries {
            if bool::from(digest.ct_eq(&presented)) {
                found = Some(principal.clone());
            }
        }
        found
    }

    fn current(&self) -> Arc<TokenTable> {
        self.table.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }

    /// Reads the file again every second until `shutdown`; a changed file that parses replaces the tokens, one
    /// that does not is logged and the old tokens stay.
    pub fn spawn_reload(&self, shutdown: CancellationToken) -> JoinHandle<()> {
        let file = self.clone();
        file_watch::on_change(self.path.clone(), shutdown, move |path| match read(path) {
            Ok(table) => {
                if table.entries.is_empty() {
                    tracing::warn!(path = %path.display(), "the tokens file now holds no token: every request will get 401");
                } else {
                    tracing::info!(path = %path.display(), tokens = table.entries.len(), "tokens file reloaded");
                }
                *file.table.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(table);
            }
            Err(error) => {
                tracing::warn!(error = %chain(&error), "the changed tokens file is not valid; keeping the old tokens")
            }
        })
    }
}

fn read(path: &Path) -> Result<TokenTable, TokensFileError> {
    let text = std::fs::read_to_string(path).map_err(|error| TokensFileError::Read { path: path.into(), error })?;
    parse(&text).map_err(|(line, problem)| TokensFileError::Line { path: path.into(), line, problem })
}

/// The table of `text`, or the first bad line (1-based) and what is wrong with it.
fn parse(text: &str) -> Result<TokenTable, (usize, &'static str)> {
    let mut table = TokenTable::default();
    // An editor's byte-order mark would otherwise become part of the first token.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((token, principal)) = line.split_once(char::is_whitespace) else {
            return Err((index + 1, "expected `<token> <principal>`"));
        };
        let principal = principal.trim();
        if principal.is_empty() || principal.contains('\0') {
            return Err((index + 1, "expected `<token> <principal>`"));
        }
        let digest: Sha256Digest = Sha256::digest(token.as_bytes()).into();
        if table.entries.iter().any(|(known, _)| *known == digest) {
            return Err((index + 1, "a token appears twice"));
        }
        table.entries.push((digest, Principal::new(principal)));
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> TokenFile {
        TokenFile { path: Arc::from(Path::new("tokens")), table: Arc::new(RwLock::new(Arc::new(parse(text).unwrap()))) }
    }

    #[test]
    fn tokens_map_to_their_principals_and_nothing_else_does() {
        let tokens =
            file("# Ark's components\n\n  s3cret-a   system:serviceaccount:ark:executor \nb-token alice smith\n");
        assert_eq!(tokens.principal_of("s3cret-a"), Some(Principal::new("system:serviceaccount:ark:executor")));
        assert_eq!(tokens.principal_of("b-token"), Some(Principal::new("alice smith")));
        for wrong in ["", "s3cret", "s3cret-a ", "S3CRET-A", "# Ark's"] {
            assert_eq!(tokens.principal_of(wrong), None, "{wrong:?}");
        }
        assert!(!format!("{tokens:?}").contains("s3cret"), "Debug never shows a token");
    }

    #[test]
    fn bad_lines_are_named_without_their_token() {
        assert_eq!(parse("ok alice\nlonely-token\n").err(), Some((2, "expected `<token> <principal>`")));
        assert_eq!(parse("t alice\nt bob\n").err(), Some((2, "a token appears twice")));
        let error = TokensFileError::Line { path: "f".into(), line: 2, problem: "a token appears twice" };
        assert_eq!(error.to_string(), "tokens file f, line 2: a token appears twice");
    }
}
