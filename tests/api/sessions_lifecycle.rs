//! How sessions change besides events, as upstream's newest broker changes them: a deleted Query leaves every
//! session (the controller's finalizer), a message that first puts a query in a conversation shows it,
//! sessions and messages expire, and an event applied after a later one of its query cannot undo it.

use serde_json::{Value, json};

use crate::{
    events::post_event,
    memory::reaper,
    sessions::controller_event,
    support::{
        SseReader, TestApp,
        hold::{install_hold, release_hold, wait_until_held},
        json_of,
        replica::refused_start,
        within,
    },
};

fn frame(data: &str) -> (String, Value) {
    let frame: Value = serde_json::from_str(data).expect("one JSON object per frame");
    (frame["sessionId"].as_str().unwrap().to_owned(), frame["session"].clone())
}

async fn session(app: &TestApp, id: &str) -> Value {
    let (status, session) = json_of(app.get(&format!("/sessions/{id}")).await).await;
    assert_eq!(status, 200, "{session}");
    session
}

async fn post_message(app: &TestApp, conversation: &str, query: &str) {
    let body = json!({"conversation_id": conversation, "query_id": query, "messages": [{"role": "user"}]});
    assert_eq!(app.post_json("/messages", &body).await.status(), 200);
}

async fn expire(app: &TestApp, session_id: &str) {
    sqlx::query("update sessions set expires_at = now() - interval '1 second' where session_id = $1")
        .bind(session_id)
        .execute(&app.pool())
        .await
        .unwrap();
}

#[tokio::test]
async fn deleting_a_query_removes_it_from_every_session_drops_emptied_ones_and_tells_watchers() {
    let app = TestApp::spawn().await;
    let failed = json!({"conversationId": "c1", "error": "boom"});
    post_event(&app, &controller_event("s1", "q1", "QueryExecutionComplete", failed)).await;
    post_event(&app, &controller_event("s1", "q2", "QueryExecutionComplete", json!({"conversationId": "c2"}))).await;
    post_event(&app, &controller_event("s2", "q1", "QueryExecutionStart", json!({}))).await;
    let before = session(&app, "s1").await;
    assert_eq!((before["status"].as_str(), before["errorCount"].as_i64()), (Some("idle"), Some(1)), "{before}");
    let mut watch = SseReader::open(&app.client, &app.url("/sessions?watch=true&session_id=s1")).await;
    assert_eq!(frame(&watch.take_data(1).await[0]).0, "s1", "the replay");

    let (status, reply) = json_of(app.delete("/sessions/queries/q1").await).await;
    assert_eq!(
        (status, reply),
        (200, json!({"status": "success", "message": "Query q1 removed from 2 session(s)", "removed": 2}))
    );
    let (id, changed) = frame(&watch.take_data(1).await[0]);
    assert_eq!(id, "s1");
    assert_eq!(changed["queries"].as_object().unwrap().keys().collect::<Vec<_>>(), ["q2"]);
    assert_eq!((changed["status"].as_str(), changed["errorCount"].as_i64()), (Some("idle"), Some(0)));
    assert_eq!(changed["conversations"].as_array().unwrap().len(), 1);
    assert_eq!(changed["conversations"][0]["conversationId"], "c2");
    assert_eq!(changed["participants"], json!([{"id": "weather-agent", "name": "weather-agent", "type": "agent"}]));
    assert_eq!(changed["lastActivity"], before["lastActivity"], "a deletion is not activity");
    assert_eq!(session(&app, "s1").await, changed);
    let (status, _) = json_of(app.get("/sessions/s2").await).await;
    assert_eq!(status, 404, "a session left without queries is gone");

    // The finalizer retries, and deletes Queries that never emitted an event: 200, not 404.
    let (status, reply) = json_of(app.delete("/sessions/queries/q1").await).await;
    assert_eq!(
        (status, reply["message"].as_str(), reply["removed"].as_i64()),
        (200, Some("Query q1 removed from 0 session(s)"), Some(0))
    );
    let (status, reply) = json_of(app.delete(&format!("/sessions/queries/{}", "q".repeat(513))).await).await;
    assert_eq!(
        (status, reply["error"]["code"].as_str()),
        (400, Some("VALIDATION_ERROR")),
        "as every other id: {reply}"
    );
}

#[tokio::test]
async fn an_older_done_applied_after_a_newer_error_does_not_clear_it() {
    let app = TestApp::spawn().await;
    let url = app.state.config.database_url.as_ref().unwrap().expose().to_owned();
    let mut hold = install_hold(&url).await;
    post_event(&app, &controller_event("s", "q", "QueryExecutionStart", json!({}))).await;
    // Two writers of one query name (a Query deleted and created again: another UID). The `done` arrives
    // first (the earlier sequence number) but is held open before its session sees it ...
    let mut done = controller_event("s", "q", "QueryExecutionComplete", json!({"queryId": "uid-q-2"}));
    done["message"] = json!("hold");
    let held = tokio::spawn({
        let (client, url) = (app.client.clone(), app.url("/events"));
        async move { client.post(url).json(&done).send().await.unwrap().status() }
    });
    wait_until_held(&mut hold).await;
    // ... while the `error` that arrived after it is applied and committed.
    post_event(&app, &controller_event("s", "q", "QueryExecutionComplete", json!({"error": "boom"}))).await;
    release_hold(&mut hold).await;
    assert_eq!(within("the held event", held).await.unwrap(), 201);

    let after = session(&app, "s").await;
    let query = &after["queries"]["q"];
    assert_eq!((query["phase"].as_str(), query["error"].as_str()), (Some("error"), Some("boom")), "{after}");
    assert_eq!((after["status"].as_str(), after["errorCount"].as_i64()), (Some("error"), Some(1)));
    // A later `done` still clears it (the HITL pause).
    post_event(&app, &controller_event("s", "q", "QueryExecutionComplete", json!({}))).await;
    assert_eq!(session(&app, "s").await["queries"]["q"]["phase"], "done");
}

#[tokio::test]
async fn a_message_that_first_puts_a_query_in_a_conversation_shows_it_to_watchers_and_later_ones_are_silent() {
    let app = TestApp::spawn().await;
    // q1 is in two sessions; upstream's message goes to a live one before an expired one, then by id.
    post_event(&app, &controller_event("s-b", "q1", "QueryExecutionComplete", json!({}))).await;
    post_event(&app, &controller_event("s-a", "q1", "QueryExecutionStart", json!({}))).await;
    expire(&app, "s-a").await;
    let before = session(&app, "s-b").await;
    assert_eq!(before["conversations"], json!([]));
    let mut watch = SseReader::open(&app.client, &app.url("/sessions?watch=true")).await;
    assert_eq!(frame(&watch.take_data(1).await[0]).0, "s-b", "the replay (s-a has expired)");

    post_message(&app, "conv-1", "q1").await;
    let (id, joined) = frame(&watch.take_data(1).await[0]);
    assert_eq!(id, "s-b");
    assert_eq!(joined["queries"]["q1"]["conversationId"], "conv-1");
    assert_eq!(joined["conversations"][0]["conversationId"], "conv-1", "{joined}");
    assert_eq!(joined["participants"], json!([{"id": "weather-agent", "name": "weather-agent", "type": "agent"}]));
    assert_eq!(joined["queries"]["q1"]["lastActivity"], before["queries"]["q1"]["lastActivity"]);
    assert_eq!(joined["status"], "idle");

    // A later message is activity only: the session's row is not marked changed, so no watcher is told.
    let changed_by = |app: &TestApp| {
        let pool = app.pool();
        async move {
            let tx: String = sqlx::query_scalar("select tx::text from sessions where session_id = 's-b'")
                .fetch_one(&pool)
                .await
                .unwrap();
            tx
        }
    };
    let tx = changed_by(&app).await;
    post_message(&app, "conv-2", "q1").await;
    assert_eq!(changed_by(&app).await, tx);
    let after = session(&app, "s-b").await;
    assert_eq!(after["queries"]["q1"]["conversationId"], "conv-1", "the first conversation stays");
    assert!(after["lastActivity"].as_str() > joined["lastActivity"].as_str(), "{after}");
    let (status, _) = json_of(app.get("/sessions/s-a").await).await;
    assert_eq!(status, 404, "the expired session got nothing");
}

#[tokio::test]
async fn an_expired_session_is_hidden_until_the_reaper_deletes_it_and_events_and_messages_extend_it() {
    let app = TestApp::spawn_with(|config| {
        (config.session_ttl_seconds, config.message_ttl_seconds, config.event_ttl_seconds) = (7 * 86_400, 3600, 3600);
    })
    .await;
    post_event(&app, &controller_event("old", "q-old", "QueryExecutionStart", json!({}))).await;
    post_event(&app, &controller_event("live", "q-live", "QueryExecutionStart", json!({}))).await;
    let ttl = "select extract(epoch from expires_at - now())::bigint from sessions where session_id = 'live'";
    let left = |app: &TestApp| {
        let pool = app.pool();
        async move { sqlx::query_scalar::<_, i64>(ttl).fetch_one(&pool).await.unwrap() }
    };
    assert!((7 * 86_400 - 60..=7 * 86_400).contains(&left(&app).await), "an event keeps it the TTL");
    sqlx::query("update sessions set expires_at = now() + interval '1 minute' where session_id = 'live'")
        .execute(&app.pool())
        .await
        .unwrap();
    post_message(&app, "c", "q-live").await;
    assert!(left(&app).await > 86_400, "so does a message");

    expire(&app, "old").await;
    let (_, whole) = json_of(app.get("/sessions").await).await;
    assert_eq!(whole["sessions"].as_object().unwrap().keys().collect::<Vec<_>>(), ["live"]);
    let (_, page) = json_of(app.get("/sessions?limit=10").await).await;
    assert_eq!((page["total"].as_i64(), page["statusCounts"]["active"].as_i64()), (Some(1), Some(1)));
    let (status, _) = json_of(app.get("/sessions/old").await).await;
    assert_eq!(status, 404);

    let report = reaper(&app).pass().await;
    assert_eq!(report.iter().find(|(kind, _)| *kind == "sessions"), Some(&("sessions", 1)));
    let left_rows: i64 = sqlx::query_scalar("select count(*) from session_queries where session_id = 'old'")
        .fetch_one(&app.pool())
        .await
        .unwrap();
    assert_eq!(left_rows, 0, "its queries went with it");
    assert_eq!(session(&app, "live").await["sessionId"], "live");
}

#[tokio::test]
async fn messages_without_a_ttl_expire_after_the_message_visibility_ttl() {
    let app = TestApp::spawn_with(|config| config.message_ttl_seconds = 3600).await;
    post_message(&app, "c1", "q1").await;
    let body = json!({"conversation_id": "c1", "query_id": "q1", "messages": [{"n": 2}], "ttl_seconds": 60});
    assert_eq!(app.post_json("/messages", &body).await.status(), 200);
    let ttls: Vec<Option<i64>> = sqlx::query_scalar(
        "select extract(epoch from expires_at - created_at)::bigint from messages order by sequence_number",
    )
    .fetch_all(&app.pool())
    .await
    .unwrap();
    assert_eq!(ttls, [Some(3600), Some(60)]);
}

#[tokio::test]
async fn a_broker_whose_session_ttl_is_shorter_than_the_message_ttl_refuses_to_start_and_says_why() {
    let scratch = tempfile::Builder::new().prefix("ark-ttl-").tempdir().unwrap();
    let dir = scratch.path().join("data");
    let env = [("SESSIONS_VISIBILITY_TTL_SECONDS", "3600"), ("MESSAGE_VISIBILITY_TTL_SECONDS", "7200")];
    let said = refused_start(&dir, &env).await;
    assert!(said.contains("SESSIONS_VISIBILITY_TTL_SECONDS (--session-ttl-seconds, 3600) must be at least"), "{said}");
    assert!(!dir.exists(), "nothing was started");
}
