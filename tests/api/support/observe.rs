//! Watching a replica from outside, as the partition and heartbeat tests time it: how long until its
//! `/readyz` answers a status or its log shows a line, and the tail of its log printed when a test fails.

use std::time::{Duration, Instant};

use super::Replica;

/// Prints the end of the replicas' logs when the test fails, before the panic's message ends the output.
pub struct LogsOnFailure<'a>(pub Vec<&'a Replica>);

impl Drop for LogsOnFailure<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for replica in &self.0 {
                let log = replica.log();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                eprintln!("--- the last lines {} logged:", replica.base);
                tail.iter().rev().for_each(|line| eprintln!("{line}"));
            }
        }
    }
}

/// `/readyz`'s status, or `None` when it does not answer within 3 s.
pub async fn readyz(client: &reqwest::Client, replica: &Replica) -> Option<u16> {
    let probe = client.get(replica.url("/readyz")).timeout(Duration::from_secs(3)).send().await;
    probe.ok().map(|reply| reply.status().as_u16())
}

/// How long after `since` `replica`'s `/readyz` answered `status` (asked every 100 ms).
pub async fn until_ready_is(client: &reqwest::Client, replica: &Replica, status: u16, since: Instant) -> Duration {
    while readyz(client, replica).await != Some(status) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    since.elapsed()
}

/// How long after `since` the replica logged `text` (its log is read every 100 ms).
pub async fn until_logged(replica: &Replica, text: &str, since: Instant) -> Duration {
    while !replica.log().contains(text) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    since.elapsed()
}
