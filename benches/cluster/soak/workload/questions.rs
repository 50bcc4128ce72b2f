//! The soak's questions: question `i` is asked on replica `i`, answered (after a pause, as a person would) on
//! replica `i + 1` and read back on replica `i + 2`; one in ten is left to expire (a short `ttlSeconds`; the
//! reaper expires it). One watcher per replica follows `GET /questions?watch=true` from the version listed
//! before the first question, and moves to the next replica every `watcher_life`, resuming with
//! `Last-Event-ID`. At the end every watcher must have seen each creation, each acknowledged answer and each
//! expiry exactly once.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};
use tokio::{
    sync::{oneshot, watch},
    task::JoinSet,
    time::{Instant, MissedTickBehavior},
};
use tokio_util::sync::CancellationToken;

use super::load::causes;
use super::{Context, count};

/// One question in this many is left to expire.
const EXPIRING_EVERY: usize = 10;
const SENDER: &str = "ark://agents/soak";
/// How long the end waits for watchers to catch up with the last change.
const CATCH_UP: Duration = Duration::from_secs(20);

/// What one watcher saw: how often each `(kind, question id)`, and the last version.
#[derive(Debug, Default)]
struct Log {
    seen: HashMap<(String, String), u32>,
    last: i64,
    moves: u64,
}

impl Log {
    fn times(&self, kind: &str, id: &str) -> u32 {
        self.seen.get(&(kind.to_owned(), id.to_owned())).copied().unwrap_or(0)
    }
}

/// Asks, answers and watches until `deadline`, then judges what the watchers saw.
pub(super) async fn run(context: Arc<Context>, deadline: Instant) {
    let Some(from) = current_version(&context).await else { return };
    let cancel = CancellationToken::new();
    // Bumped on every change any watcher sees, so the end can wait for a condition on the logs.
    let (changes, _) = watch::channel(0u64);
    let mut watchers = JoinSet::new();
    let mut logs = Vec::new();
    for j in 0..context.replicas.len() {
        let log = Arc::new(Mutex::new(Log { last: from, ..Log::default() }));
        let (ready, answered) = oneshot::channel();
        let task = watcher(context.clone(), j, log.clone(), changes.clone(), cancel.clone(), ready);
        watchers.spawn(task);
        logs.push(log);
        if tokio::time::timeout(CATCH_UP, answered).await.is_err() {
            context.error(format!("question watcher {j} did not start"));
        }
    }

    let workload = &context.workload;
    let recipient = format!("ark://users/soak-{}", workload.tag);
    let mut ticks = tokio::time::interval(workload.question_every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let (mut created, mut expiring, mut answers) = (Vec::new(), Vec::new(), JoinSet::new());
    for i in 0.. {
        ticks.tick().await;
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        // Left to expire only if the reaper can expire it before the end.
        let expires = i % EXPIRING_EVERY == EXPIRING_EVERY - 1
            && now + workload.expiring_ttl + 2 * workload.reap_interval < deadline;
        let mut body = json!({"sender": SENDER, "recipient": recipient, "content": format!("soak question {i}")});
        if expires {
            body["ttlSeconds"] = json!(workload.expiring_ttl.as_secs());
        }
        let Some(id) = ask(&context, i, &body).await else { continue };
        created.push(id.clone());
        if expires {
            expiring.push(id);
        } else {
            answers.spawn(answer(context.clone(), i, id));
        }
    }
    let answered: Vec<String> = answers.join_all().await.into_iter().flatten().collect();

    // The end: every expiry seen, then every watcher at the last version.
    let mut waiting = changes.subscribe();
    let expiry_wait = workload.expiring_ttl + 3 * workload.reap_interval + CATCH_UP;
    let all_expired = |_: &u64| {
        logs.iter().all(|log| {
            let log = log.lock().expect("the log lock");
            expiring.iter().all(|id| log.times("question_expired", id) > 0)
        })
    };
    let _ = tokio::time::timeout(expiry_wait, waiting.wait_for(all_expired)).await;
    if let Some(last) = current_version(&context).await {
        let caught_up = |_: &u64| logs.iter().all(|log| log.lock().expect("the log lock").last >= last);
        let _ = tokio::time::timeout(CATCH_UP, waiting.wait_for(caught_up)).await;
    }
    cancel.cancel();
    watchers.join_all().await;

    let logs: Vec<Log> = logs.into_iter().map(|log| std::mem::take(&mut *log.lock().expect("the log lock"))).collect();
    let expected = [("question_created", &created), ("question_answered", &answered), ("question_expired", &expiring)];
    let (mut unseen, mut duplicates) = (HashMap::new(), 0);
    for (kind, ids) in expected {
        for log in &logs {
            for id in ids.iter() {
                match log.times(kind, id) {
                    0 => *unseen.entry(kind).or_insert(0u64) += 1,
                    n => duplicates += u64::from(n - 1),
                }
            }
        }
    }
    let expired = expiring.iter().filter(|id| logs.iter().all(|log| log.times("question_expired", id) > 0)).count();
    count(&context.tally, |t| {
        t.questions_expired = expired as u64;
        t.watcher_moves = logs.iter().map(|log| log.moves).sum();
        t.creations_unseen += unseen.get("question_created").copied().unwrap_or(0);
        t.answers_unseen += unseen.get("question_answered").copied().unwrap_or(0);
        t.expiries_unseen += unseen.get("question_expired").copied().unwrap_or(0);
        t.question_duplicates += duplicates;
    });
}

/// The questions' current `resourceVersion`, listed on the first replica.
async fn current_version(context: &Context) -> Option<i64> {
    let url = format!("{}/questions?limit=1", context.replica(0));
    let listed = match context.client.get(&url).send().await {
        Ok(reply) if reply.status() == 200 => reply.json::<Value>().await.map_err(|e| causes(&e)),
        Ok(reply) => Err(format!("HTTP {}", reply.status())),
        Err(error) => Err(causes(&error)),
    };
    let version = listed.map(|list| list["resourceVersion"].as_str().and_then(|v| v.parse().ok()));
    match version {
        Ok(Some(version)) => Some(version),
        Ok(None) => {
            context.error(format!("GET {url}: no resourceVersion"));
            None
        }
        Err(error) => {
            context.error(format!("GET {url}: {error}"));
            None
        }
    }
}

/// Asks question `i` on replica `i`; its id once acknowledged.
async fn ask(context: &Context, i: usize, body: &Value) -> Option<String> {
    let url = format!("{}/questions", context.replica(i));
    match context.client.post(&url).json(body).send().await {
        Ok(reply) if reply.status() == 201 => match reply.json::<Value>().await {
            Ok(question) => {
                count(&context.tally, |t| t.questions_asked += 1);
                question["id"].as_str().map(str::to_owned)
            }
            Err(error) => {
                context.error(format!("POST {url}: {}", causes(&error)));
                None
            }
        },
        Ok(reply) => {
            context.error(format!("POST {url}: HTTP {}", reply.status()));
            None
        }
        Err(error) => {
            context.error(format!("POST {url}: {}", causes(&error)));
            None
        }
    }
}

/// Answers question `i` on replica `i + 1` and reads it back on replica `i + 2`; its id once acknowledged.
async fn answer(context: Arc<Context>, i: usize, id: String) -> Option<String> {
    // Pacing: a person takes a moment to answer, so some questions are always pending.
    tokio::time::sleep(context.workload.answer_after).await;
    let response = format!("soak answer {i}");
    let url = format!("{}/questions/{id}/answer", context.replica(i + 1));
    match context.client.post(&url).json(&json!({"response": response})).send().await {
        Ok(reply) if reply.status() == 200 => {}
        Ok(reply) => {
            context.error(format!("POST {url}: HTTP {}", reply.status()));
            return None;
        }
        Err(error) => {
            context.error(format!("POST {url}: {}", causes(&error)));
            return None;
        }
    }
    count(&context.tally, |t| t.questions_answered += 1);
    let url = format!("{}/questions/{id}", context.replica(i + 2));
    let read = match context.client.get(&url).send().await {
        Ok(reply) => reply.json::<Value>().await.map_err(|e| causes(&e)),
        Err(error) => Err(causes(&error)),
    };
    match read {
        Ok(question) if question["status"] == "answered" && question["response"] == response.as_str() => {}
        Ok(question) => {
            eprintln!("soak: question {id} answered on one replica reads back on another as {question}");
            count(&context.tally, |t| t.answers_misread += 1);
        }
        Err(error) => context.error(format!("GET {url}: {error}")),
    }
    Some(id)
}

/// Watcher `j`: from replica `j`, moving on every `watcher_life` (the first move staggered by `j`) and after
/// a broken connection, each time resuming after the last version it saw.
async fn watcher(
    context: Arc<Context>,
    j: usize,
    log: Arc<Mutex<Log>>,
    changes: watch::Sender<u64>,
    cancel: CancellationToken,
    ready: oneshot::Sender<()>,
) {
    let life = context.workload.watcher_life;
    let mut ready = Some(ready);
    let mut stay = life.mul_f64((j + 1) as f64 / (context.replicas.len() + 1) as f64);
    for replica in j.. {
        let url = format!("{}/questions?watch=true", context.replica(replica));
        let last = log.lock().expect("the log lock").last;
        let request = context.client.get(&url).header("last-event-id", last.to_string()).send();
        let response = tokio::select! {
            _ = cancel.cancelled() => return,
            response = request => response,
        };
        let failed = match response {
            Ok(response) if response.status() == 200 => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(());
                }
                let leave = Instant::now() + stay;
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep_until(leave) => None,
                    ended = follow(response, &log, &changes) => Some(format!("GET {url}: {ended}")),
                }
            }
            Ok(response) => Some(format!("GET {url}: HTTP {}", response.status())),
            Err(error) => Some(format!("GET {url}: {}", causes(&error))),
        };
        if let Some(error) = failed {
            context.error(error);
            // A retry's pacing, so a replica that refuses does not make this a busy loop.
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
        stay = life;
        log.lock().expect("the log lock").moves += 1;
    }
}

/// Records every change of a watch response until it ends; returns why it ended.
async fn follow(response: reqwest::Response, log: &Mutex<Log>, changes: &watch::Sender<u64>) -> String {
    let mut body = response.bytes_stream().map_err(|e| causes(&e));
    let mut buffer = String::new();
    loop {
        match body.next().await {
            Some(Ok(piece)) => buffer.push_str(&String::from_utf8_lossy(&piece)),
            Some(Err(error)) => return error,
            None => return "the watch ended".to_owned(),
        }
        while let Some(end) = buffer.find("\n\n") {
            let frame: String = buffer.drain(..end + 2).collect();
            let field = |name: &str| frame.lines().find_map(|line| line.strip_prefix(name)).map(str::trim);
            let (Some(kind), Some(version), Some(data)) = (field("event:"), field("id:"), field("data:")) else {
                continue;
            };
            let id = serde_json::from_str::<Value>(data).ok().and_then(|q| q["id"].as_str().map(str::to_owned));
            let (Ok(version), Some(id)) = (version.parse::<i64>(), id) else { continue };
            let mut log = log.lock().expect("the log lock");
            *log.seen.entry((kind.to_owned(), id)).or_insert(0) += 1;
            log.last = log.last.max(version);
            drop(log);
            changes.send_modify(|n| *n += 1);
        }
    }
}
