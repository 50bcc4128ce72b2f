//! The embedded default as a newcomer runs it: a broker killed with SIGKILL leaves its PostgreSQL running,
//! and the next start in the same data directory stops that server and comes up; a second broker on a
//! directory whose broker still runs says what to do; SIGHUP stops the broker and its server.

use std::{fs::Permissions, os::unix::fs::PermissionsExt};

use serde_json::json;

use crate::support::{Replica, replica::refused_start};

#[tokio::test]
async fn a_broker_killed_with_its_postgres_running_starts_again_and_sighup_stops_both() {
    // A data directory the broker makes itself, in one the test removes when it ends (0755: the embedded server
    // runs as `postgres` when the tests run as root, and must reach it).
    let reachable = Permissions::from_mode(0o755);
    let scratch = tempfile::Builder::new().prefix("ark-embedded-").permissions(reachable).tempdir().unwrap();
    let dir = scratch.path().join("data");
    let mut first = Replica::start_embedded(&dir).await;
    let client = reqwest::Client::new();
    let stored =
        client.post(first.url("/stream/kept")).header("content-type", "application/x-ndjson").body("{\"n\":1}\n");
    assert_eq!(stored.send().await.unwrap().status(), 200);

    // While it runs, a second broker on the same directory refuses to start and says why.
    let said = refused_start(&dir, &[]).await;
    assert!(said.contains("another ark-broker") && said.contains("--data-dir"), "{said}");

    first.kill().await;
    assert!(dir.join("postgres/data/postmaster.pid").exists(), "SIGKILL left the server running");
    let second = Replica::start_embedded(&dir).await;
    assert!(second.log().contains("stopping the PostgreSQL a killed broker left running"), "{}", second.log());
    let page: serde_json::Value = client.get(second.url("/stream")).send().await.unwrap().json().await.unwrap();
    assert_eq!(page["items"][0]["data"]["chunk"], json!({"n":1}), "the data survived");

    let mut second = second;
    second.signal(libc::SIGHUP);
    assert!(second.wait().await, "SIGHUP is a clean stop");
    assert!(!dir.join("postgres/data/postmaster.pid").exists(), "its PostgreSQL stopped too");
}
