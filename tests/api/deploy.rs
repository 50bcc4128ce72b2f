//! Deployment artefacts: the Helm chart (lint, render, schema validation, operator-visible properties), the
//! docker-compose file and its nginx config, and three real replicas serving streams, questions and MCP through
//! that exact nginx config. The checks themselves live in tests/deploy/ (Python; scripts/test installs its venv).

use std::path::{Path, PathBuf};

use crate::support::{Replica, fresh_database};

/// How long a whole check script may take: the chart's runs 107 renders and validations, about 7 s of one
/// core when the machine is quiet, several times that beside the rest of the suite.
const SCRIPT_WITHIN: std::time::Duration = std::time::Duration::from_secs(120);

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// tests/deploy's venv interpreter, failing the test with how to get it when it is missing.
fn deploy_python() -> PathBuf {
    let python = root().join("tests/deploy/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: ./scripts/test installs it (or run scripts/python-venv tests/deploy)",
        python.display()
    );
    python
}

/// Runs `command` from the repository root and asserts it succeeds with `summary` in its output.
async fn passes(
    what: &'static str,
    command: &mut tokio::process::Command,
    summary: &str,
    context: impl Fn() -> String,
) {
    let output = tokio::time::timeout(SCRIPT_WITHIN, command.current_dir(root()).output())
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {SCRIPT_WITHIN:?}"))
        .unwrap_or_else(|e| panic!("run {what}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what} failed:\n{stdout}\n{stderr}\n{}", context());
    assert!(stdout.contains(summary), "{what}: expected `{summary}`:\n{stdout}");
}

#[tokio::test]
#[ignore = "needs Python with the chart tools (tests/deploy) and promtool: ./scripts/test installs them and runs it"]
async fn the_chart_lints_renders_and_validates_with_every_value_variant() {
    let mut command = tokio::process::Command::new(deploy_python());
    command.arg("tests/deploy/check_chart.py");
    passes("tests/deploy/check_chart.py", &mut command, "133 passed, 0 failed", String::new).await;
}

#[tokio::test]
#[ignore = "needs docker-compose, nginx and Python (tests/deploy): ./scripts/test installs them and runs it"]
async fn the_compose_file_and_its_nginx_config_validate_offline() {
    let mut command = tokio::process::Command::new("bash");
    command.arg("tests/deploy/check_compose.sh").env("PYTHON", deploy_python());
    passes("tests/deploy/check_compose.sh", &mut command, "4 passed, 0 failed", String::new).await;
}

#[tokio::test]
#[ignore = "needs nginx and Python (tests/deploy): ./scripts/test installs them and runs it"]
async fn three_replicas_behind_the_compose_nginx_config_serve_streams_questions_and_mcp() {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let port = |url: &str| url.trim_end_matches("/mcp").rsplit(':').next().unwrap().to_owned();
    let brokers = [&a, &b, &c].map(|replica| format!("{}:{}", port(&replica.base), port(&replica.mcp_url))).join(",");
    let mut command = tokio::process::Command::new("python3");
    command.arg("tests/deploy/nginx_scenario.py").env("BROKERS", &brokers);
    let logs = || format!("replica logs:\n{}\n{}\n{}", a.log(), b.log(), c.log());
    passes("tests/deploy/nginx_scenario.py", &mut command, "12 passed, 0 failed", logs).await;
}
