//! A Query that ends cancels the questions it left open: its stream completed (at once, on the replica that
//! completed it) or aborted (the reaper's pass, on any replica), or the controller's finalizer deleting its
//! messages. A question an MCP task waits on (Ark's pause for a person) and one asked after the end stay.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{TestApp, json_of, within};

async fn ask(app: &TestApp, query: &str, content: &str) -> String {
    let body = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": content,
                      "query": {"namespace": "team-a", "name": query}});
    let (status, asked) = json_of(app.post_json("/questions", &body).await).await;
    assert_eq!(status, 201, "{asked}");
    asked["id"].as_str().unwrap().to_owned()
}

async fn question(app: &TestApp, id: &str) -> Value {
    json_of(app.get(&format!("/questions/{id}")).await).await.1
}

/// Waits until question `id` is no longer pending; returns it.
async fn closed(app: &TestApp, id: &str) -> Value {
    within("the question to close", async {
        loop {
            let question = question(app, id).await;
            if question["status"] != "pending" {
                return question;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

async fn write_and_complete(app: &TestApp, query: &str) {
    let line = "{\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n";
    let written = app.post_raw(&format!("/stream/{query}"), line).await;
    assert_eq!(written.status(), 200);
    let completed = app.post_json(&format!("/stream/{query}/complete"), &json!({})).await;
    assert_eq!(completed.status(), 200);
}

async fn last_step(app: &TestApp, id: &str) -> Value {
    let (_, history) = json_of(app.get(&format!("/questions/{id}/history")).await).await;
    history["items"].as_array().unwrap().last().unwrap().clone()
}

#[tokio::test]
async fn a_completed_stream_cancels_its_querys_open_questions_but_not_a_paused_tasks_or_a_later_one() {
    let app = TestApp::spawn().await;
    let open = ask(&app, "review-1", "Proceed?").await;
    let paused = ask(&app, "review-1", "Approve the tool call?").await;
    let other = ask(&app, "review-2", "Unrelated?").await;
    // What the MCP server records for a task-augmented ask_question: a task waits on it.
    sqlx::query("update questions set task_id = gen_random_uuid() where id = $1")
        .bind(&paused)
        .execute(&app.pool())
        .await
        .unwrap();
    write_and_complete(&app, "review-1").await;
    let cancelled = closed(&app, &open).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let step = last_step(&app, &open).await;
    assert_eq!((step["step"].as_str(), step["channel"].as_str()), (Some("cancelled"), Some("query-ended")), "{step}");

    let later = ask(&app, "review-1", "Asked after the stream ended?").await;
    // The reaper's pass goes over every ended stream: what it leaves pending stays so.
    crate::memory::reaper(&app).pass().await;
    for id in [&paused, &other, &later] {
        assert_eq!(question(&app, id).await["status"], "pending", "{id}");
    }
}

#[tokio::test]
async fn an_aborted_stream_cancels_them_on_the_reapers_pass_once() {
    let app = TestApp::spawn().await;
    let id = ask(&app, "build-9", "Retry the build?").await;
    let line = "{\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n";
    assert_eq!(app.post_raw("/stream/build-9", line).await.status(), 200);
    // As the sweep marks a stream whose writer vanished (the route's own path is in end_of_query.rs).
    sqlx::query("update streams set aborted_at = now() where stream_id = 'build-9'")
        .execute(&app.pool())
        .await
        .unwrap();
    assert_eq!(question(&app, &id).await["status"], "pending");
    let reaper = crate::memory::reaper(&app);
    tokio::join!(reaper.pass(), reaper.pass());
    assert_eq!(question(&app, &id).await["status"], "cancelled");
    let (_, history) = json_of(app.get(&format!("/questions/{id}/history")).await).await;
    let steps: Vec<&str> = history["items"].as_array().unwrap().iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(steps, ["created", "cancelled"], "once, though two passes raced");
}

#[tokio::test]
async fn the_finalizer_deleting_a_querys_messages_cancels_its_open_questions() {
    let app = TestApp::spawn().await;
    let id = ask(&app, "summarise-3", "Which format?").await;
    let deleted = app.delete("/queries/summarise-3/messages").await;
    assert_eq!(deleted.status(), 200);
    assert_eq!(question(&app, &id).await["status"], "cancelled");
    assert_eq!(last_step(&app, &id).await["channel"], "query-deleted");
}
