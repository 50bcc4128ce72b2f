//! Upstream's environment names for settings we name differently, so an operator moving from the TypeScript
//! broker keeps their environment: one table ([`ALIASES`]), resolved before clap parses, into the default of
//! our flag. So the order of precedence is: the flag on the command line, then our variable, then upstream's
//! (in table order), then our built-in default. Where ours and upstream's are both set and differ, ours wins
//! and a warning says so once logging is up. Upstream's settings we had no name for are plain flags whose
//! variable is upstream's name (`DATABASE_CONNECT_TIMEOUT_MS`, `DATABASE_SSL_ROOT_CERT_PATH`,
//! `ROW_REAP_BATCH_SIZE`), like `PORT` or `DATABASE_POOL_MAX`.

use clap::{ArgMatches, Command};

/// How an upstream value becomes ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// The same unit: taken as it is.
    Same,
    /// Upstream's milliseconds for our seconds, rounded up so a drain is never cut shorter than asked.
    MillisToSeconds,
}

/// One upstream variable and the flag it sets.
#[derive(Debug, Clone, Copy)]
pub struct Alias {
    /// Upstream's variable.
    pub upstream: &'static str,
    /// Our flag's id (its long name with `_`), whose variable wins over `upstream`.
    pub flag: &'static str,
    /// How the value converts.
    pub unit: Unit,
}

/// Upstream's names (services/ark-broker/ark-broker/src/config/schema.ts) for settings we already had. Where two
/// name one flag, the first set wins, as upstream's `CHUNK_TTL_SECONDS ?? REDIS_STREAM_TTL_SECONDS` does.
pub const ALIASES: &[Alias] = &[
    Alias { upstream: "ROW_REAP_INTERVAL_SECONDS", flag: "reap_interval_seconds", unit: Unit::Same },
    Alias { upstream: "CHUNK_TTL_SECONDS", flag: "stream_retention_seconds", unit: Unit::Same },
    Alias { upstream: "REDIS_STREAM_TTL_SECONDS", flag: "stream_retention_seconds", unit: Unit::Same },
    Alias { upstream: "SHUTDOWN_DRAIN_TIMEOUT_MS", flag: "shutdown_timeout_seconds", unit: Unit::MillisToSeconds },
    Alias { upstream: "DATABASE_STATEMENT_TIMEOUT_MS", flag: "db_statement_timeout_ms", unit: Unit::Same },
];

/// What resolving the aliases found, for the log once it is up and for a parse error's hint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolved {
    /// `(upstream variable, flag, value)` taken from upstream's names.
    pub taken: Vec<(&'static str, &'static str, String)>,
    /// Upstream variables set but not taken, each with why (ours, or another alias, was set and differs).
    pub overridden: Vec<String>,
}

impl Resolved {
    /// Logs what was taken (info) and what was overridden (a warning each).
    pub fn log(&self) {
        for (upstream, flag, value) in &self.taken {
            tracing::info!(upstream, flag = %long(flag), value, "taking upstream's variable");
        }
        for warning in &self.overridden {
            tracing::warn!("{warning}");
        }
    }

    /// A line naming the upstream variables a parse error may stem from, if any were taken.
    pub fn hint(&self) -> Option<String> {
        let names: Vec<String> =
            self.taken.iter().map(|(up, flag, v)| format!("{up}={v} (as {})", long(flag))).collect();
        (!names.is_empty()).then(|| format!("note: set from upstream's variables: {}", names.join(", ")))
    }
}

fn long(flag: &str) -> String {
    format!("--{}", flag.replace('_', "-"))
}

/// Converts an upstream value to our unit; a value that does not convert is passed on for clap to refuse.
fn convert(raw: &str, unit: Unit) -> String {
    let raw = raw.trim();
    match unit {
        Unit::Same => raw.to_owned(),
        Unit::MillisToSeconds => match raw.parse::<u64>() {
            Ok(ms) => ms.div_ceil(1000).to_string(),
            Err(_) => raw.to_owned(),
        },
    }
}

/// Makes each alias set in `env` (and not overruled) the default of its flag in `command`.
pub fn resolve(mut command: Command, env: impl Fn(&str) -> Option<String>) -> (Command, Resolved) {
    let mut resolved = Resolved::default();
    let mut flags: Vec<&str> = ALIASES.iter().map(|alias| alias.flag).collect();
    flags.dedup();
    for flag in flags {
        let arg = command.get_arguments().find(|arg| arg.get_id() == flag).expect("an alias names a flag");
        let ours = arg.get_env().map(|name| name.to_string_lossy().into_owned()).expect("the flag has a variable");
        let ours_value = env(&ours).filter(|value| !value.is_empty());
        let mut candidates = ALIASES
            .iter()
            .filter(|alias| alias.flag == flag)
            .filter_map(|alias| Some((alias.upstream, convert(&env(alias.upstream)?, alias.unit))))
            .filter(|(_, value)| !value.is_empty());
        let winner = match &ours_value {
            Some(value) => (ours.clone(), value.clone()),
            None => match candidates.next() {
                Some((upstream, value)) => {
                    resolved.taken.push((upstream, flag, value.clone()));
                    (upstream.to_owned(), value)
                }
                None => continue,
            },
        };
        for (upstream, value) in candidates.filter(|(upstream, _)| *upstream != winner.0) {
            if value != winner.1 {
                resolved.overridden.push(format!(
                    "{upstream} ({value} in {}'s unit) is ignored: {} is set too and wins ({})",
                    long(flag),
                    winner.0,
                    winner.1
                ));
            }
        }
        if ours_value.is_none() {
            let value = winner.1;
            command = command.mut_arg(flag, |arg| arg.default_value(value));
        }
    }
    (command, resolved)
}

/// Parses `args` with the process's environment and upstream's names resolved into it.
pub fn parse<T: clap::FromArgMatches>(
    command: Command,
    args: impl IntoIterator<Item = std::ffi::OsString>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(T, Resolved), (clap::Error, Resolved)> {
    let (command, resolved) = resolve(command, env);
    let matches: ArgMatches = match command.try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(error) => return Err((error, resolved)),
    };
    match T::from_arg_matches(&matches) {
        Ok(parsed) => Ok((parsed, resolved)),
        Err(error) => Err((error, resolved)),
    }
}

#[cfg(test)]
#[path = "upstream_tests.rs"]
mod tests;
