// Rebuilds when a migration changes: the migrations are embedded at compile time (`sqlx::migrate!`). Also
// records the commit built (`ARK_BROKER_GIT_SHA`, for the build-info metric): the `GIT_SHA` environment
// variable when set (image builds without `.git`), else `git rev-parse`, else "unknown".
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-env-changed=GIT_SHA");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs");
    let sha = std::env::var("GIT_SHA").ok().filter(|sha| !sha.is_empty()).or_else(|| {
        let output = Command::new("git").args(["rev-parse", "--short=12", "HEAD"]).output().ok()?;
        output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
    });
    println!("cargo:rustc-env=ARK_BROKER_GIT_SHA={}", sha.unwrap_or_else(|| "unknown".into()));
}
