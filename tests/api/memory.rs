//! The Memory API, black-box: upstream's routes, bodies, status codes, page envelope and errors.

use serde_json::{Value, json};

use crate::support::{SseReader, TestApp, json_of};

async fn append(app: &TestApp, conversation: &str, query: &str, messages: Value) {
    let body = json!({"conversation_id": conversation, "query_id": query, "messages": messages});
    let response = app.post_json("/messages", &body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.unwrap(), "", "POST /messages answers with an empty body");
}

pub fn reaper(app: &TestApp) -> ark_broker::retention::Reaper {
    reaper_as_if_later(app, 0)
}

/// [`reaper`], deciding as if it were `seconds` later (chunk buckets are dropped by the clock, not aged rows).
pub fn reaper_as_if_later(app: &TestApp, seconds: i64) -> ark_broker::retention::Reaper {
    // An hour's stream retention in buckets of ten minutes and watch log, no caps: the tests age rows past these.
    let streams =
        ark_broker::streams::retention::StreamKeep { seconds: 3600, bucket_seconds: 600, offset_seconds: seconds };
    let retention = ark_broker::retention::Retention {
        streams,
        max_events: 0,
        max_spans: 0,
        max_bytes: Default::default(),
        question_log_seconds: 3600,
        question_history_seconds: 3600,
        batch: 1000,
    };
    ark_broker::retention::Reaper::new(app.state.pool.clone(), retention, app.state.reaping.clone())
}

#[tokio::test]
async fn posted_messages_come_back_in_order_in_the_page_envelope() {
    let app = TestApp::spawn().await;
    append(&app, "c1", "q1", json!([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])).await;
    let (status, page) = json_of(app.get("/messages?conversation_id=c1").await).await;
    assert_eq!(status, 200);
    assert_eq!(page["hasMore"], false);
    assert!(page.get("nextCursor").is_none(), "nextCursor only when hasMore: {page}");
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["message"]["content"], "hi");
    assert_eq!(items[1]["message"]["content"], "yo");
    assert_eq!(items[0]["conversation_id"], "c1");
    assert_eq!(items[0]["query_id"], "q1");
    assert!(items[0]["sequence"].as_i64().unwrap() < items[1]["sequence"].as_i64().unwrap());
    let timestamp = items[0]["timestamp"].as_str().unwrap();
    assert!(chrono::DateTime::parse_from_rfc3339(timestamp).is_ok() && timestamp.ends_with('Z'), "{timestamp}");
}

#[tokio::test]
async fn pages_follow_a_numeric_next_cursor_until_has_more_is_false() {
    let app = TestApp::spawn().await;
    let messages: Vec<Value> = (0..250).map(|i| json!({"n": i})).collect();
    append(&app, "c", "q", Value::Array(messages)).await;
    let (_, first) = json_of(app.get("/messages").await).await;
    assert_eq!(first["items"].as_array().unwrap().len(), 100, "the default limit is 100");
    assert_eq!(first["hasMore"], true);
    assert!(first["nextCursor"].is_number(), "nextCursor is a JSON number: {}", first["nextCursor"]);
    let mut seen = Vec::new();
    let mut cursor: Option<i64> = None;
    loop {
        let path = match cursor {
            Some(c) => format!("/messages?limit=70&cursor={c}"),
            None => "/messages?limit=70".to_owned(),
        };
        let (_, page) = json_of(app.get(&path).await).await;
        seen.extend(page["items"].as_array().unwrap().iter().map(|i| i["message"]["n"].as_i64().unwrap()));
        if page["hasMore"] == false {
            break;
        }
        cursor = Some(page["nextCursor"].as_i64().unwrap());
    }
    assert_eq!(seen, (0..250).collect::<Vec<_>>());
}

#[tokio::test]
async fn bad_limits_and_cursors_are_pagination_errors() {
    let app = TestApp::spawn().await;
    for (query, message) in [
        ("limit=0", "limit must be a positive integer"),
        ("limit=-3", "limit must be a positive integer"),
        ("limit=abc", "limit must be a positive integer"),
        ("limit=1001", "limit cannot exceed 1000"),
        ("cursor=-1", "cursor must be a non-negative integer"),
        ("cursor=x", "cursor must be a non-negative integer"),
    ] {
        let (status, body) = json_of(app.get(&format!("/messages?{query}")).await).await;
        assert_eq!(status, 400, "{query}");
        assert_eq!(body["error"]["code"], "PAGINATION_ERROR", "{query}");
        assert_eq!(body["error"]["message"], message, "{query}");
        assert!(body["error"]["requestId"].is_string());
    }
    let (status, _) = json_of(app.get("/messages?limit=1000").await).await;
    assert_eq!(status, 200, "limit=1000 is allowed");
}

#[tokio::test]
async fn invalid_message_bodies_are_rejected_and_nothing_is_stored() {
    let app = TestApp::spawn().await;
    let cases = [
        json!({"query_id": "q", "messages": []}),
        json!({"conversation_id": "c", "messages": []}),
        json!({"conversation_id": "c", "query_id": "q"}),
        json!({"conversation_id": 5, "query_id": "q", "messages": []}),
        json!({"conversation_id": "c", "query_id": "q", "messages": "nope"}),
        json!({"conversation_id": "c", "query_id": "q", "messages": [], "ttl_seconds": 0}),
        json!({"conversation_id": "c", "query_id": "q", "messages": [], "ttl_seconds": 1.5}),
        json!({"conversation_id": "", "query_id": "q", "messages": []}),
        json!({"conversation_id": "c", "query_id": "q", "messages": [{"content": "nul \u{0} here"}]}),
    ];
    for body in cases {
        let (status, reply) = json_of(app.post_json("/messages", &body).await).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(reply["error"]["code"], "VALIDATION_ERROR", "{body}: {reply}");
    }
    let response = app
        .client
        .post(app.url("/messages"))
        .header("content-type", "application/json")
        .body("{oops")
        .send()
        .await
        .unwrap();
    let (status, reply) = json_of(response).await;
    assert_eq!(status, 400);
    assert_eq!(reply["error"]["code"], "REQUEST_ERROR");
    let (_, page) = json_of(app.get("/messages").await).await;
    assert_eq!(page["items"], json!([]), "nothing was stored");
}

/// Found by the OpenAPI fuzzer: jsonb keeps `1.7976931348623157e308` as a 309-digit integer, which serde_json
/// read back as out of range (a 500 on every read of the conversation) until it parsed floats exactly.
#[tokio::test]
async fn the_largest_and_smallest_floats_read_back_as_they_were_posted() {
    let app = TestApp::spawn().await;
    let numbers = json!([f64::MAX, f64::MIN, f64::MIN_POSITIVE, 5e-324, 0.1, 1e300]);
    append(&app, "floats", "q", json!([{"numbers": numbers}])).await;
    let (status, page) = json_of(app.get("/messages?conversation_id=floats").await).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["items"][0]["message"]["numbers"], numbers);
    let (status, conversation) = json_of(app.get("/conversations/floats").await).await;
    assert_eq!((status, &conversation["messages"][0]["message"]["numbers"]), (200, &numbers));
}

#[tokio::test]
async fn messages_filter_by_conversation_and_query() {
    let app = TestApp::spawn().await;
    append(&app, "c1", "q1", json!(["a"])).await;
    append(&app, "c1", "q2", json!(["b"])).await;
    append(&app, "c2", "q1", json!(["c"])).await;
    let contents = |page: Value| -> Vec<String> {
        page["items"].as_array().unwrap().iter().map(|i| i["message"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(contents(json_of(app.get("/messages?conversation_id=c1").await).await.1), ["a", "b"]);
    assert_eq!(contents(json_of(app.get("/messages?query_id=q1").await).await.1), ["a", "c"]);
    assert_eq!(contents(json_of(app.get("/messages?conversation_id=c1&query_id=q2").await).await.1), ["b"]);
    assert_eq!(contents(json_of(app.get("/messages").await).await.1), ["a", "b", "c"]);
}

#[tokio::test]
async fn ttl_seconds_sets_expires_at_and_expired_messages_are_hidden() {
    let app = TestApp::spawn().await;
    let body = json!({"conversation_id": "c", "query_id": "q", "messages": ["short"], "ttl_seconds": 3600});
    assert_eq!(app.post_json("/messages", &body).await.status(), 200);
    append(&app, "c", "q", json!(["kept"])).await;
    let ttls: Vec<i32> = sqlx::query_scalar(
        "select extract(epoch from (expires_at - created_at))::int from messages order by sequence_number",
    )
    .fetch_all(&app.pool())
    .await
    .unwrap();
    assert_eq!(ttls, [3600, 2_592_000], "without ttl_seconds: MESSAGE_VISIBILITY_TTL_SECONDS, 30 days by default");
    // Move the expiry into the past instead of waiting for it.
    sqlx::query("update messages set expires_at = now() - interval '1 second' where message = '\"short\"'")
        .execute(&app.pool())
        .await
        .unwrap();
    let (_, page) = json_of(app.get("/messages").await).await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["message"], "kept");
    let (_, status) = json_of(app.get("/memory-status").await).await;
    assert_eq!(status["total_messages"], 1, "expired messages are not counted");

    reaper(&app).pass().await;
    let rows: i64 = sqlx::query_scalar("select count(*) from messages").fetch_one(&app.pool()).await.unwrap();
    assert_eq!(rows, 1, "the reaper deleted the expired row and kept the other");
}

#[tokio::test]
async fn conversations_routes_match_upstream() {
    let app = TestApp::spawn().await;
    let (status, created) = json_of(app.post_json("/conversations", &json!({})).await).await;
    assert_eq!(status, 201);
    assert!(uuid::Uuid::parse_str(created["conversation_id"].as_str().unwrap()).is_ok());

    append(&app, "c1", "q1", json!(["a", "b"])).await;
    append(&app, "c1", "q2", json!(["c"])).await;
    append(&app, "c2", "q1", json!(["d"])).await;
    assert_eq!(json_of(app.get("/conversations").await).await.1, json!({"conversations": ["c1", "c2"]}));

    let (status, one) = json_of(app.get("/conversations/c1").await).await;
    assert_eq!(status, 200);
    assert_eq!(one["conversation_id"], "c1");
    assert_eq!(one["messages"].as_array().unwrap().len(), 3);
    let (status, missing) = json_of(app.get("/conversations/nope").await).await;
    assert_eq!(status, 404);
    assert_eq!(missing["error"]["code"], "NOT_FOUND");
    assert_eq!(missing["error"]["message"], "Conversation not found");

    let (_, status_body) = json_of(app.get("/memory-status").await).await;
    assert_eq!(
        status_body,
        json!({"total_conversations": 2, "total_messages": 4, "conversations": {
            "c1": {"message_count": 3, "query_count": 2}, "c2": {"message_count": 1, "query_count": 1}}})
    );

    let (status, reply) = json_of(app.delete("/conversations/c1/queries/q2/messages").await).await;
    assert_eq!(
        (status, reply),
        (200, json!({"status": "success", "message": "Query q2 messages deleted from conversation c1"}))
    );
    assert_eq!(json_of(app.get("/conversations/c1").await).await.1["messages"].as_array().unwrap().len(), 2);

    let (status, reply) = json_of(app.delete("/queries/q1/messages").await).await;
    assert_eq!((status, reply), (200, json!({"status": "success", "message": "Query q1 messages deleted"})));
    assert_eq!(json_of(app.get("/conversations").await).await.1, json!({"conversations": []}));

    append(&app, "c3", "q", json!(["e"])).await;
    let (status, reply) = json_of(app.delete("/conversations/c3").await).await;
    assert_eq!((status, reply), (200, json!({"status": "success", "message": "Conversation c3 deleted"})));
    let (status, _) = json_of(app.delete("/conversations/c3").await).await;
    assert_eq!(status, 200, "deleting a conversation is idempotent");

    append(&app, "c4", "q", json!(["f"])).await;
    let (status, reply) = json_of(app.delete("/conversations").await).await;
    assert_eq!((status, reply), (200, json!({"status": "success", "message": "All conversations deleted"})));
    append(&app, "c5", "q", json!(["g"])).await;
    let (status, reply) = json_of(app.delete("/messages").await).await;
    assert_eq!((status, reply), (200, json!({"status": "success", "message": "Memory purged"})));
    assert_eq!(json_of(app.get("/messages").await).await.1["items"], json!([]));
}

#[tokio::test]
async fn a_message_watch_starts_connected_and_streams_new_messages() {
    let app = TestApp::spawn().await;
    append(&app, "c", "q", json!(["old"])).await;
    let mut watch = SseReader::open(&app.client, &app.url("/messages?watch=true&conversation_id=c")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    append(&app, "other", "q", json!(["elsewhere"])).await;
    append(&app, "c", "q", json!(["new1", "new2"])).await;
    let items: Vec<Value> = watch.take_data(2).await.iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert_eq!(items[0]["message"], "new1", "only new messages of the watched conversation");
    assert_eq!(items[1]["message"], "new2");
    assert!(items[0]["sequence"].is_number());
}

#[tokio::test]
async fn a_message_watch_resumes_after_its_cursor() {
    let app = TestApp::spawn().await;
    append(&app, "c", "q", json!(["one", "two", "three"])).await;
    let (_, page) = json_of(app.get("/messages?limit=1").await).await;
    let cursor = page["nextCursor"].as_i64().unwrap();
    let mut watch = SseReader::open(&app.client, &app.url(&format!("/messages?watch=true&cursor={cursor}"))).await;
    let replayed: Vec<Value> = watch.take_data(2).await.iter().map(|d| serde_json::from_str(d).unwrap()).collect();
    assert_eq!(replayed[0]["message"], "two");
    assert_eq!(replayed[1]["message"], "three");
    append(&app, "c", "q", json!(["four"])).await;
    let live: Value = serde_json::from_str(&watch.next_data().await.unwrap()).unwrap();
    assert_eq!(live["message"], "four");
}

#[tokio::test]
async fn watch_flags_other_than_true_or_false_are_rejected() {
    let app = TestApp::spawn().await;
    for query in ["watch=1", "watch=yes", "watch=true&watch=false"] {
        let (status, body) = json_of(app.get(&format!("/messages?{query}")).await).await;
        assert_eq!(status, 400, "{query}");
        assert_eq!(body["error"]["code"], "VALIDATION_ERROR", "{query}");
    }
}

#[tokio::test]
async fn watch_streams_send_heartbeats_while_idle() {
    let app = TestApp::spawn_with(|config| config.sse_heartbeat_seconds = 1).await;
    let mut watch = SseReader::open(&app.client, &app.url("/messages?watch=true")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    assert_eq!(watch.next_frame().await.as_deref(), Some(": heartbeat"));
}

#[tokio::test]
async fn the_reaper_keeps_messages_events_and_spans_within_their_byte_budgets_and_always_the_newest() {
    let app = TestApp::spawn().await;
    for n in 1..=5 {
        append(&app, "budget", "q", json!([{"role": "user", "content": format!("message {n}")}])).await;
        let event = json!({"timestamp": "2026-11-29T10:00:00Z", "eventType": "Normal", "reason": "Step",
                           "message": format!("e{n}"), "data": {"queryId": "q", "sessionId": "s"}});
        crate::events::post_event(&app, &event).await;
        crate::traces::export_json(&app, &crate::traces::export_of(&[(&format!("t{n}"), json!("s"))])).await;
    }
    let sizes = |table: &'static str| {
        let pool = app.pool();
        async move {
            let query = format!("select bytes::bigint from {table} order by sequence_number desc");
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(query)).fetch_all(&pool).await.unwrap()
        }
    };
    let newest_two = |sizes: &[i64]| sizes[0] + sizes[1];
    let mut budgeted = reaper(&app);
    // Messages: room for the newest two and a byte less than the third; events: not even the newest.
    budgeted.retention.max_bytes = ark_broker::retention::MaxBytes {
        messages: newest_two(&sizes("messages").await) + sizes("messages").await[2] - 1,
        events: 1,
        spans: newest_two(&sizes("spans").await),
    };
    budgeted.pass().await;
    let (_, page) = json_of(app.get("/messages?conversation_id=budget").await).await;
    let contents: Vec<&str> =
        page["items"].as_array().unwrap().iter().map(|m| m["message"]["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["message 4", "message 5"], "the oldest beyond the budget are gone");
    let (_, events) = json_of(app.get("/events").await).await;
    let events: Vec<&str> =
        events["items"].as_array().unwrap().iter().map(|e| e["message"].as_str().unwrap()).collect();
    assert_eq!(events, ["e5"], "the newest is kept even when it alone is over the budget");
    assert_eq!(sizes("spans").await.len(), 2, "the newest two spans fit exactly");
    // Without budgets (the default), nothing more goes.
    let unbounded = reaper(&app);
    unbounded.pass().await;
    assert_eq!((sizes("messages").await.len(), sizes("events").await.len()), (2, 1));
}
