//! Who is who, for the answer policy: the teams file (`<team> <principal> <principal>…` per line) and the
//! identities file (`<channel identity> <principal>`, e.g. `slack:U0123 alice`), `#` comments, each re-read
//! when it changes (a mounted ConfigMap is updated in place); a changed file that does not parse is logged and
//! the old one kept.

use std::{
    collections::HashMap,
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::file_watch;
use crate::telemetry::chain;

/// Why a directory file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryFileError {
    /// It cannot be read.
    #[error("cannot read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        error: std::io::Error,
    },
    /// A line is not `<key> <value>…`.
    #[error("{path}, line {line}: {problem}")]
    Line {
        /// The file.
        path: PathBuf,
        /// 1-based.
        line: usize,
        /// What is wrong.
        problem: &'static str,
    },
}

/// What a line says: `<key>` then one value (identities) or several (teams).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `<team> <principal>…`: at least one member.
    Team,
    /// `<identity> <principal>`: exactly one principal.
    Identity,
}

/// A file of `<key> <value>…` lines, re-read in the background.
#[derive(Debug, Clone)]
pub struct DirectoryFile {
    path: Arc<Path>,
    shape: Shape,
    entries: Arc<RwLock<Arc<Entries>>>,
}

/// Each key's values.
type Entries = HashMap<String, Vec<String>>;

impl DirectoryFile {
    /// Reads `path`; a file that cannot be read or parsed stops the start.
    pub fn load(path: &Path, shape: Shape) -> Result<Self, DirectoryFileError> {
        let entries = read(path, shape)?;
        Ok(DirectoryFile { path: Arc::from(path), shape, entries: Arc::new(RwLock::new(Arc::new(entries))) })
    }

    /// The values of `key` (a team's members, an identity's principal).
    pub fn values_of(&self, key: &str) -> Vec<String> {
        let entries = self.entries.read().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        entries.get(key).cloned().unwrap_or_default()
    }

    /// Reads the file again every second until `shutdown`.
    pub fn spawn_reload(&self, shutdown: CancellationToken) -> JoinHandle<()> {
        let file = self.clone();
        file_watch::on_change(self.path.clone(), shutdown, move |path| match read(path, file.shape) {
            Ok(entries) => {
                tracing::info!(path = %path.display(), entries = entries.len(), "directory file reloaded");
                *file.entries.write().unwrap_or_else(|poisoned| poisoned.into_inner()) = Arc::new(entries);
            }
            Err(error) => {
                tracing::warn!(error = %chain(&error), "a changed directory file is not valid; keeping the old one")
            }
        })
    }
}

fn read(path: &Path, shape: Shape) -> Result<Entries, DirectoryFileError> {
    let text = std::fs::read_to_string(path).map_err(|error| DirectoryFileError::Read { path: path.into(), error })?;
    parse(&text, shape).map_err(|(line, problem)| DirectoryFileError::Line { path: path.into(), line, problem })
}

fn parse(text: &str, shape: Shape) -> Result<Entries, (usize, &'static str)> {
    let mut entries = Entries::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim().trim_start_matches('\u{feff}');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let key = words.next().expect("a non-empty line has a word").to_owned();
        let values: Vec<String> = words.map(str::to_owned).collect();
        match (shape, values.len()) {
            (_, 0) => return Err((number + 1, "a name without a principal")),
            (Shape::Identity, n) if n > 1 => return Err((number + 1, "an identity maps to one principal")),
            _ => {}
        }
        let known = entries.entry(key).or_default();
        if shape == Shape::Identity && !known.is_empty() {
            return Err((number + 1, "an identity appears twice"));
        }
        known.extend(values);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::{Shape, parse};

    #[test]
    fn teams_gather_their_members_and_identities_map_to_one_principal() {
        let teams = parse("# ops on call\nops alice bob\n\nops carol\nsre dave\n", Shape::Team).unwrap();
        assert_eq!(teams["ops"], ["alice", "bob", "carol"]);
        assert_eq!(teams["sre"], ["dave"]);
        let identities = parse("slack:U0123 alice\ngithub:bob-gh bob\n", Shape::Identity).unwrap();
        assert_eq!(identities["slack:U0123"], ["alice"]);
        assert_eq!(parse("slack:U1 a b", Shape::Identity).unwrap_err(), (1, "an identity maps to one principal"));
        assert_eq!(parse("x a\nx b", Shape::Identity).unwrap_err(), (2, "an identity appears twice"));
        assert_eq!(parse("ops", Shape::Team).unwrap_err(), (1, "a name without a principal"));
    }
}
