//! Runs a scenario script from `tests/browser/` in Debian's headless Chromium (through playwright-core)
//! against two replicas, and returns what it printed.

use std::{path::Path, time::Duration};

use super::Replica;

/// How long a whole scenario may take. Longer than [`super::PATIENCE`]: it launches Chromium, which on two
/// busy cores (the whole suite running) took over 20 s where it takes 4 s alone, and the scenarios bound
/// each of their own steps (5–10 s, Playwright's 30 s by default), so a step that hangs fails there, by name.
const SCENARIO_PATIENCE: Duration = Duration::from_secs(120);

/// Runs `tests/browser/<script>` with `BROKER_A` and `BROKER_B` set; fails the test when it fails.
pub async fn run_scenario(script: &str, a: &Replica, b: &Replica) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("tests/browser").join(script);
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists() && root.join("tests/browser/node_modules/playwright-core").exists(),
        "this test needs Chromium ({chromium}) and tests/browser's npm packages; ./scripts/test installs both"
    );
    let output = tokio::time::timeout(
        SCENARIO_PATIENCE,
        tokio::process::Command::new("node")
            .arg(&script)
            .env("BROKER_A", &a.base)
            .env("BROKER_B", &b.base)
            .env("CHROMIUM", &chromium)
            .envs(std::env::var("SCREENSHOT_DIR").ok().map(|dir| ("SCREENSHOT_DIR", dir)))
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("the browser scenario {} took over {SCENARIO_PATIENCE:?}", script.display()))
    .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the browser scenario failed:\n{stdout}\n{stderr}\nreplica B:\n{}", b.log());
    stdout
}
