//! An asynchronous failover that loses the old primary's last commits (its standby cut off first, so what comes
//! after certainly is lost): a reader that resumes by a number it saw from the old primary (a message's `cursor`,
//! a question's `resourceVersion`) gets every change the new primary has since, and never a number it saw.

use std::{
    collections::HashSet,
    time::{Duration, Instant},
};

use futures::future::join_all;
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection};

use crate::support::{
    Replica, SseReader,
    failover::{PrimaryStandby, Replication},
    within,
};

/// Messages and questions written after the cut: more than PostgreSQL logs a sequence ahead (32), so the lost
/// numbers go past any the standby knows of, and a promoted standby left alone would hand them out again.
const LOST: usize = 50;
/// Messages and questions written before the cut (kept), and after the failover (new).
const KEPT: usize = 3;
const NEW: usize = 3;
/// How long a watch may take to deliver what the new primary holds already.
const DELIVERY: Duration = Duration::from_secs(5);

/// What a reader got: each message's text and sequence number.
type Messages = Vec<(String, i64)>;
/// What a questions watch sent: each change's kind (`question_created`, …), resourceVersion and question id.
type Changes = Vec<(String, i64, String)>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_resuming_after_a_failover_that_lost_commits_gets_every_new_change_and_no_number_it_saw_before() {
    let began = Instant::now();
    let mut lab = PrimaryStandby::start_with_replication_link(Replication::Async).await;
    let replicas: [Replica; 3] = Replica::three(&lab.url(), &[]).await.into();
    let (client, bases) = (reqwest::Client::new(), replicas.each_ref().map(|r| r.base.as_str()));
    let texts = |kind: &str, n: usize| (0..n).map(|i| format!("{kind}-{i}")).collect::<Vec<_>>();

    // Before the cut: the standby gets these, and the first timeline is recorded.
    let mut seen_versions = HashSet::new();
    for (i, text) in texts("kept", KEPT).iter().enumerate() {
        append(&client, bases[i % 3], text).await;
        seen_versions.insert(ask(&client, bases[(i + 1) % 3], text).await.1);
    }
    let kept = page(&client, bases[0], "conversation_id=c").await;
    assert_eq!(timelines(&lab.primary_url()).await.len(), 1, "the brokers entered the first timeline");

    // After the cut: acknowledged and read from the old primary, then lost with it.
    lab.cut_replication().await;
    let mut lost_versions = Vec::new();
    for (i, text) in texts("lost", LOST).iter().enumerate() {
        append(&client, bases[i % 3], text).await;
        lost_versions.push(ask(&client, bases[(i + 1) % 3], text).await.1);
    }
    let lost = page(&client, bases[1], &format!("conversation_id=c&cursor={}", kept[KEPT - 1].1)).await;
    assert_eq!(lost.iter().map(|(text, _)| text.clone()).collect::<Vec<_>>(), texts("lost", LOST));
    seen_versions.extend(&lost_versions);
    let seen: HashSet<i64> = kept.iter().chain(&lost).map(|(_, sequence)| *sequence).collect();

    // The failover; the brokers ride it through.
    let lab_took = began.elapsed();
    let steps = lab.failover().await;
    let mut new_questions = Vec::new();
    for (i, text) in texts("new", NEW).iter().enumerate() {
        append(&client, bases[i % 3], text).await;
        new_questions.push(ask(&client, bases[(i + 1) % 3], text).await.0);
    }

    // The loss really happened: the new primary lacks what was written between the cut and the failover.
    let mut db = PgConnection::connect(&lab.primary_url()).await.expect("connect to the new primary");
    let held: Vec<String> =
        sqlx::query_scalar("select message #>> '{}' from messages where conversation_id = 'c' order by position")
            .fetch_all(&mut db)
            .await
            .unwrap();
    assert_eq!(held, [texts("kept", KEPT), texts("new", NEW)].concat(), "the messages on the new primary");
    let asked: Vec<String> =
        sqlx::query_scalar("select content from questions order by created_at").fetch_all(&mut db).await.unwrap();
    assert_eq!(asked, [texts("kept", KEPT), texts("new", NEW)].concat(), "the questions on the new primary");

    // Readers resume from lost numbers (the first, one in the middle) and from the last one they saw: by page
    // and by watch, of the conversation and of every message, each on another replica; all at once.
    let read_at = Instant::now();
    let cursors = [lost[0].1, lost[LOST / 2].1, lost[LOST - 1].1];
    let queries = cursors.iter().flat_map(|cursor| {
        let filters = ["conversation_id=c&", ""].into_iter();
        filters.flat_map(move |filter| ["", "watch=true&"].map(|watch| format!("{watch}{filter}cursor={cursor}")))
    });
    let versions = [lost_versions[0], lost_versions[LOST / 2], lost_versions[LOST - 1]];
    let (readings, question_readings) = tokio::join!(
        join_all(queries.enumerate().map(|(n, query)| read(&client, bases[n % 3], query))),
        join_all(versions.iter().enumerate().map(|(n, v)| watch_questions(&client, bases[n % 3], *v, &new_questions))),
    );
    let epochs = timelines(&lab.primary_url()).await;
    let mut problems = Vec::new();
    if epochs.len() != 2 {
        problems.push(format!("primary_epochs has timelines {epochs:?}: the brokers did not enter the new one"));
    }
    for (what, reading) in readings {
        match reading {
            Err(error) => problems.push(format!("{what}: {error}")),
            Ok(got) => {
                let texts_got: Vec<&str> = got.iter().map(|(text, _)| text.as_str()).collect();
                let repeated: Vec<_> = got.iter().filter(|(_, sequence)| seen.contains(sequence)).collect();
                if texts_got != texts("new", NEW) || !repeated.is_empty() {
                    problems.push(format!("{what}: got {got:?}, numbers seen before: {repeated:?}"));
                }
            }
        }
    }
    for (what, reading) in question_readings {
        match reading {
            Err(error) => problems.push(format!("{what}: {error}")),
            Ok(changes) => {
                let created = |id: &&String| changes.iter().any(|c| c.0 == "question_created" && &c.2 == *id);
                let missing: Vec<_> = new_questions.iter().filter(|id| !created(id)).collect();
                let repeated: Vec<_> =
                    changes.iter().filter(|(_, version, _)| seen_versions.contains(version)).collect();
                if !missing.is_empty() || !repeated.is_empty() {
                    problems.push(format!("{what}: missing {missing:?}, versions seen before: {repeated:?}"));
                }
            }
        }
    }
    eprintln!(
        "[asynchronous failover, {LOST} messages and questions lost] lab and load {:.1}s; failover {steps}; reads \
         {:.1}s; whole test {:.1}s; timelines {epochs:?}; numbers seen up to {}, new ones from {:?}",
        lab_took.as_secs_f64(),
        read_at.elapsed().as_secs_f64(),
        began.elapsed().as_secs_f64(),
        lost[LOST - 1].1,
        page(&client, bases[0], "conversation_id=c").await.get(KEPT).map(|(_, sequence)| *sequence),
    );
    assert!(problems.is_empty(), "{} readers went wrong:\n  {}", problems.len(), problems.join("\n  "));
}

/// Appends one message (a JSON string) to conversation `c`.
async fn append(client: &reqwest::Client, base: &str, text: &str) {
    let body = json!({"conversation_id": "c", "query_id": "q", "messages": [text]});
    let response = within("a POST /messages", client.post(format!("{base}/messages")).json(&body).send()).await;
    let response = response.expect("POST /messages");
    let status = response.status();
    assert_eq!(status, 200, "POST /messages {text}: {}", response.text().await.unwrap_or_default());
}

/// Asks a question with `content`; returns its id and resourceVersion.
async fn ask(client: &reqwest::Client, base: &str, content: &str) -> (String, i64) {
    let body = json!({"sender": "ark://agents/failover", "recipient": "ark://users/dave", "content": content});
    let response = within("a POST /questions", client.post(format!("{base}/questions")).json(&body).send()).await;
    let response = response.expect("POST /questions");
    let (status, question) = (response.status(), response.json::<Value>().await.expect("a question"));
    assert_eq!(status, 201, "POST /questions {content}: {question}");
    let version = question["resourceVersion"].as_str().and_then(|v| v.parse().ok()).expect("a resourceVersion");
    (question["id"].as_str().expect("an id").to_owned(), version)
}

/// The one page `GET /messages?<query>` answers (every message here fits in it).
async fn page(client: &reqwest::Client, base: &str, query: &str) -> Messages {
    let url = format!("{base}/messages?limit=1000&{query}");
    let response = within("a GET /messages", client.get(&url).send()).await.expect("GET /messages");
    let page: Value = response.json().await.expect("a page");
    assert_eq!(page["hasMore"], false, "{url}: {page}");
    let items = page["items"].as_array().unwrap_or_else(|| panic!("{url}: {page}"));
    items
        .iter()
        .map(|item| (item["message"].as_str().unwrap().to_owned(), item["sequence"].as_i64().unwrap()))
        .collect()
}

/// What a reader resuming with `GET /messages?<query>` gets: the page, or with `watch=true` the first [`NEW`]
/// messages the watch sends (or those it sent within [`DELIVERY`]).
async fn read(client: &reqwest::Client, base: &str, query: String) -> (String, Result<Messages, String>) {
    if !query.starts_with("watch=true") {
        let got = page(client, base, &query).await;
        return (format!("GET /messages?{query}"), Ok(got));
    }
    let frames = watch(client, &format!("{base}/messages?{query}"), |frames| frames.len() >= NEW).await;
    (format!("GET /messages?{query}"), frames.map(|frames| frames.iter().map(|frame| message(frame)).collect()))
}

/// What a reader resuming with the questions' watch from `version` gets: each change (its kind, resourceVersion
/// and question id) until every one of `new` was created, or those it sent within [`DELIVERY`].
async fn watch_questions(
    client: &reqwest::Client,
    base: &str,
    version: i64,
    new: &[String],
) -> (String, Result<Changes, String>) {
    let what = format!("GET /questions?watch=true&resourceVersion={version}");
    let created = |frames: &[String]| {
        let changes: Changes = frames.iter().map(|frame| change(frame)).collect();
        new.iter().all(|id| changes.iter().any(|c| c.0 == "question_created" && &c.2 == id))
    };
    let frames = watch(client, &format!("{base}{}", &what[4..]), created).await;
    (what, frames.map(|frames| frames.iter().map(|frame| change(frame)).collect()))
}

/// The frames of the SSE response at `url` (comments skipped) until they are `enough`, or those that came
/// within [`DELIVERY`]; or why it was refused.
async fn watch(client: &reqwest::Client, url: &str, enough: impl Fn(&[String]) -> bool) -> Result<Vec<String>, String> {
    let response = within("a watch's headers", client.get(url).send()).await.map_err(|e| e.to_string())?;
    if response.status() != 200 {
        return Err(format!("{}: {}", response.status(), response.text().await.unwrap_or_default()));
    }
    let (mut reader, mut frames) = (SseReader::from_response(response), Vec::new());
    let _ = tokio::time::timeout(DELIVERY, async {
        while !enough(&frames) {
            match reader.next_frame().await {
                Some(frame) if frame.starts_with(':') => {}
                Some(frame) => frames.push(frame),
                None => break,
            }
        }
    })
    .await;
    Ok(frames)
}

/// A message watch's frame: the message's text and sequence number.
fn message(frame: &str) -> (String, i64) {
    let item: Value = serde_json::from_str(frame.strip_prefix("data: ").expect("a data frame")).expect("JSON");
    (item["message"].as_str().unwrap().to_owned(), item["sequence"].as_i64().unwrap())
}

/// A questions watch's frame: the change, its resourceVersion, and the question's id.
fn change(frame: &str) -> (String, i64, String) {
    let field = |name: &str| frame.lines().find_map(|line| line.strip_prefix(name)).unwrap_or_default();
    let question: Value = serde_json::from_str(field("data: ")).expect("a question");
    let version = field("id: ").parse().expect("an id: resourceVersion");
    (field("event: ").to_owned(), version, question["id"].as_str().unwrap_or_default().to_owned())
}

/// The timelines recorded in `primary_epochs` of the database at `url`.
async fn timelines(url: &str) -> Vec<i32> {
    let mut db = PgConnection::connect(url).await.expect("connect to the primary");
    sqlx::query_scalar("select timeline from primary_epochs order by timeline").fetch_all(&mut db).await.unwrap()
}
