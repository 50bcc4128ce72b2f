//! The `ark-broker` binary: read the configuration, start logging, run until told to stop.

use ark_broker::telemetry::chain;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let (config, upstream) = ark_broker::config::Config::load();
    ark_broker::telemetry::init(&config);
    upstream.log();
    match ark_broker::server::run(config).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(error = %chain(&error), "ark-broker failed");
            ExitCode::FAILURE
        }
    }
}
