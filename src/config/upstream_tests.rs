//! Upstream's variable names: each sets its flag, in our unit; ours and the command line win; conflicts are
//! reported.

use clap::CommandFactory;

use super::{Resolved, parse, resolve};
use crate::config::Config;

/// Parses `args` as if the process's environment were `env` (for upstream's names; ours are not set here).
fn load(args: &[&str], env: &[(&str, &str)]) -> Config {
    let lookup = |name: &str| env.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string());
    let args = std::iter::once("ark-broker").chain(args.iter().copied()).map(Into::into);
    parse::<Config>(Config::command(), args, lookup).map_err(|(error, _)| error.to_string()).unwrap().0
}

fn resolved(env: &[(&str, &str)]) -> Resolved {
    let lookup = |name: &str| env.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string());
    resolve(Config::command(), lookup).1
}

#[test]
fn upstreams_variables_set_our_flags_in_our_units() {
    let config = load(
        &[],
        &[
            ("ROW_REAP_INTERVAL_SECONDS", "0"),
            ("ROW_REAP_BATCH_SIZE", "10000"),
            ("CHUNK_TTL_SECONDS", "3600"),
            ("SHUTDOWN_DRAIN_TIMEOUT_MS", "10500"),
            ("DATABASE_CONNECT_TIMEOUT_MS", "2500"),
            ("DATABASE_STATEMENT_TIMEOUT_MS", "30000"),
            ("DATABASE_SSL_ROOT_CERT_PATH", "/etc/pg-ssl/ca.crt"),
        ],
    );
    assert_eq!(config.reap_interval_seconds, 0, "0 turns the reaper off, as upstream's does");
    assert_eq!(config.stream_retention_seconds, 3600);
    assert_eq!(config.shutdown_timeout_seconds, 11, "milliseconds, rounded up to whole seconds");
    assert_eq!(config.db_statement_timeout_ms, 30_000);
    // Those with no name of ours are read by clap itself from the process's environment, which this test does
    // not set: their flags carry upstream's names (docs/configuration.md's generated table shows them).
    let envs: Vec<String> =
        Config::command().get_arguments().filter_map(|a| Some(a.get_env()?.to_string_lossy().into_owned())).collect();
    for name in ["ROW_REAP_BATCH_SIZE", "DATABASE_CONNECT_TIMEOUT_MS", "DATABASE_SSL_ROOT_CERT_PATH"] {
        assert!(envs.iter().any(|env| env == name), "{name} is a flag's variable");
    }
}

#[test]
fn the_command_line_wins_over_upstreams_variables_and_unset_ones_leave_our_defaults() {
    let config = load(&["--stream-retention-seconds", "7200"], &[("CHUNK_TTL_SECONDS", "3600")]);
    assert_eq!(config.stream_retention_seconds, 7200);
    let config = load(&[], &[]);
    assert_eq!((config.stream_retention_seconds, config.reap_interval_seconds), (86_400, 60));
    assert_eq!(config.shutdown_timeout_seconds, 120);
}

#[test]
fn chunk_ttl_wins_over_the_redis_stream_ttl_as_upstream_reads_them() {
    let both = [("CHUNK_TTL_SECONDS", "600"), ("REDIS_STREAM_TTL_SECONDS", "3600")];
    assert_eq!(load(&[], &both).stream_retention_seconds, 600);
    assert_eq!(load(&[], &both[1..]).stream_retention_seconds, 3600);
    let warned = resolved(&both).overridden;
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].starts_with("REDIS_STREAM_TTL_SECONDS (3600") && warned[0].contains("CHUNK_TTL_SECONDS"));
}

#[test]
fn ours_wins_when_both_are_set_and_a_difference_is_warned_about() {
    let env = [("ARK_BROKER_SHUTDOWN_TIMEOUT_SECONDS", "120"), ("SHUTDOWN_DRAIN_TIMEOUT_MS", "10000")];
    let resolved = resolved(&env);
    assert!(resolved.taken.is_empty(), "upstream's is not taken: {resolved:?}");
    assert_eq!(resolved.overridden.len(), 1);
    let warning = &resolved.overridden[0];
    assert!(warning.contains("SHUTDOWN_DRAIN_TIMEOUT_MS (10 in --shutdown-timeout-seconds's unit) is ignored"));
    assert!(warning.contains("ARK_BROKER_SHUTDOWN_TIMEOUT_SECONDS is set too and wins (120)"), "{warning}");
    // The same value in both units: nothing to warn about.
    let same = [("ARK_BROKER_SHUTDOWN_TIMEOUT_SECONDS", "10"), ("SHUTDOWN_DRAIN_TIMEOUT_MS", "10000")];
    assert_eq!(self::resolved(&same), Resolved::default());
}

#[test]
fn a_bad_upstream_value_is_refused_naming_where_it_came_from() {
    let lookup = |name: &str| (name == "DATABASE_STATEMENT_TIMEOUT_MS").then(|| "50".to_owned());
    let args = ["ark-broker"].map(Into::into);
    let Err((error, resolved)) = parse::<Config>(Config::command(), args, lookup) else {
        panic!("50 ms is below the statement timeout's range");
    };
    assert!(error.to_string().contains("--db-statement-timeout-ms"), "{error}");
    assert_eq!(
        resolved.hint().as_deref(),
        Some("note: set from upstream's variables: DATABASE_STATEMENT_TIMEOUT_MS=50 (as --db-statement-timeout-ms)")
    );
}

#[test]
fn upstreams_newest_timeouts_are_our_flags_under_its_names_with_its_defaults() {
    let command = Config::command();
    let env_of = |id: &str| {
        let arg = command.get_arguments().find(|arg| arg.get_id() == id).expect("the flag");
        arg.get_env().and_then(|name| name.to_str()).map(str::to_owned)
    };
    assert_eq!(env_of("stream_idle_timeout_ms").as_deref(), Some("STREAM_IDLE_TIMEOUT_MS"));
    assert_eq!(env_of("request_timeout_ms").as_deref(), Some("REQUEST_TIMEOUT_MS"));
    let defaults = load(&[], &[]);
    assert_eq!((defaults.stream_idle_timeout_ms, defaults.request_timeout_ms), (300_000, 0));
    assert_eq!(defaults.request_timeout(), None);
    let set = load(&["--stream-idle-timeout-ms", "1500", "--request-timeout-ms", "2000"], &[]);
    assert_eq!((set.stream_idle_timeout_ms, set.request_timeout()), (1500, Some(std::time::Duration::from_secs(2))));
    assert_eq!(set.body_deadline(), std::time::Duration::from_secs(2), "the shorter of the two bounds a body");
}
