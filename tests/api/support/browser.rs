//! Runs a scenario script from `tests/browser/` in Debian's headless Chromium (through playwright-core)
//! against two replicas, and returns what it printed.

use std::path::Path;

use super::{Replica, within};

/// Runs `tests/browser/<script>` with `BROKER_A` and `BROKER_B` set; fails the test when it fails.
pub async fn run_scenario(script: &str, a: &Replica, b: &Replica) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("tests/browser").join(script);
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists() && root.join("tests/browser/node_modules/playwright-core").exists(),
        "this test needs Chromium ({chromium}) and tests/browser's npm packages; ./scripts/test installs both"
    );
    let output = within(
        "the browser scenario",
        tokio::process::Command::new("node")
            .arg(&script)
            .env("BROKER_A", &a.base)
            .env("BROKER_B", &b.base)
            .env("CHROMIUM", &chromium)
            .envs(std::env::var("SCREENSHOT_DIR").ok().map(|dir| ("SCREENSHOT_DIR", dir)))
            .output(),
    )
    .await
    .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the browser scenario failed:\n{stdout}\n{stderr}\nreplica B:\n{}", b.log());
    stdout
}
