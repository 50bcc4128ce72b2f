//! Questions, black-box: the REST API, first-answer-wins across replicas, the resourceVersion watch.

use serde_json::{Value, json};

use crate::support::{Replica, SseReader, TestApp, fresh_database, json_of};

fn new_question(content: &str) -> Value {
    json!({"sender": "ark://agents/reviewer", "recipient": "ark://users/dave", "content": content})
}

async fn ask(app: &TestApp, body: Value) -> Value {
    let (status, question) = json_of(app.post_json("/questions", &body).await).await;
    assert_eq!(status, 201, "{question}");
    question
}

/// One SSE change event: (event, id, data).
fn parse_event(frame: &str) -> (String, String, Value) {
    let mut event = String::new();
    let mut id = String::new();
    let mut data = Value::Null;
    for line in frame.lines() {
        if let Some(v) = line.strip_prefix("event: ") {
            event = v.to_owned();
        } else if let Some(v) = line.strip_prefix("id: ") {
            id = v.to_owned();
        } else if let Some(v) = line.strip_prefix("data: ") {
            data = serde_json::from_str(v).expect("JSON data");
        }
    }
    (event, id, data)
}

async fn next_change(watch: &mut SseReader) -> (String, String, Value) {
    loop {
        let frame = watch.next_frame().await.expect("the watch stays open");
        if !frame.starts_with(':') {
            return parse_event(&frame);
        }
    }
}

#[tokio::test]
async fn a_created_question_is_pending_with_an_id_and_a_resource_version() {
    let app = TestApp::spawn().await;
    let body = json!({
        "sender": "ark://agents/reviewer", "recipient": "ark://users/dave", "content": "Merge?",
        "channels": [], "query": {"namespace": "team-a", "name": "review-42"}, "toolCallId": "call_1"
    });
    let question = ask(&app, body).await;
    let id = question["id"].as_str().unwrap();
    assert!(id.starts_with("q-") && uuid::Uuid::parse_str(&id[2..]).is_ok(), "{id}");
    assert_eq!(question["status"], "pending");
    assert_eq!(question["sender"], "ark://agents/reviewer");
    assert_eq!(question["recipient"], "ark://users/dave");
    assert_eq!(question["channels"], json!([]));
    assert_eq!(question["query"], json!({"namespace": "team-a", "name": "review-42"}));
    assert_eq!(question["toolCallId"], "call_1");
    assert!(question["resourceVersion"].as_str().unwrap().parse::<i64>().unwrap() > 0);
    assert!(question["createdAt"].as_str().unwrap().ends_with('Z'));
    assert!(question.get("response").is_none() && question.get("answeredAt").is_none());
    let (status, fetched) = json_of(app.get(&format!("/questions/{id}")).await).await;
    assert_eq!((status, &fetched), (200, &question));
}

#[tokio::test]
async fn invalid_questions_are_rejected() {
    let app = TestApp::spawn().await;
    for body in [
        json!({"sender": "agents/x", "recipient": "ark://users/dave", "content": "?"}),
        json!({"sender": "ark://agents/x", "recipient": "ark://robots/dave", "content": "?"}),
        json!({"sender": "ark://agents/x", "recipient": "ark://users/dave", "content": "  "}),
        json!({"sender": "ark://agents/x", "recipient": "ark://users/dave"}),
        json!({"sender": "ark://agents/x", "recipient": "ark://users/dave", "content": "?", "ttlSeconds": 0}),
        json!({"sender": "ark://agents/x", "recipient": "ark://users/dave", "content": "?", "channels": [""]}),
    ] {
        let (status, reply) = json_of(app.post_json("/questions", &body).await).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(reply["error"]["code"], "VALIDATION_ERROR", "{body}");
    }
    let (status, reply) = json_of(app.get("/questions/q-00000000-0000-0000-0000-000000000000").await).await;
    assert_eq!(status, 404);
    assert_eq!(reply["error"]["message"], "Question not found");
    let (status, _) = json_of(app.get("/questions?status=maybe").await).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn lists_filter_by_status_recipient_and_sender_and_carry_the_resource_version() {
    let app = TestApp::spawn().await;
    let a = ask(&app, new_question("a")).await;
    ask(&app, json!({"sender": "ark://agents/other", "recipient": "ark://teams/ops", "content": "b"})).await;
    let c = ask(&app, new_question("c")).await;
    let answer = json!({"response": "yes"});
    let (status, answered) = json_of(
        app.client
            .patch(app.url(&format!("/questions/{}", a["id"].as_str().unwrap())))
            .json(&answer)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 200);
    let (_, all) = json_of(app.get("/questions").await).await;
    assert_eq!(all["items"].as_array().unwrap().len(), 3);
    assert_eq!(all["resourceVersion"], answered["resourceVersion"], "the list's version is the newest change");
    assert!(all.get("hasMore").is_none(), "no page fields unless paginated");
    let contents = |list: &Value| -> Vec<String> {
        list["items"].as_array().unwrap().iter().map(|q| q["content"].as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(contents(&json_of(app.get("/questions?status=pending").await).await.1), ["b", "c"]);
    assert_eq!(contents(&json_of(app.get("/questions?status=&recipient=&sender=").await).await.1), ["a", "b", "c"]);
    assert_eq!(contents(&json_of(app.get("/questions?recipient=ark://teams/ops").await).await.1), ["b"]);
    assert_eq!(
        contents(&json_of(app.get("/questions?sender=ark://agents/reviewer&status=pending").await).await.1),
        ["c"]
    );
    let (_, page) = json_of(app.get("/questions?limit=2").await).await;
    assert_eq!(contents(&page), ["a", "b"]);
    assert_eq!(page["hasMore"], true);
    let (_, rest) = json_of(app.get(&format!("/questions?limit=2&cursor={}", page["nextCursor"])).await).await;
    assert_eq!(contents(&rest), ["c"]);
    assert_eq!(rest["hasMore"], false);
    assert_eq!(c["status"], "pending");
}

#[tokio::test]
async fn the_first_answer_wins_and_a_second_gets_409_with_the_stored_question() {
    let app = TestApp::spawn().await;
    let question = ask(&app, new_question("Deploy?")).await;
    let id = question["id"].as_str().unwrap();
    let first = json!({"response": "Yes", "answeredBy": "ark://users/dave"});
    let (status, answered) =
        json_of(app.client.patch(app.url(&format!("/questions/{id}"))).json(&first).send().await.unwrap()).await;
    assert_eq!(status, 200);
    assert_eq!(answered["status"], "answered");
    assert_eq!(answered["response"], "Yes");
    assert_eq!(answered["answeredBy"], "ark://users/dave");
    assert!(answered["answeredAt"].is_string());
    let (status, conflict) =
        json_of(app.post_json(&format!("/questions/{id}/answer"), &json!({"response": "No"})).await).await;
    assert_eq!(status, 409);
    assert_eq!(conflict["error"]["code"], "CONFLICT");
    assert_eq!(conflict["question"], answered, "the 409 carries the stored question");
    let (status, _) = json_of(app.post_json(&format!("/questions/{id}/answer"), &json!({"response": ""})).await).await;
    assert_eq!(status, 400, "an empty answer is invalid");
}

#[tokio::test]
async fn cancelling_keeps_the_row_and_blocks_answers() {
    let app = TestApp::spawn().await;
    let question = ask(&app, new_question("Deploy?")).await;
    let id = question["id"].as_str().unwrap();
    let (status, cancelled) = json_of(app.delete(&format!("/questions/{id}")).await).await;
    assert_eq!(status, 200);
    assert_eq!(cancelled["status"], "cancelled");
    assert!(cancelled["closedAt"].is_string());
    let (status, fetched) = json_of(app.get(&format!("/questions/{id}")).await).await;
    assert_eq!((status, fetched["status"].as_str()), (200, Some("cancelled")), "the row stays");
    let (status, conflict) =
        json_of(app.post_json(&format!("/questions/{id}/answer"), &json!({"response": "late"})).await).await;
    assert_eq!(status, 409);
    assert_eq!(conflict["question"]["status"], "cancelled");
    assert_eq!(json_of(app.delete(&format!("/questions/{id}")).await).await.0, 409);
    assert_eq!(json_of(app.delete("/questions/q-00000000-0000-0000-0000-000000000000").await).await.0, 404);
}

#[tokio::test]
async fn an_expired_question_cannot_be_answered() {
    let app = TestApp::spawn().await;
    let late =
        ask(&app, json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "?", "ttlSeconds": 60}))
            .await;
    let reaped =
        ask(&app, json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "?", "ttlSeconds": 60}))
            .await;
    assert!(late["expiresAt"].is_string());
    // Move the expiry into the past instead of waiting for it.
    sqlx::query("update questions set expires_at = now() - interval '1 second'").execute(&app.pool()).await.unwrap();
    let id = late["id"].as_str().unwrap();
    let (status, conflict) =
        json_of(app.post_json(&format!("/questions/{id}/answer"), &json!({"response": "too late"})).await).await;
    assert_eq!(status, 409);
    assert_eq!(conflict["question"]["status"], "expired");
    crate::memory::reaper(&app).pass().await;
    let (_, fetched) = json_of(app.get(&format!("/questions/{}", reaped["id"].as_str().unwrap())).await).await;
    assert_eq!(fetched["status"], "expired", "the reaper expires overdue questions");
}

#[tokio::test]
async fn a_watch_from_a_resource_version_streams_only_later_changes() {
    let app = TestApp::spawn().await;
    ask(&app, new_question("before")).await;
    let (_, list) = json_of(app.get("/questions").await).await;
    let version = list["resourceVersion"].as_str().unwrap().to_owned();
    let mut watch =
        SseReader::open(&app.client, &app.url(&format!("/questions?watch=true&resourceVersion={version}"))).await;
    let created = ask(&app, new_question("after")).await;
    let (event, id, data) = next_change(&mut watch).await;
    assert_eq!(event, "question_created");
    assert_eq!(data, created);
    assert_eq!(id, created["resourceVersion"].as_str().unwrap(), "id: is the resourceVersion");
    let qid = created["id"].as_str().unwrap();
    app.post_json(&format!("/questions/{qid}/answer"), &json!({"response": "ok"})).await;
    let (event, answered_version, data) = next_change(&mut watch).await;
    assert_eq!(event, "question_answered");
    assert_eq!(data["response"], "ok");
    app.delete(&format!("/questions/{}", ask(&app, new_question("third")).await["id"].as_str().unwrap())).await;

    // Resuming with Last-Event-ID replays exactly what came after it.
    let resumed = app
        .client
        .get(app.url("/questions?watch=true"))
        .header("last-event-id", &answered_version)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), 200);
    let mut resumed = SseReader::from_response(resumed);
    assert_eq!(next_change(&mut resumed).await.0, "question_created");
    assert_eq!(next_change(&mut resumed).await.0, "question_cancelled");
}

#[tokio::test]
async fn a_watch_from_a_version_no_longer_kept_gets_410() {
    let app = TestApp::spawn().await;
    let first = ask(&app, new_question("one")).await;
    ask(&app, new_question("two")).await;
    ask(&app, new_question("three")).await;
    sqlx::query("delete from question_events where resource_version <= $1")
        .bind(first["resourceVersion"].as_str().unwrap().parse::<i64>().unwrap() + 1)
        .execute(&app.pool())
        .await
        .unwrap();
    let (status, reply) = json_of(
        app.get(&format!("/questions?watch=true&resourceVersion={}", first["resourceVersion"].as_str().unwrap())).await,
    )
    .await;
    assert_eq!(status, 410);
    assert_eq!(reply["error"]["code"], "GONE");
    let (status, _) = json_of(app.get("/questions?watch=true&resourceVersion=abc").await).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn concurrent_answers_on_two_replicas_give_exactly_one_200_and_one_409() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    for round in 0..10 {
        let (status, question) =
            json_of(client.post(a.url("/questions")).json(&new_question("race")).send().await.unwrap()).await;
        assert_eq!(status, 201);
        let id = question["id"].as_str().unwrap();
        let answer_on = |replica: &Replica, response: &str| {
            client.patch(replica.url(&format!("/questions/{id}"))).json(&json!({"response": response})).send()
        };
        let (on_a, on_b) = tokio::join!(answer_on(&a, "from A"), answer_on(&b, "from B"));
        let (on_a, on_b) = (json_of(on_a.unwrap()).await, json_of(on_b.unwrap()).await);
        let mut statuses = [on_a.0, on_b.0];
        statuses.sort();
        assert_eq!(statuses, [200, 409], "round {round}");
        let winner = if on_a.0 == 200 { &on_a.1 } else { &on_b.1 };
        let loser = if on_a.0 == 409 { &on_a.1 } else { &on_b.1 };
        assert_eq!(&loser["question"], winner, "the 409 shows the winning answer");
        let (_, stored) = json_of(client.get(b.url(&format!("/questions/{id}"))).send().await.unwrap()).await;
        assert_eq!(&stored, winner);
    }
}

#[tokio::test]
async fn a_question_created_on_one_replica_reaches_a_watcher_on_another() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let mut watch = SseReader::open(&client, &b.url("/questions?watch=true")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    let (_, created) =
        json_of(client.post(a.url("/questions")).json(&new_question("cross")).send().await.unwrap()).await;
    let (event, _, data) = next_change(&mut watch).await;
    assert_eq!((event.as_str(), &data), ("question_created", &created));
}
