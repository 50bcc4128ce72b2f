//! Where a [`Config`] comes from: the process's command line and environment, upstream's variable names
//! included ([`super::upstream`]), or, in tests, a database URL with every other setting at its default.

use std::net::IpAddr;

use clap::Parser;

use super::{Config, DatabaseUrl, StatusPatching, upstream};

impl Config {
    /// Settings for a broker on `database_url` with every other value at its default; tests start from this.
    pub fn for_database(database_url: &str) -> Self {
        let mut config = Config::parse_from(["ark-broker"]);
        config.database_url = Some(DatabaseUrl(database_url.to_owned()));
        config.host = IpAddr::from([127, 0, 0, 1]);
        config.port = 0;
        config.mcp_port = 0;
        // Tests opt in to Kubernetes explicitly (with a fake API server); never a developer's real cluster.
        config.kube_status_patching = StatusPatching::Off;
        config
    }

    /// The settings from the command line and the process's environment, upstream's variable names included
    /// ([`upstream`]); what those resolved to is returned to be logged once logging is up. Exits on a bad
    /// setting (and on `--help`, `--version`), naming the upstream variables it was set from.
    pub fn load() -> (Self, upstream::Resolved) {
        use clap::CommandFactory;
        match upstream::parse(Self::command(), std::env::args_os(), |name| std::env::var(name).ok()) {
            Ok(loaded) => loaded,
            Err((error, resolved)) => {
                let _ = error.print();
                if let (true, Some(hint)) = (error.use_stderr(), resolved.hint()) {
                    eprintln!("{hint}");
                }
                std::process::exit(error.exit_code())
            }
        }
    }
}
