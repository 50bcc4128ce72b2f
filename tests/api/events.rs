//! The events API, black-box: `POST /events` exactly as the controller's emitter needs it (201), pages,
//! watches (through ark-api's re-framing too), deletes, validation messages, TTL and the reaper.

use serde_json::{Value, json};

use crate::support::{SseReader, TestApp, ark_api::ArkApiProxy, json_of};

/// An event as the Go emitter sends it: every `data` value a string.
pub fn event(query_uid: &str, reason: &str, session: &str) -> Value {
    json!({
        "timestamp": "2026-11-23T10:00:00.123456789Z",
        "eventType": "Normal",
        "reason": reason,
        "message": format!("{reason} for {query_uid}"),
        "data": {"queryId": query_uid, "queryName": format!("q-{query_uid}"), "queryNamespace": "default",
                 "sessionId": session, "durationMs": "12.5"},
    })
}

pub async fn post_event(app: &TestApp, body: &Value) {
    let response = app.post_json("/events", body).await;
    assert_eq!(response.status(), 201, "the controller's emitter requires exactly 201");
    assert_eq!(response.json::<Value>().await.unwrap(), json!({"status": "success"}));
}

#[tokio::test]
async fn an_event_is_stored_as_posted_without_its_ttl_and_expires_after_it() {
    let app = TestApp::spawn().await;
    let mut body = event("uid-1", "QueryExecutionStart", "s1");
    body["ttl_seconds"] = json!(3600);
    body["custom"] = json!({"kept": [1, 2]});
    post_event(&app, &body).await;
    let (status, page) = json_of(app.get("/events").await).await;
    assert_eq!(status, 200);
    let mut expected = body.clone();
    expected.as_object_mut().unwrap().remove("ttl_seconds");
    assert_eq!(page["items"], json!([expected]), "items are the events themselves, without a sequence");
    assert!(page.get("total").is_none(), "upstream's Postgres backend sends no total: {page}");

    let row = sqlx::query_as::<_, (String, String, String, String, String, f64, i32)>(
        "select query_id, query_name, session_id, reason, event_type, duration_ms,
                extract(epoch from (expires_at - created_at))::int from events",
    )
    .fetch_one(&app.pool())
    .await
    .unwrap();
    assert_eq!(
        row,
        ("uid-1".into(), "q-uid-1".into(), "s1".into(), "QueryExecutionStart".into(), "Normal".into(), 12.5, 3600)
    );

    post_event(&app, &event("uid-2", "QueryExecutionStart", "s1")).await;
    let default_ttl: i32 = sqlx::query_scalar(
        "select extract(epoch from (expires_at - created_at))::int from events where query_id = 'uid-2'",
    )
    .fetch_one(&app.pool())
    .await
    .unwrap();
    assert_eq!(default_ttl, 30 * 24 * 3600, "EVENT_VISIBILITY_TTL_SECONDS' default, as upstream");

    sqlx::query("update events set expires_at = now() - interval '1 second' where query_id = 'uid-1'")
        .execute(&app.pool())
        .await
        .unwrap();
    let (_, page) = json_of(app.get("/events").await).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1, "an expired event is hidden at once");
    crate::memory::reaper(&app).pass().await;
    let left: i64 = sqlx::query_scalar("select count(*) from events").fetch_one(&app.pool()).await.unwrap();
    assert_eq!(left, 1, "and deleted by the reaper");
}

/// Ark's Go executor sends `ttl_seconds: 0` for a Query whose TTL is under a second; upstream stores such an
/// event already expired. It is accepted (anything but 201 counts as dropped), hidden from every read, and its
/// session still learns of the query.
#[tokio::test]
async fn an_event_with_ttl_seconds_0_is_accepted_expires_at_once_and_still_reaches_its_session() {
    let app = TestApp::spawn().await;
    let mut body = event("uid-0", "QueryExecutionStart", "s-zero");
    body["ttl_seconds"] = json!(0);
    post_event(&app, &body).await;
    let (_, page) = json_of(app.get("/events/uid-0").await).await;
    assert_eq!(page["items"], json!([]), "expired at once: {page}");
    let (status, session) = json_of(app.get("/sessions/s-zero").await).await;
    assert_eq!(status, 200, "{session}");
    assert_eq!(session["queries"]["q-uid-0"]["phase"], "running", "{session}");
}

#[tokio::test]
async fn events_page_by_session_and_by_query_with_a_numeric_next_cursor() {
    let app = TestApp::spawn().await;
    for n in 0..5 {
        post_event(&app, &event("uid-a", &format!("LLMCallComplete{n}"), "s1")).await;
        post_event(&app, &event("uid-b", &format!("LLMCallComplete{n}"), "s2")).await;
    }
    let (_, first) = json_of(app.get("/events?session_id=s1&limit=3").await).await;
    assert_eq!(first["hasMore"], true);
    assert!(first["nextCursor"].is_number(), "{first}");
    let items = first["items"].as_array().unwrap();
    assert!(items.iter().all(|e| e["data"]["sessionId"] == "s1"));
    let (_, rest) =
        json_of(app.get(&format!("/events?session_id=s1&limit=3&cursor={}", first["nextCursor"])).await).await;
    assert_eq!(rest["hasMore"], false);
    assert!(rest.get("nextCursor").is_none());
    let reasons: Vec<&str> =
        items.iter().chain(rest["items"].as_array().unwrap()).map(|e| e["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, (0..5).map(|n| format!("LLMCallComplete{n}")).collect::<Vec<_>>());

    let (status, query) = json_of(app.get("/events/uid-b?limit=1000").await).await;
    assert_eq!(status, 200);
    assert_eq!(query["items"].as_array().unwrap().len(), 5);
    assert!(query["items"].as_array().unwrap().iter().all(|e| e["data"]["queryId"] == "uid-b"));
    let (_, none) = json_of(app.get("/events/unknown").await).await;
    assert_eq!(none, json!({"items": [], "hasMore": false}));
}

#[tokio::test]
async fn deletes_answer_upstreams_messages_and_remove_what_they_name() {
    let app = TestApp::spawn().await;
    post_event(&app, &event("uid-a", "QueryExecutionStart", "s")).await;
    post_event(&app, &event("uid-b", "QueryExecutionStart", "s")).await;
    let (status, reply) = json_of(app.delete("/events/uid-a").await).await;
    assert_eq!((status, reply), (200, json!({"status": "success", "message": "Query uid-a events deleted"})));
    let (_, page) = json_of(app.get("/events").await).await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert_eq!(page["items"][0]["data"]["queryId"], "uid-b");
    let (status, reply) = json_of(app.delete("/events").await).await;
    assert_eq!((status, reply), (200, json!({"status": "success", "message": "Event data purged"})));
    let (_, page) = json_of(app.get("/events").await).await;
    assert_eq!(page["items"], json!([]));
}

#[tokio::test]
async fn bad_requests_get_400_with_the_field_named_and_nothing_stored() {
    let app = TestApp::spawn().await;
    let cases = [
        (json!({"reason": "x"}), "data: required"),
        (json!({"data": []}), "data: expected object, received array"),
        (json!({"data": {"queryName": "q"}}), "data.queryId: required"),
        (json!({"data": {"queryId": ""}}), "data.queryId: String must contain at least 1 character(s)"),
        (json!({"data": {"queryId": 42}}), "data.queryId: expected string, received number"),
        (json!({"data": {"queryId": "u", "sessionId": true}}), "data.sessionId: expected string, received boolean"),
        (json!({"data": {"queryId": "u"}, "reason": ["x"]}), "reason: expected string, received array"),
        (
            json!({"data": {"queryId": "u"}, "ttl_seconds": -5}),
            "ttl_seconds: Number must be greater than or equal to 0",
        ),
        (json!({"data": {"queryId": "u"}, "ttl_seconds": 1.5}), "ttl_seconds: expected integer, received number"),
        (json!(["an", "array"]), "body: expected object, received array"),
    ];
    for (body, message) in cases {
        let (status, reply) = json_of(app.post_json("/events", &body).await).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(reply["error"]["code"], "VALIDATION_ERROR", "{body}");
        assert_eq!(reply["error"]["message"], message, "{body}");
    }
    let response = app.client.post(app.url("/events")).header("content-type", "application/json").body("{not json");
    assert_eq!(response.send().await.unwrap().status(), 400, "malformed JSON");
    for query in ["/events?limit=0", "/events?limit=1001", "/events?cursor=-1", "/events/u?limit=x"] {
        let (status, reply) = json_of(app.get(query).await).await;
        assert_eq!((status, reply["error"]["code"].as_str()), (400, Some("PAGINATION_ERROR")), "{query}");
    }
    for query in ["/events?watch=1", "/events/u?watch=true&from-beginning=yes"] {
        let (status, reply) = json_of(app.get(query).await).await;
        assert_eq!((status, reply["error"]["code"].as_str()), (400, Some("VALIDATION_ERROR")), "{query}");
    }
    let stored: i64 = sqlx::query_scalar("select count(*) from events").fetch_one(&app.pool()).await.unwrap();
    assert_eq!(stored, 0);
}

fn reasons(frames: &[String]) -> Vec<String> {
    frames.iter().map(|f| serde_json::from_str::<Value>(f).unwrap()["reason"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn a_query_watch_replays_from_the_beginning_or_after_a_cursor_then_goes_live() {
    let app = TestApp::spawn().await;
    for reason in ["QueryExecutionStart", "AgentExecutionStart", "LLMCallStart"] {
        post_event(&app, &event("uid", reason, "s")).await;
    }
    post_event(&app, &event("other", "QueryExecutionStart", "s")).await;
    let mut all = SseReader::open(&app.client, &app.url("/events/uid?watch=true&from-beginning=true")).await;
    assert_eq!(all.next_frame().await.as_deref(), Some(": connected"));
    assert_eq!(reasons(&all.take_data(3).await), ["QueryExecutionStart", "AgentExecutionStart", "LLMCallStart"]);

    let (_, first) = json_of(app.get("/events/uid?limit=1").await).await;
    let cursor = first["nextCursor"].as_i64().unwrap();
    let mut after = SseReader::open(&app.client, &app.url(&format!("/events/uid?watch=true&cursor={cursor}"))).await;
    assert_eq!(reasons(&after.take_data(2).await), ["AgentExecutionStart", "LLMCallStart"]);
    let mut live = SseReader::open(&app.client, &app.url("/events/uid?watch=true")).await;
    assert_eq!(live.next_frame().await.as_deref(), Some(": connected"));

    post_event(&app, &event("other", "LLMCallStart", "s")).await;
    post_event(&app, &event("uid", "LLMCallComplete", "s")).await;
    for reader in [&mut all, &mut after, &mut live] {
        assert_eq!(reasons(&reader.take_data(1).await), ["LLMCallComplete"], "another query's event is not sent");
    }
}

#[tokio::test]
async fn the_watch_of_all_events_filters_by_session_resumes_after_a_cursor_and_survives_ark_apis_reframing() {
    let app = TestApp::spawn().await;
    post_event(&app, &event("u1", "QueryExecutionStart", "s1")).await;
    let (_, page) = json_of(app.get("/events?limit=1000").await).await;
    assert!(page.get("nextCursor").is_none());
    let proxy = ArkApiProxy::start(&app.base).await;
    let mut through_ark_api = SseReader::open(&app.client, &proxy.url("/events?watch=true&session_id=s2")).await;
    assert_eq!(through_ark_api.next_frame().await.as_deref(), Some(": connected"));
    let mut everything = SseReader::open(&app.client, &app.url("/events?watch=true")).await;
    assert_eq!(everything.next_frame().await.as_deref(), Some(": connected"));

    post_event(&app, &event("u1", "QueryExecutionComplete", "s1")).await;
    post_event(&app, &event("u2", "QueryExecutionStart", "s2")).await;
    let frames = through_ark_api.take_data(1).await;
    let only: Value = serde_json::from_str(&frames[0]).expect("each re-framed frame is a whole event");
    assert_eq!(
        (only["data"]["sessionId"].as_str(), only["reason"].as_str()),
        (Some("s2"), Some("QueryExecutionStart"))
    );
    assert_eq!(reasons(&everything.take_data(2).await), ["QueryExecutionComplete", "QueryExecutionStart"]);

    // Resuming from the first event's sequence replays what came after it.
    let (_, first) = json_of(app.get("/events?limit=1").await).await;
    let cursor = first["nextCursor"].as_i64().unwrap();
    let mut resumed = SseReader::open(&app.client, &app.url(&format!("/events?watch=true&cursor={cursor}"))).await;
    assert_eq!(reasons(&resumed.take_data(2).await), ["QueryExecutionComplete", "QueryExecutionStart"]);
}
