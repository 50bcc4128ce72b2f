//! What one NOTIFY costs as listeners multiply (issue 35, point 2). PostgreSQL 15 wakes every listening
//! backend of the database for every notification (PostgreSQL 19 wakes only the channel's), and each woken
//! backend reads the queue and sends the notification to its client: with one LISTEN connection per
//! replica, the cost of a notifying commit grows with the replica count.
//!
//! `pgbench` at 16 clients commits a chunk flush's shape — one row and one `pg_notify` naming a stream
//! (`chunks:<tx>:[["stream-…",n,n+1]]`) — with 0, 3, 12 and 24 listeners draining the channel, and once
//! without the notification. Busy CPU of the whole machine per commit, less that of the run without a
//! notification, is what the notification costs; its growth per listener is what each woken replica costs.

use std::path::Path;

use futures::StreamExt;
use sqlx::{Connection, Executor, PgConnection, postgres::PgListener};

use crate::{
    baselines::Pgbench,
    postgres::{BASELINE_DB, Postgres},
};

/// Listener counts measured: none, and the replica counts of the replica-scale phase.
pub const LISTENERS: [usize; 4] = [0, 3, 12, 24];

/// One run: commits/s and busy CPU per commit.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Run {
    /// Listening connections draining the channel (`None`: no notification sent).
    pub listeners: Option<usize>,
    /// Whether the notification went in a transaction of its own after the row's commit.
    pub after_commit: bool,
    /// Whether that transaction committed without waiting for its WAL flush (`synchronous_commit` off).
    pub asynchronous: bool,
    pub commits_per_s: f64,
    pub cpu_us_per_commit: f64,
}

/// Measures every run for `seconds` each.
pub async fn measure(pg: &mut Postgres, scratch: &Path, seconds: u32) -> Vec<Run> {
    pg.create_database(BASELINE_DB).await;
    let url = pg.url(BASELINE_DB);
    let mut db = PgConnection::connect(&url).await.expect("connect to the scratch database");
    db.execute("create table flushes (id bigserial primary key, stream_id text not null, chunk text not null)")
        .await
        .expect("the scratch table");
    std::fs::create_dir_all(scratch).expect("a scratch directory");
    let bench = Pgbench { port: pg.port(), scratch, seconds };
    let mut runs = Vec::new();
    let (tps, busy) = bench.run_metered(&mut db, "flush_plain.sql", &script(Notify::No)).await;
    let cpu_us_per_commit = per_commit(busy, tps, seconds);
    runs.push(Run { listeners: None, after_commit: false, asynchronous: false, commits_per_s: tps, cpu_us_per_commit });
    let after = [(24, Notify::AfterCommit), (24, Notify::AfterCommitAsync)];
    let variants = LISTENERS.map(|n| (n, Notify::InCommit)).into_iter().chain(after);
    for (listeners, notify) in variants {
        let mut draining = Vec::new();
        for _ in 0..listeners {
            // Each says when it listens, so every run starts with all its listeners in place.
            let (ready, listening) = tokio::sync::oneshot::channel();
            draining.push(tokio::spawn(drain(url.clone(), ready)));
            listening.await.expect("a listener listens");
        }
        let name = format!("flush_notify_{listeners}_{notify:?}.sql");
        let (tps, busy) = bench.run_metered(&mut db, &name, &script(notify)).await;
        runs.push(Run {
            listeners: Some(listeners),
            after_commit: notify != Notify::InCommit,
            asynchronous: notify == Notify::AfterCommitAsync,
            commits_per_s: tps,
            cpu_us_per_commit: per_commit(busy, tps, seconds),
        });
        draining.iter().for_each(|task| task.abort());
    }
    drop(db);
    pg.drop_database(BASELINE_DB).await;
    runs
}

fn per_commit(busy_s: f64, tps: f64, seconds: u32) -> f64 {
    busy_s * 1e6 / (tps * f64::from(seconds)).max(1.0)
}

/// Where a flush's notification goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Notify {
    No,
    /// In the row's transaction, as the broker sends it: PostgreSQL holds its notify lock to the commit's end.
    InCommit,
    /// In a transaction of its own right after: no WAL flush while the lock is held.
    AfterCommit,
    /// The same, its commit not waiting for the WAL flush: a notification is a hint, lost with a crash anyway.
    AfterCommitAsync,
}

/// A chunk flush's shape: one row and one notification naming its stream.
fn script(notify: Notify) -> String {
    let notification = "SELECT pg_notify('ark_broker', 'chunks:' || txid_current() || ':[[\"stream-' || :s || '\",' || :s || ',' || :t || ']]');\n";
    let insert = "INSERT INTO flushes(stream_id, chunk) VALUES ('stream-' || :s, '{}');\n";
    let body = match notify {
        Notify::No => format!("BEGIN;\n{insert}END;\n"),
        Notify::InCommit => format!("BEGIN;\n{insert}{notification}END;\n"),
        Notify::AfterCommit => format!("BEGIN;\n{insert}END;\n{notification}"),
        Notify::AfterCommitAsync => {
            let asynchronous =
                notification.replacen("SELECT ", "SELECT set_config('synchronous_commit', 'off', true), ", 1);
            format!("BEGIN;\n{insert}END;\n{asynchronous}")
        }
    };
    format!("\\set s random(1, 1000)\n\\set t :s + 1\n{body}")
}

/// Drains the broker's channel, as a replica's listener does.
async fn drain(url: String, ready: tokio::sync::oneshot::Sender<()>) {
    let mut listener = PgListener::connect(&url).await.expect("connect a listener");
    listener.listen("ark_broker").await.expect("LISTEN");
    let _ = ready.send(());
    let mut notifications = listener.into_stream();
    while let Some(Ok(_)) = notifications.next().await {}
}

/// The markdown table of the runs, with the cost of a notification and of each listener it wakes.
pub fn markdown(runs: &[Run]) -> String {
    let plain = runs.iter().find(|run| run.listeners.is_none()).map_or(0.0, |run| run.cpu_us_per_commit);
    let mut md = String::from(
        "#### NOTIFY with many listeners (pgbench, 16 clients: one row + one `pg_notify` per commit)\n\n\
         | listeners | commits/s | busy CPU µs per commit | of which the notification |\n|---|---|---|---|\n",
    );
    for run in runs {
        let listeners = match (run.listeners, run.after_commit, run.asynchronous) {
            (None, ..) => "no NOTIFY".to_owned(),
            (Some(n), false, _) => n.to_string(),
            (Some(n), true, false) => format!("{n}, NOTIFY after the commit"),
            (Some(n), true, true) => format!("{n}, NOTIFY after the commit, not waiting for its WAL flush"),
        };
        let notification =
            run.listeners.map_or_else(|| "—".to_owned(), |_| format!("{:.0}", run.cpu_us_per_commit - plain));
        md.push_str(&format!(
            "| {listeners} | {:.0} | {:.0} | {notification} |\n",
            run.commits_per_s, run.cpu_us_per_commit
        ));
    }
    let at = |n: usize| runs.iter().find(|run| run.listeners == Some(n) && !run.after_commit);
    if let (Some(none), Some(all)) = (at(0), at(24)) {
        md.push_str(&format!(
            "\nEach listener woken costs {:.1} µs of CPU per notification (24 listeners vs none).\n",
            (all.cpu_us_per_commit - none.cpu_us_per_commit) / 24.0
        ));
    }
    md
}
