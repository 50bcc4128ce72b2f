//! The record of each question's decision: `GET /questions/{id}/history` and the `report_question_decisions`
//! view, for questions answered, declined, cancelled and expired, and one delivered to and answered in Slack.

use serde_json::{Value, json};

use crate::support::{
    TestApp,
    fake_channels::FakeApi,
    json_of,
    slack::{ask_on_slack, click, interaction, three_replicas},
};

async fn ask(app: &TestApp, content: &str) -> String {
    let body = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": content,
                      "query": {"namespace": "team", "name": "release-7"}});
    let (status, question) = json_of(app.post_json("/questions", &body).await).await;
    assert_eq!(status, 201, "{question}");
    question["id"].as_str().unwrap().to_owned()
}

async fn history(app: &TestApp, id: &str) -> Vec<Value> {
    let (status, body) = json_of(app.get(&format!("/questions/{id}/history")).await).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["questionId"], id);
    body["items"].as_array().unwrap().clone()
}

fn steps(items: &[Value]) -> Vec<&str> {
    items.iter().map(|item| item["step"].as_str().unwrap()).collect()
}

/// A row of `report_question_decisions`: id, outcome, decided by, via, the Query's name, seconds taken.
type Decision = (String, String, Option<String>, Option<String>, Option<String>, f64);

#[tokio::test]
async fn each_way_a_question_ends_is_recorded_with_who_via_what_and_when() {
    let app = TestApp::spawn().await;
    let answered = ask(&app, "Ship?").await;
    let reply = app
        .post_json(&format!("/questions/{answered}/answer"), &json!({"response": "yes", "answeredBy": "dave"}))
        .await;
    assert_eq!(reply.status(), 200);
    let items = history(&app, &answered).await;
    assert_eq!(steps(&items), ["created", "answered"]);
    assert_eq!(items[0]["actor"], "ark://agents/deployer", "asked by its sender (no principal: auth is off)");
    assert_eq!(items[0]["detail"]["query"], json!({"namespace": "team", "name": "release-7"}));
    assert_eq!(items[0]["detail"]["recipient"], "ark://users/dave");
    assert_eq!((items[1]["actor"].as_str(), items[1]["channel"].as_str()), (Some("dave"), Some("api")));
    assert_eq!(items[1]["detail"]["response"], "yes");
    assert!(items.iter().all(|item| item["at"].as_str().is_some_and(|at| at.ends_with('Z'))));

    let declined = ask(&app, "Rotate keys?").await;
    let reply = app
        .post_json(&format!("/questions/{declined}/decline"), &json!({"reason": "not mine", "declinedBy": "erin"}))
        .await;
    assert_eq!(reply.status(), 200);
    let items = history(&app, &declined).await;
    assert_eq!(steps(&items), ["created", "declined"]);
    assert_eq!((items[1]["actor"].as_str(), items[1]["detail"]["reason"].as_str()), (Some("erin"), Some("not mine")));

    let cancelled = ask(&app, "Scale down?").await;
    assert_eq!(app.client.delete(app.url(&format!("/questions/{cancelled}"))).send().await.unwrap().status(), 200);
    assert_eq!(steps(&history(&app, &cancelled).await), ["created", "cancelled"]);

    let expired = ask(&app, "Anyone?").await;
    sqlx::query("update questions set expires_at = now() - interval '1 second' where id = $1")
        .bind(&expired)
        .execute(&app.pool())
        .await
        .unwrap();
    crate::memory::reaper(&app).pass().await;
    let items = history(&app, &expired).await;
    assert_eq!(steps(&items), ["created", "expired"]);
    assert_eq!(items[1]["actor"], "system:timeout");

    // A refused answer records nothing: only what happened is in the record.
    let reply = app.post_json(&format!("/questions/{answered}/answer"), &json!({"response": "late"})).await;
    assert_eq!(reply.status(), 409);
    assert_eq!(history(&app, &answered).await.len(), 2);

    // The report: one row per decided question, with how it ended and how long it took.
    let rows: Vec<Decision> = sqlx::query_as(
        "select question_id, outcome, decided_by, decided_via, query_name, seconds_to_decision
         from report_question_decisions order by decided_at",
    )
    .fetch_all(&app.pool())
    .await
    .unwrap();
    let outcomes: Vec<(&str, &str)> = rows.iter().map(|r| (r.0.as_str(), r.1.as_str())).collect();
    assert_eq!(
        outcomes,
        [(&*answered, "answered"), (&*declined, "declined"), (&*cancelled, "cancelled"), (&*expired, "expired")]
    );
    assert_eq!((rows[0].2.as_deref(), rows[0].3.as_deref()), (Some("dave"), Some("api")));
    assert!(rows.iter().all(|r| r.4.as_deref() == Some("release-7") && r.5 >= 0.0), "{rows:?}");

    // The guide's report, as the read-only reporting role runs it.
    let reports = crate::reports::documented_reports();
    let by_person =
        crate::reports::run_as_reporting_role(&app.pool(), &reports["decisions_by_person_last_7_days"]).await;
    let dave = by_person.iter().find(|row| row["decided_by"] == "dave").expect("dave's decisions");
    assert_eq!((dave["outcome"].as_str(), dave["questions"].as_i64()), (Some("answered"), Some(1)), "{by_person:?}");

    let (status, _) = json_of(app.get("/questions/q-00000000-0000-0000-0000-000000000000/history").await).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn a_slack_delivery_and_a_slack_answer_are_steps_of_the_record() {
    let slack = FakeApi::slack().await;
    let (a, b, _c) = three_replicas(&slack).await;
    let (id, message) = ask_on_slack(&a, &slack, "Deploy build 9?").await;
    let (status, _) = interaction(&b, &click(&slack, &message, "U9", "option:0", &format!("{id}|0"))).await;
    assert_eq!(status, 200);
    let url = a.url(&format!("/questions/{id}/history"));
    let body: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
    let items = body["items"].as_array().unwrap();
    assert_eq!(steps(items), ["created", "delivered", "answered"], "{body}");
    assert_eq!(items[1]["channel"], "slack:#ops");
    assert!(items[1]["detail"]["url"].is_string(), "the message's link: {body}");
    assert_eq!((items[2]["actor"].as_str(), items[2]["channel"].as_str()), (Some("slack:U9"), Some("slack")));
    assert_eq!(items[2]["detail"]["response"], "Yes, proceed");
}

#[tokio::test]
async fn a_deleted_query_cancels_its_open_questions_and_no_one_elses() {
    let app = TestApp::spawn().await;
    let mine = ask(&app, "Ship release 7?").await;
    let other = {
        let body = json!({"sender": "ark://agents/a", "recipient": "ark://users/dave", "content": "Other?",
                          "query": {"namespace": "team", "name": "release-8"}});
        json_of(app.post_json("/questions", &body).await).await.1["id"].as_str().unwrap().to_owned()
    };
    let reply = app.client.delete(app.url("/sessions/queries/release-7")).send().await.unwrap();
    assert_eq!(reply.status(), 200, "the controller's finalizer");
    let (_, cancelled) = json_of(app.get(&format!("/questions/{mine}")).await).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let items = history(&app, &mine).await;
    assert_eq!(steps(&items), ["created", "cancelled"]);
    assert_eq!(items[1]["channel"], "query-deleted");
    let (_, untouched) = json_of(app.get(&format!("/questions/{other}")).await).await;
    assert_eq!(untouched["status"], "pending", "another Query's question stays open");
}
