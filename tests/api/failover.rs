//! PostgreSQL's primary changes under load (a switchover or a failover behind the `-rw` Service, synchronous
//! replication or not) while three replicas serve Ark's traffic: no acknowledged write may be missing from
//! the new primary, and a short outage fails no writer. `ARK_FAILOVER_RUNS` (default 1) repeats each scenario
//! on a fresh primary and standby; `ARK_FAILOVER_WRITERS` (default 8) sets how many streams are written.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use futures::future::join_all;
use sqlx::{Connection, PgConnection};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

mod traffic;

use self::traffic::{Ack, Reading, Writer, read, side_load, write};
use crate::support::{
    Replica,
    failover::{PrimaryStandby, Replication},
    within,
};

/// Load before the switch, and after it.
const BEFORE: Duration = Duration::from_millis(1500);
const AFTER: Duration = Duration::from_millis(2500);
/// Longest wait for any reply: the ride-through window (15 s) and then some. Longer is a hang.
pub(super) const REPLY: Duration = Duration::from_secs(30);
/// How long readers may take to see `[DONE]` once every writer is done.
const READERS_GRACE: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Switch {
    Switchover,
    Failover,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switchover_with_synchronous_replication_loses_no_acknowledged_write_and_fails_no_writer() {
    scenario(Switch::Switchover, Replication::Sync).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_switchover_with_asynchronous_replication_loses_no_acknowledged_write_and_fails_no_writer() {
    scenario(Switch::Switchover, Replication::Async).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_with_synchronous_replication_loses_no_acknowledged_write_and_fails_no_writer() {
    scenario(Switch::Failover, Replication::Sync).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_with_asynchronous_replication_crashes_and_hangs_no_broker_and_reports_what_was_lost() {
    scenario(Switch::Failover, Replication::Async).await;
}

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Runs the scenario `ARK_FAILOVER_RUNS` times, each on a fresh primary and standby, and fails with the report
/// of every failed run.
async fn scenario(switch: Switch, replication: Replication) {
    let runs = setting("ARK_FAILOVER_RUNS", 1);
    let mut failed = Vec::new();
    for run in 1..=runs {
        let name = format!("{switch:?} {replication:?}, run {run}/{runs}");
        failed.extend(run_once(&name, switch, replication).await.err());
    }
    assert!(failed.is_empty(), "{} of {runs} runs failed:\n\n{}", failed.len(), failed.join("\n\n"));
}

async fn run_once(name: &str, switch: Switch, replication: Replication) -> Result<(), String> {
    let began = Instant::now();
    let mut lab = PrimaryStandby::start(replication).await;
    let replicas: [Replica; 3] = Replica::three(&lab.url(), &[]).await.into();
    let bases: Vec<String> = replicas.iter().map(|r| r.base.clone()).collect();
    let (stop, readers_stop) = (CancellationToken::new(), CancellationToken::new());
    let t0 = Instant::now();
    let streams = setting("ARK_FAILOVER_WRITERS", 8);
    let flowing = Arc::new(Semaphore::new(0));
    let readers: Vec<_> = (0..streams)
        .map(|w| format!("{}/stream/w{w}?from-beginning=true", bases[(w + 1) % 3]))
        .map(|url| tokio::spawn(read(url, Some(flowing.clone()), readers_stop.clone())))
        .collect();
    // Every fourth writer ends its POST and completes its stream while the primary changes, as Ark's executor
    // does when its answer ends then: a stream's end must still come after every line the POST received.
    let ending: Vec<(usize, CancellationToken)> =
        (0..streams).filter(|w| w % 4 == 3).map(|w| (w, stop.child_token())).collect();
    let stop_of = |w: usize| ending.iter().find(|(e, _)| *e == w).map_or_else(|| stop.clone(), |(_, t)| t.clone());
    let writers: Vec<_> = (0..streams).map(|w| tokio::spawn(write(bases.clone(), w, stop_of(w), t0))).collect();
    let mcps: Vec<String> = replicas.iter().map(|r| r.mcp_url.clone()).collect();
    let side: Vec<_> =
        (0..4).map(|kind| tokio::spawn(side_load(kind, bases.clone(), mcps.clone(), stop.clone(), t0))).collect();

    // The load runs for a while once every stream flows (its first line reached its reader).
    within("every stream to flow", flowing.acquire_many(streams as u32)).await.unwrap().forget();
    tokio::time::sleep(BEFORE).await;
    let switched_at = t0.elapsed().as_secs_f64();
    for (k, (_, token)) in ending.iter().enumerate() {
        // Spread over the switch's half second (stop 0.1-0.3 s, promote 0.05-0.2 s here): some land in the gap.
        let (token, at) = (token.clone(), Duration::from_millis(100 * k as u64));
        tokio::spawn(async move {
            tokio::time::sleep(at).await;
            token.cancel();
        });
    }
    let steps = if switch == Switch::Switchover { lab.switchover().await } else { lab.failover().await };
    tokio::time::sleep(AFTER).await;
    stop.cancel();
    let writers_seen: Vec<Writer> = join_all(writers).await.into_iter().map(Result::unwrap).collect();
    let (mut acks, mut errors) = (Vec::new(), Vec::new());
    for (a, e) in join_all(side).await.into_iter().map(Result::unwrap) {
        acks.extend(a);
        errors.extend(e);
    }
    tokio::spawn(async move {
        tokio::time::sleep(READERS_GRACE).await;
        readers_stop.cancel();
    });
    let readings: Vec<Reading> = join_all(readers).await.into_iter().map(Result::unwrap).collect();

    // What the new primary holds, against what was acknowledged and seen.
    let strict = switch == Switch::Switchover || replication == Replication::Sync;
    let mut db = PgConnection::connect(&lab.primary_url()).await.expect("connect to the new primary");
    // Problems any run must not have; and mismatches with what was acknowledged, which only a synchronous or
    // planned switch must not have (an asynchronous failover may lose the last commits).
    let (mut problems, mut mismatches, mut table, mut lost_acks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut sent, mut acked, mut stored_lines, mut lost) = (0, 0, 0, 0);
    for (writer, reading) in writers_seen.iter().zip(&readings) {
        let query = "select chunk::text from chunks where stream_id = $1 and not is_done order by position";
        let stored: Vec<String> = sqlx::query_scalar(query).bind(&writer.stream).fetch_all(&mut db).await.unwrap();
        let (s, n, kept) = (&writer.stream, writer.sent.len(), stored.len());
        let reported = writer.reply.as_ref().ok().and_then(|(_, n)| *n).map(|n| n as usize);
        let acknowledged = reported.unwrap_or(0).min(n);
        let gone = writer.sent[..acknowledged].iter().filter(|line| !stored.contains(line)).count();
        (sent, acked, stored_lines, lost) = (sent + n, acked + acknowledged, stored_lines + kept, lost + gone);
        if let Some(at) = (0..kept).find(|&i| writer.sent.get(i) != Some(&stored[i])) {
            let (was, is) = (writer.sent.get(at), &stored[at]);
            mismatches.push(format!(
                "{s}: stored line {at} is {is}, sent {was:?} ({kept} stored, {acknowledged} acknowledged)"
            ));
        } else if reported.is_some_and(|n| n != kept) {
            mismatches.push(format!("{s}: the reply says {acknowledged} lines stored, the new primary has {kept}"));
        }
        if strict {
            problems.extend(reader_problems(s, reading, &stored, writer.complete == Ok(200)));
        }
        // TODO: with an asynchronous failover, a reader coming back must not silently see another line at a
        // position it already read (lost with the old primary, then written again): assert it once designed.
        let segments: Vec<usize> = reading.segments.iter().map(Vec::len).collect();
        let cut = writer.cut_at.map_or("never".into(), |at| format!("+{at:.2}s"));
        let (reply, complete) = (&writer.reply, &writer.complete);
        let done = if reading.done { " then [DONE]" } else { "" };
        let row = format!("{s}: sent {n}, body cut {cut}, POST {reply:?}, stored {kept}, /complete {complete:?}");
        table.push(format!("  {row}, reader {segments:?}{done}"));
        if writer.reply != Ok((200, Some(n as u64))) || writer.complete != Ok(200) {
            errors.push(row);
        }
    }
    for (ack, at) in &acks {
        if !held(&mut db, ack).await {
            lost_acks.push(format!("{ack:?} at +{at:.2}s"));
        }
    }
    let hangs = errors.iter().filter(|e| e.contains("no reply within")).count();
    let client = reqwest::Client::new();
    for replica in &replicas {
        let health = tokio::time::timeout(Duration::from_secs(5), client.get(replica.url("/health")).send()).await;
        if !matches!(health, Ok(Ok(ref r)) if r.status() == 200) {
            problems.push(format!("the replica at {} does not answer /health: {health:?}", replica.base));
        }
    }
    let after = acks.iter().filter(|(_, at)| *at > switched_at + steps.total().as_secs_f64()).count();
    let (acks, missing, failed, took) = (acks.len(), lost_acks.len(), errors.len(), began.elapsed().as_secs_f64());
    let summary = format!(
        "[{name}] switch at +{switched_at:.2}s ({steps}); {streams} streams: {sent} lines sent, {acked} acknowledged, \
         {stored_lines} stored, {lost} acknowledged lost; other writes: {acks} acknowledged ({after} after the \
         switch), {missing} of them lost; {failed} failed requests ({hangs} without a reply); run {took:.1}s"
    );
    eprintln!("{summary}");
    if hangs > 0 {
        problems.push(format!("{hangs} requests got no reply within {REPLY:?}"));
    }
    if !lost_acks.is_empty() {
        mismatches.push(format!("acknowledged writes missing on the new primary: {lost_acks:?}"));
    }
    if strict && !errors.is_empty() {
        mismatches.push(format!("{} requests failed (a short outage must fail no writer)", errors.len()));
    }
    if strict {
        problems.append(&mut mismatches);
    } else if !mismatches.is_empty() {
        eprintln!("[{name}] lost with the old primary:\n  {}", mismatches.join("\n  "));
    }
    if problems.is_empty() {
        return Ok(());
    }
    errors.truncate(40);
    let logs: Vec<String> =
        replicas.iter().map(|r| format!("--- {}:\n{}", r.base, warnings(&r.log(), &errors))).collect();
    Err(format!(
        "{summary}\nproblems:\n  {}\nstreams:\n{}\nfailed requests (first 40):\n  {}\nreplica warnings (about them, else the last):\n{}\n{}",
        problems.join("\n  "),
        table.join("\n"),
        errors.join("\n  "),
        logs.join("\n"),
        lab.logs_tail(8)
    ))
}

/// A reader's mistakes: a response that is not a prefix of the stored lines, a `[DONE]` after fewer lines
/// than stored, or no `[DONE]` for a stream completed.
fn reader_problems(stream: &str, reading: &Reading, stored: &[String], completed: bool) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(n) = reading.segments.iter().position(|segment| !stored.starts_with(segment)) {
        let at = reading.segments[n].iter().zip(stored).position(|(x, y)| x != y).unwrap_or(stored.len());
        problems.push(format!("{stream}: the reader's response {n} departs from the stored lines at line {at}"));
    }
    let last = reading.segments.last().map_or(0, Vec::len);
    if reading.done && last != stored.len() {
        problems.push(format!("{stream}: the reader saw [DONE] after {last} lines of {}", stored.len()));
    }
    if completed && !reading.done {
        problems.push(format!("{stream}: completed, but the reader saw no [DONE] within {READERS_GRACE:?}"));
    }
    problems
}

/// Whether the new primary holds `ack`.
async fn held(db: &mut PgConnection, ack: &Ack) -> bool {
    let (query, key) = match ack {
        Ack::Message(m) => ("select count(*) from messages where message #>> '{}' = $1", m),
        Ack::Event(m) => ("select count(*) from events where event ->> 'message' = $1", m),
        Ack::Asked(id) => ("select count(*) from questions where id = $1", id),
        Ack::Answered(id) => ("select count(*) from questions where id = $1 and status = 'answered'", id),
        Ack::AskedOverMcp(content) => ("select count(*) from questions where content = $1", content),
    };
    sqlx::query_scalar::<_, i64>(query).bind(key).fetch_one(db).await.unwrap() > 0
}

/// The last WARN and ERROR lines of a replica's JSON log about the failed requests (by their request id), or
/// its last ones when none is about them.
fn warnings(log: &str, failed: &[String]) -> String {
    let ids: Vec<&str> = failed.iter().filter_map(|e| e.split(r#""requestId":""#).nth(1)?.get(..36)).collect();
    let warned: Vec<&str> = log.lines().filter(|l| l.contains(r#""WARN""#) || l.contains(r#""ERROR""#)).collect();
    let about: Vec<&str> = warned.iter().copied().filter(|l| ids.iter().any(|id| l.contains(id))).collect();
    let lines = if about.is_empty() { warned } else { about };
    lines[lines.len().saturating_sub(8)..].join("\n")
}
