//! The asking Query's status while a question waits, against a strict fake Kubernetes API server (which
//! `kube_apiserver::the_fake_api_server_answers_as_the_real_one` holds to the real one's answers; the same
//! scenarios run there against a real API server too).

use ark_broker::{config::StatusPatching, query_status::WAITING_FOR_ANNOTATION};
use serde_json::{Value, json};

use crate::support::{Replica, TestApp, fake_kube::FakeKube, fresh_database, within};

const NS: &str = "team-a";
const NAME: &str = "review-42";

async fn broker(fake: &FakeKube) -> TestApp {
    let url = fake.url.clone();
    TestApp::spawn_with(move |config| {
        config.kube_status_patching = StatusPatching::Auto;
        config.kube_api_url = Some(url);
    })
    .await
}

fn question_for(name: &str) -> Value {
    json!({"sender": "ark://agents/reviewer", "recipient": "ark://users/dave", "content": "Merge?",
           "query": {"namespace": NS, "name": name}, "toolCallId": "call_7"})
}

fn phase(query: Option<&Value>) -> Option<String> {
    query.and_then(|q| q["status"]["phase"].as_str()).map(str::to_owned)
}

fn waiting_for(query: Option<&Value>) -> Option<Value> {
    let raw = query?.pointer(&format!("/metadata/annotations/{}", WAITING_FOR_ANNOTATION.replace('/', "~1")))?;
    serde_json::from_str(raw.as_str()?).ok()
}

/// The outbox rows of a question once all are settled (nothing signals that, so it looks every 10 ms).
async fn settled(app: &TestApp, question_id: &str) -> Vec<(String, Option<String>)> {
    within("the outbox to settle", async {
        loop {
            let rows = outcomes(app, question_id).await;
            if rows.iter().all(|(_, outcome)| outcome.is_some()) {
                return rows;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
}

async fn outcomes(app: &TestApp, question_id: &str) -> Vec<(String, Option<String>)> {
    sqlx::query_as("select action, outcome from query_status_patches where question_id = $1 order by id")
        .bind(question_id)
        .fetch_all(&app.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn asking_sets_the_query_waiting_and_answering_resumes_it() {
    let fake = FakeKube::start().await;
    fake.create(NS, NAME, "running");
    let app = broker(&fake).await;
    let question: Value = app.post_json("/questions", &question_for(NAME)).await.json().await.unwrap();
    let id = question["id"].as_str().unwrap();
    within(
        "the Query to wait",
        fake.wait_for(NS, NAME, |q| phase(q).as_deref() == Some("input-required") && waiting_for(q).is_some()),
    )
    .await;
    let annotation = waiting_for(fake.query(NS, NAME).as_ref()).unwrap();
    assert_eq!(annotation["question"]["id"], id);
    assert_eq!(annotation["toolCallId"], "call_7");
    assert_eq!(annotation["since"], question["createdAt"]);
    let recorded: (String, String) =
        sqlx::query_as("select namespace, question_id from query_waiting_for where name = $1")
            .bind(NAME)
            .fetch_one(&app.pool())
            .await
            .unwrap();
    assert_eq!(recorded, (NS.to_owned(), id.to_owned()), "waitingFor is recorded in Postgres too");

    app.post_json(&format!("/questions/{id}/answer"), &json!({"response": "yes"})).await;
    within(
        "the Query to resume",
        fake.wait_for(NS, NAME, |q| phase(q).as_deref() == Some("running") && waiting_for(q).is_none()),
    )
    .await;
    assert_eq!(
        settled(&app, id).await,
        [("wait".into(), Some("patched".into())), ("resume".into(), Some("patched".into()))]
    );
}

#[tokio::test]
async fn an_mcp_ask_with_the_querys_headers_sets_it_waiting() {
    let fake = FakeKube::start().await;
    fake.create(NS, NAME, "running");
    let app = broker(&fake).await;
    let mcp = crate::support::mcp::Mcp::new(&app.mcp_url).with_header("x-ark-query", &format!("{NS}/{NAME}"));
    let args = json!({"recipient": "ark://users/dave", "content": "via MCP", "toolCallId": "call_9"});
    let created = mcp.legacy("tools/call", json!({"name": "ask_question", "arguments": args, "task": {}})).await;
    let task_id = created.result()["task"]["taskId"].as_str().unwrap().to_owned();
    within("the Query to wait", fake.wait_for(NS, NAME, |q| waiting_for(q).is_some())).await;
    let annotation = waiting_for(fake.query(NS, NAME).as_ref()).unwrap();
    assert_eq!(
        (annotation["taskId"].as_str(), annotation["toolCallId"].as_str()),
        (Some(task_id.as_str()), Some("call_9"))
    );
    assert_eq!(phase(fake.query(NS, NAME).as_ref()).as_deref(), Some("input-required"));
}

#[tokio::test]
async fn the_configured_waiting_phase_is_used_where_the_crd_has_it() {
    let fake = FakeKube::start().await;
    fake.allow_phase("waiting");
    fake.create(NS, NAME, "running");
    let url = fake.url.clone();
    let app = TestApp::spawn_with(move |config| {
        config.kube_status_patching = StatusPatching::Auto;
        config.kube_api_url = Some(url);
        config.waiting_phase = "waiting".into();
    })
    .await;
    app.post_json("/questions", &question_for(NAME)).await;
    within("the Query to wait", fake.wait_for(NS, NAME, |q| phase(q).as_deref() == Some("waiting"))).await;
}

#[tokio::test]
async fn a_controller_transition_made_meanwhile_always_wins() {
    let fake = FakeKube::start().await;
    fake.create(NS, NAME, "running");
    let app = broker(&fake).await;
    let question: Value = app.post_json("/questions", &question_for(NAME)).await.json().await.unwrap();
    let id = question["id"].as_str().unwrap();
    within("the Query to wait", fake.wait_for(NS, NAME, |q| phase(q).as_deref() == Some("input-required"))).await;
    fake.controller_sets_phase(NS, NAME, "done");
    app.post_json(&format!("/questions/{id}/answer"), &json!({"response": "late"})).await;
    within("the annotation to go", fake.wait_for(NS, NAME, |q| waiting_for(q).is_none())).await;
    assert_eq!(
        phase(fake.query(NS, NAME).as_ref()).as_deref(),
        Some("done"),
        "the controller's phase is not overwritten"
    );
}

#[tokio::test]
async fn a_query_deleted_meanwhile_is_not_an_error() {
    let fake = FakeKube::start().await;
    fake.create(NS, NAME, "running");
    let app = broker(&fake).await;
    let question: Value = app.post_json("/questions", &question_for(NAME)).await.json().await.unwrap();
    let id = question["id"].as_str().unwrap().to_owned();
    within("the Query to wait", fake.wait_for(NS, NAME, |q| phase(q).as_deref() == Some("input-required"))).await;
    fake.delete(NS, NAME);
    let answered = app.post_json(&format!("/questions/{id}/answer"), &json!({"response": "gone"})).await;
    assert_eq!(answered.status(), 200, "the answer never waits for Kubernetes");
    within("the resume attempt", fake.wait_for_requests("PATCH", &format!("{NAME}/status"), 2)).await;
    assert_eq!(settled(&app, &id).await[1].1.as_deref(), Some("skipped: the Query is gone"));
}

#[tokio::test]
async fn patching_retries_while_the_api_server_is_down_and_succeeds_when_it_is_back() {
    let fake = FakeKube::start().await;
    fake.create(NS, NAME, "running");
    fake.set_down(true);
    let app = broker(&fake).await;
    let created = app.post_json("/questions", &question_for(NAME)).await;
    assert_eq!(created.status(), 201, "asking never waits for Kubernetes");
    within("two failed attempts", fake.wait_for_requests("PATCH", "/status", 2)).await;
    assert_eq!(phase(fake.query(NS, NAME).as_ref()).as_deref(), Some("running"));
    fake.set_down(false);
    within(
        "the Query to wait once the API server is back",
        fake.wait_for(NS, NAME, |q| phase(q).as_deref() == Some("input-required")),
    )
    .await;
}

#[tokio::test]
async fn each_patch_is_made_once_across_replicas() {
    let fake = FakeKube::start().await;
    fake.create(NS, NAME, "running");
    let url = fresh_database().await;
    let flags = ["--kube-api-url", fake.url.as_str()];
    let (a, b, c) = tokio::join!(
        Replica::start_with(&url, &flags),
        Replica::start_with(&url, &flags),
        Replica::start_with(&url, &flags)
    );
    let client = reqwest::Client::new();
    let question: Value =
        client.post(a.url("/questions")).json(&question_for(NAME)).send().await.unwrap().json().await.unwrap();
    within("the Query to wait", fake.wait_for(NS, NAME, |q| phase(q).as_deref() == Some("input-required"))).await;
    let id = question["id"].as_str().unwrap();
    client.patch(b.url(&format!("/questions/{id}"))).json(&json!({"response": "ok"})).send().await.unwrap();
    within(
        "the Query to resume",
        fake.wait_for(NS, NAME, |q| phase(q).as_deref() == Some("running") && waiting_for(q).is_none()),
    )
    .await;
    // Let every replica's worker look again: another question round trip on C.
    let second: Value =
        client.post(c.url("/questions")).json(&question_for("other")).send().await.unwrap().json().await.unwrap();
    assert!(second["id"].is_string());
    within("the other Query's attempt", fake.wait_for_requests("PATCH", "other/status", 1)).await;
    assert_eq!(fake.count("PATCH", &format!("{NAME}/status")), 2, "one wait and one resume, by one replica each");
    assert_eq!(fake.count("PATCH", NAME), 2, "one annotation set and one removal");
}

#[tokio::test]
async fn the_fake_api_server_is_as_strict_as_the_real_one() {
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    let fake = FakeKube::start().await;
    fake.create(NS, NAME, "running");
    let client = kube::Client::try_from(kube::Config::new(fake.url.parse().unwrap())).unwrap();
    let resource =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("ark.mckinsey.com", "v1alpha1", "Query"), "queries");
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client, NS, &resource);
    let code = |result: Result<DynamicObject, kube::Error>| match result {
        Err(kube::Error::Api(status)) => status.code,
        Ok(_) => 200,
        Err(other) => panic!("{other}"),
    };
    let pp = PatchParams::default();
    let waiting = Patch::Merge(json!({"status": {"phase": "waiting"}}));
    assert_eq!(code(api.patch_status(NAME, &pp, &waiting).await), 422, "the phase enum is enforced");
    let unknown = Patch::Merge(json!({"status": {"waitingFor": {"since": "now"}}}));
    assert_eq!(code(api.patch_status(NAME, &pp, &unknown).await), 200);
    assert!(fake.query(NS, NAME).unwrap()["status"].get("waitingFor").is_none(), "unknown status fields are pruned");
    let test: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/status/phase", "value": "done"}])).unwrap();
    assert_eq!(code(api.patch_status(NAME, &pp, &Patch::<()>::Json(test)).await), 422, "a failed test is 422");
    let stale = Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "status": {"phase": "done"}}));
    assert_eq!(code(api.patch_status(NAME, &pp, &stale).await), 409, "a stale resourceVersion is 409");
    assert_eq!(code(api.patch_status("missing", &pp, &waiting).await), 404);
    let status_through_object = Patch::Merge(json!({"status": {"phase": "done"}}));
    api.patch(NAME, &pp, &status_through_object).await.unwrap();
    assert_eq!(phase(fake.query(NS, NAME).as_ref()).as_deref(), Some("running"), "status changes only through /status");
}
