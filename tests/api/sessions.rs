//! The sessions API, black-box: sessions derived from the controller's events (and messages) by upstream's
//! rules, the three modes of `GET /sessions`, one session, `POST`/`DELETE`, and the watch.

use serde_json::{Value, json};

use crate::{
    events::post_event,
    support::{Replica, SseReader, TestApp, ark_api::ArkApiProxy, json_of},
};

/// The controller's six reasons for one query, with string-valued data, in order.
pub const SIX_REASONS: [&str; 6] = [
    "QueryExecutionStart",
    "AgentExecutionStart",
    "LLMCallStart",
    "LLMCallComplete",
    "AgentExecutionComplete",
    "QueryExecutionComplete",
];

/// An event of query `name` (UID `uid-<name>`) in `session`, as the controller sends it.
pub fn controller_event(session: &str, name: &str, reason: &str, extra: Value) -> Value {
    let mut data = json!({"queryId": format!("uid-{name}"), "queryName": name, "queryNamespace": "default",
                          "sessionId": session, "agent": "weather-agent", "targetType": "agent"});
    data.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    json!({"timestamp": chrono::Utc::now().to_rfc3339(), "eventType": "Normal", "reason": reason,
           "message": reason, "data": data})
}

#[tokio::test]
async fn the_controllers_six_reasons_with_a_hitl_pause_end_in_a_done_session() {
    let app = TestApp::spawn().await;
    let conversation = json!({"conversationId": "conv-1"});
    for reason in &SIX_REASONS[..4] {
        post_event(&app, &controller_event("session-42", "q1", reason, conversation.clone())).await;
    }
    let (_, running) = json_of(app.get("/sessions/session-42").await).await;
    assert_eq!(
        (running["status"].as_str(), running["queries"]["q1"]["phase"].as_str()),
        (Some("active"), Some("running"))
    );

    // The executor pauses for a human: the query completes with an error, then completes for real.
    let paused = json!({"conversationId": "conv-1", "error": "tool approval required"});
    post_event(&app, &controller_event("session-42", "q1", "QueryExecutionComplete", paused)).await;
    let (_, waiting) = json_of(app.get("/sessions/session-42").await).await;
    assert_eq!(waiting["queries"]["q1"]["phase"], "error");
    assert_eq!(waiting["queries"]["q1"]["error"], "tool approval required");
    assert_eq!((waiting["status"].as_str(), waiting["errorCount"].as_i64()), (Some("error"), Some(1)));

    for reason in &SIX_REASONS[4..] {
        post_event(&app, &controller_event("session-42", "q1", reason, conversation.clone())).await;
    }
    let (status, done) = json_of(app.get("/sessions/session-42").await).await;
    assert_eq!(status, 200);
    assert_eq!(done["sessionId"], "session-42");
    assert_eq!(done["name"], "42", "the name is the id without its session- prefix");
    let query = &done["queries"]["q1"];
    assert_eq!((query["phase"].as_str(), query.get("error")), (Some("done"), None), "done clears the error: {query}");
    assert_eq!((query["namespace"].as_str(), query["agent"].as_str()), (Some("default"), Some("weather-agent")));
    assert!(query["completedAt"].is_string());
    assert_eq!((done["status"].as_str(), done["errorCount"].as_i64()), (Some("idle"), Some(0)));
    assert_eq!(done["participants"], json!([{"id": "weather-agent", "name": "weather-agent", "type": "agent"}]));
    let conversations = done["conversations"].as_array().unwrap();
    assert_eq!(conversations.len(), 1);
    assert_eq!(conversations[0]["conversationId"], "conv-1");
    assert_eq!(conversations[0]["messageCount"], 1);
    assert!(conversations[0]["duration"].as_str().unwrap().ends_with('s'), "{}", conversations[0]);
}

#[tokio::test]
async fn get_sessions_serves_the_whole_store_or_a_filtered_sorted_page_with_status_counts() {
    let app = TestApp::spawn().await;
    post_event(&app, &controller_event("session-a", "qa", "QueryExecutionStart", json!({}))).await;
    post_event(&app, &controller_event("session-b", "qb", "QueryExecutionComplete", json!({"team": "Research-Crew"})))
        .await;
    post_event(&app, &controller_event("session-c", "qc", "LLMCallError", json!({"error": "boom"}))).await;
    post_event(&app, &controller_event("session-a", "qa2", "QueryExecutionStart", json!({"conversationId": "x"})))
        .await;
    post_event(&app, &controller_event("session-a", "qa3", "QueryExecutionStart", json!({"conversationId": "y"})))
        .await;

    let (_, whole) = json_of(app.get("/sessions").await).await;
    let ids: Vec<&String> = whole["sessions"].as_object().unwrap().keys().collect();
    assert_eq!(ids.len(), 3, "{whole}");
    assert_eq!(whole["sessions"]["session-c"]["status"], "error");
    // The whole store is read by a statement of its own (not through the view one session is read by):
    // every entry is the same both ways, queries in their order included.
    for id in ids {
        let (_, one) = json_of(app.get(&format!("/sessions/{id}")).await).await;
        assert_eq!(whole["sessions"][id], one, "{id}");
    }
    let queries: Vec<&String> = whole["sessions"]["session-a"]["queries"].as_object().unwrap().keys().collect();
    assert_eq!(queries, ["qa", "qa2", "qa3"]);

    let (_, page) = json_of(app.get("/sessions?limit=2").await).await;
    assert_eq!(
        (page["total"].as_i64(), page["hasMore"].as_bool(), page["nextCursor"].as_i64()),
        (Some(3), Some(true), Some(2))
    );
    assert_eq!(page["statusCounts"], json!({"active": 1, "idle": 1, "error": 1}));
    let (_, rest) = json_of(app.get("/sessions?limit=2&cursor=2").await).await;
    assert_eq!((rest["items"].as_array().unwrap().len(), rest["hasMore"].as_bool()), (1, Some(false)));

    let ids = |page: &Value| -> Vec<String> {
        page["items"].as_array().unwrap().iter().map(|s| s["sessionId"].as_str().unwrap().to_owned()).collect()
    };
    let (_, by_name) = json_of(app.get("/sessions?limit=10&sort=name&order=asc").await).await;
    assert_eq!(ids(&by_name), ["session-a", "session-b", "session-c"]);
    let (_, by_conversations) = json_of(app.get("/sessions?limit=10&sort=conversations").await).await;
    assert_eq!(ids(&by_conversations)[0], "session-a", "two conversations, the most");
    let (_, by_date) = json_of(app.get("/sessions?cursor=0&sort=date&order=desc").await).await;
    assert_eq!(ids(&by_date)[0], "session-a", "the latest activity first");

    let (_, errors) = json_of(app.get("/sessions?limit=10&status=error").await).await;
    assert_eq!(
        (ids(&errors), errors["statusCounts"].clone()),
        (vec!["session-c".to_owned()], json!({"active": 0, "idle": 0, "error": 1}))
    );
    let (_, found) = json_of(app.get("/sessions?limit=10&search=research-CREW").await).await;
    assert_eq!(ids(&found), ["session-b"], "search covers a query's team, case-insensitively");
    let (_, later) = json_of(app.get("/sessions?limit=10&dateFrom=2999-01-01").await).await;
    assert_eq!(later["total"], 0);
    let (_, earlier) = json_of(app.get("/sessions?limit=10&dateTo=2999-01-01T00:00:00Z").await).await;
    assert_eq!(earlier["total"], 3);

    for (query, code) in [
        ("/sessions?status=busy", "VALIDATION_ERROR"),
        ("/sessions?sort=size", "VALIDATION_ERROR"),
        ("/sessions?order=up", "VALIDATION_ERROR"),
        ("/sessions?limit=5&dateFrom=someday", "VALIDATION_ERROR"),
        ("/sessions?watch=yes", "VALIDATION_ERROR"),
        ("/sessions?limit=0", "PAGINATION_ERROR"),
        ("/sessions?cursor=-3", "PAGINATION_ERROR"),
    ] {
        let (status, reply) = json_of(app.get(query).await).await;
        assert_eq!((status, reply["error"]["code"].as_str()), (400, Some(code)), "{query}: {reply}");
    }
}

#[tokio::test]
async fn one_session_post_and_purge_answer_as_upstream() {
    let app = TestApp::spawn().await;
    let (status, missing) = json_of(app.get("/sessions/nope").await).await;
    assert_eq!((status, missing["error"]["code"].as_str()), (404, Some("NOT_FOUND")));
    assert_eq!(missing["error"]["message"], "Session not found");

    let body = json!({"sessionId": "manual", "queryName": "q", "toolName": "calculator", "_reason": "ToolCallStart"});
    let (status, reply) = json_of(app.post_json("/sessions", &body).await).await;
    assert_eq!((status, reply), (201, json!({"status": "success"})));
    let (_, session) = json_of(app.get("/sessions/manual").await).await;
    assert_eq!(session["queries"]["q"]["tool"], "calculator", "toolName becomes tool");
    let (status, reply) = json_of(app.post_json("/sessions", &json!({"queryName": "q"})).await).await;
    assert_eq!((status, reply["error"]["message"].as_str()), (400, Some("sessionId: required")));

    let (status, reply) = json_of(app.delete("/sessions").await).await;
    assert_eq!((status, reply), (200, json!({"status": "success", "message": "Sessions purged"})));
    let (_, whole) = json_of(app.get("/sessions").await).await;
    assert_eq!(whole, json!({"sessions": {}}));
}

#[tokio::test]
async fn a_message_of_a_known_query_is_activity_of_its_session() {
    let app = TestApp::spawn().await;
    post_event(&app, &controller_event("s", "q1", "QueryExecutionStart", json!({}))).await;
    let (_, before) = json_of(app.get("/sessions/s").await).await;
    let body = json!({"conversation_id": "conv-9", "query_id": "q1", "messages": [{"role": "user", "content": "hi"}]});
    assert_eq!(app.post_json("/messages", &body).await.status(), 200);
    let body = json!({"conversation_id": "conv-0", "query_id": "unknown", "messages": [{"role": "user"}]});
    assert_eq!(app.post_json("/messages", &body).await.status(), 200);
    let (_, after) = json_of(app.get("/sessions/s").await).await;
    assert_eq!(after["queries"]["q1"]["conversationId"], "conv-9");
    assert!(after["lastActivity"].as_str() >= before["lastActivity"].as_str());
    let (_, whole) = json_of(app.get("/sessions").await).await;
    assert_eq!(whole["sessions"].as_object().unwrap().len(), 1, "a message of an unknown query makes no session");
}

#[tokio::test]
async fn an_empty_message_post_on_another_replica_attaches_the_query_to_its_conversation() {
    let url = crate::support::fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let event = controller_event("sess-1", "query-1", "QueryExecutionStart", json!({}));
    assert_eq!(client.post(a.url("/events")).json(&event).send().await.unwrap().status(), 201);
    // What upstream's `sessions-empty-message-post` test posts: the query's conversation, no message yet.
    let body = json!({"conversation_id": "conv-1", "query_id": "query-1", "messages": []});
    let response = client.post(b.url("/messages")).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "", "an empty body, as for messages");
    for replica in [&a, &b] {
        let session: Value = client.get(replica.url("/sessions/sess-1")).send().await.unwrap().json().await.unwrap();
        assert_eq!(session["queries"]["query-1"]["conversationId"], "conv-1", "{session}");
        assert_eq!(session["conversations"].as_array().map(Vec::len), Some(1), "{session}");
    }
    let stored: Value =
        client.get(a.url("/messages?conversation_id=conv-1")).send().await.unwrap().json().await.unwrap();
    assert_eq!(stored["items"], json!([]), "no message is stored");
}

fn session_frame(data: &str) -> (String, Value) {
    let frame: Value = serde_json::from_str(data).expect("one JSON object per frame");
    (frame["sessionId"].as_str().unwrap().to_owned(), frame["session"].clone())
}

#[tokio::test]
async fn a_sessions_watch_replays_every_session_then_sends_each_change_even_through_ark_api() {
    let app = TestApp::spawn().await;
    post_event(&app, &controller_event("s1", "q1", "QueryExecutionStart", json!({}))).await;
    post_event(&app, &controller_event("s2", "q2", "QueryExecutionStart", json!({}))).await;
    let proxy = ArkApiProxy::start(&app.base).await;
    let mut all = SseReader::open(&app.client, &proxy.url("/sessions?watch=true")).await;
    let mut one = SseReader::open(&app.client, &app.url("/sessions?watch=true&session_id=s2")).await;
    assert_eq!(all.next_frame().await.as_deref(), Some(": connected"));
    let mut replayed: Vec<String> = all.take_data(2).await.iter().map(|d| session_frame(d).0).collect();
    replayed.sort();
    assert_eq!(replayed, ["s1", "s2"]);
    assert_eq!(session_frame(&one.take_data(1).await[0]).0, "s2");

    post_event(&app, &controller_event("s2", "q2", "QueryExecutionComplete", json!({}))).await;
    for reader in [&mut all, &mut one] {
        let (id, session) = session_frame(&reader.take_data(1).await[0]);
        assert_eq!((id.as_str(), session["queries"]["q2"]["phase"].as_str()), ("s2", Some("done")));
    }
}

#[tokio::test]
async fn a_cursor_at_the_end_of_the_range_is_an_empty_page_not_a_500() {
    // Found by the OpenAPI fuzzer: offset + limit overflowed bigint in SQL.
    let app = TestApp::spawn().await;
    let (status, page) = json_of(app.get("/sessions?cursor=9223372036854775807&order=asc&limit=169").await).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["items"], json!([]), "{page}");
    assert_eq!(page["hasMore"], false);
}
