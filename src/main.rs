//! The `ark-broker` binary: read the configuration, start logging, run until told to stop.

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let config = ark_broker::config::Config::parse();
    ark_broker::telemetry::init(&config);
    match ark_broker::server::run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "ark-broker failed");
            ExitCode::FAILURE
        }
    }
}
