//! Authentication on real broker processes: token auth with two principals across two replicas (401s on REST,
//! the page and MCP; every task method of another principal's task answers as for an unknown one; lists are
//! each caller's own; the trusted proxy header names who answered), the tokens file reloaded, and
//! `--auth kubernetes` against a strict fake TokenReview API (audiences, caching, the API refusing the broker).

use serde_json::{Value, json};
use tempfile::NamedTempFile;

use crate::support::{
    PATIENCE, Replica,
    fake_token_review::{API_SERVER_AUDIENCE, FakeTokenReview},
    fresh_database, json_of,
    mcp::Mcp,
    temp_file,
};

const PERSON_HEADER: &str = "x-auth-request-user";

/// A tokens file of `content`, removed when the test ends.
fn tokens_file(content: &str) -> NamedTempFile {
    temp_file("ark-broker-tokens-", content)
}

async fn start_with_tokens(url: &str, path: &NamedTempFile) -> Replica {
    let path = path.path().to_str().unwrap();
    Replica::start_with(url, &["--auth", "token", "--auth-tokens-file", path, "--trusted-user-header", PERSON_HEADER])
        .await
}

/// Asserts the 401 the issue asks for: the documented body and a Bearer challenge.
async fn assert_unauthorized(response: reqwest::Response, invalid_token: bool) {
    let challenge = response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned());
    let (status, body) = json_of(response).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["error"]["code"], "UNAUTHORIZED", "{body}");
    let challenge = challenge.expect("WWW-Authenticate");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert_eq!(challenge.contains(r#"error="invalid_token""#), invalid_token, "{challenge}");
}

fn ask(content: &str) -> Value {
    json!({"name": "ask_question", "arguments": {"recipient": "ark://users/dave", "content": content}, "task": {}})
}

/// The error a task method answers, with the task id taken out of the message.
fn error_without(reply: &crate::support::mcp::Reply, task_id: &str) -> Value {
    let mut error = reply.message["error"].clone();
    assert!(error.is_object(), "expected an error: {}", reply.message);
    error["message"] = json!(error["message"].as_str().unwrap().replace(task_id, "<id>"));
    error
}

#[tokio::test]
async fn with_token_auth_each_principal_sees_only_its_own_tasks_and_unauthenticated_calls_get_401() {
    let url = fresh_database().await;
    let path = tokens_file("# Ark's components\nalice-token alice\nbob-token  bob\n");
    let (a, b) = tokio::join!(start_with_tokens(&url, &path), start_with_tokens(&url, &path));
    let http = reqwest::Client::new();

    // Probes need nothing; everything else needs a valid credential, MCP included.
    for probe in ["/health", "/readyz"] {
        assert_eq!(http.get(a.url(probe)).send().await.unwrap().status(), 200, "{probe}");
    }
    // The channels' inbound routes are signed by Slack or GitHub instead: they reach the route (here, not
    // configured: 404), never the token check.
    for inbound in ["/channels/slack/interactions", "/channels/slack/events", "/channels/github/webhook"] {
        assert_eq!(http.post(a.url(inbound)).body("{}").send().await.unwrap().status(), 404, "{inbound}");
    }
    for path in ["/questions", "/messages", "/stream", "/openapi.json", "/no-such-route"] {
        assert_unauthorized(http.get(a.url(path)).send().await.unwrap(), false).await;
    }
    // The page says the same to a person's browser, as an HTML page.
    let page = http.get(a.url("/ui")).send().await.unwrap();
    assert_eq!(page.status(), 401);
    assert!(page.headers()["www-authenticate"].to_str().unwrap().starts_with("Bearer"));
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert_unauthorized(http.get(a.url("/questions")).bearer_auth("carol-token").send().await.unwrap(), true).await;
    let two = http.get(a.url("/questions")).header("authorization", "Bearer alice-token");
    let two = two.header("authorization", "Bearer bob-token");
    assert_unauthorized(two.send().await.unwrap(), true).await;
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let mcp_post = |token: Option<&str>| {
        let request = http.post(&a.mcp_url).header("accept", "application/json, text/event-stream").json(&initialize);
        match token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    };
    assert_unauthorized(mcp_post(None).send().await.unwrap(), false).await;
    assert_unauthorized(mcp_post(Some("carol-token")).send().await.unwrap(), true).await;
    assert_eq!(mcp_post(Some("alice-token")).send().await.unwrap().status(), 200);

    // Alice asks as a task in both eras on A; Bob, on B, cannot tell her tasks from unknown ones.
    let alice_a = Mcp::new(&a.mcp_url).with_header("authorization", "Bearer alice-token");
    let alice_b = Mcp::new(&b.mcp_url).with_header("authorization", "Bearer alice-token");
    let bob_b = Mcp::new(&b.mcp_url).with_header("authorization", "Bearer bob-token");
    let legacy_task = alice_a.legacy("tools/call", ask("alice's legacy task?")).await.result()["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let modern = alice_a
        .modern("tools/call", Some("ask_question"), json!({"name": "ask_question", "arguments": {"recipient": "ark://users/dave", "content": "alice's modern task?"}}), true)
        .await;
    let modern_task = modern.result()["taskId"].as_str().unwrap().to_owned();
    let unknown = uuid::Uuid::new_v4().to_string();
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        for task in [&legacy_task, &modern_task] {
            let theirs = bob_b.legacy(method, json!({"taskId": task})).await;
            let nobodys = bob_b.legacy(method, json!({"taskId": unknown})).await;
            assert_eq!(error_without(&theirs, task), error_without(&nobodys, &unknown), "{method} as Bob");
        }
    }
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let params = |id: &str| json!({"taskId": id, "inputResponses": {}});
        let theirs = bob_b.modern(method, Some(&modern_task), params(&modern_task), true).await;
        let nobodys = bob_b.modern(method, Some(&unknown), params(&unknown), true).await;
        assert_eq!(error_without(&theirs, &modern_task), error_without(&nobodys, &unknown), "modern {method}");
    }
    // Bob's attempts changed nothing: both of Alice's tasks still work, seen from the other replica.
    for task in [&legacy_task, &modern_task] {
        assert_eq!(alice_b.legacy("tasks/get", json!({"taskId": task})).await.result()["status"], "working");
    }

    // Lists: each sees only their own, on either replica.
    let bob_task = bob_b.legacy("tools/call", ask("bob's task?")).await.result()["task"]["taskId"].clone();
    let task_ids = |reply: crate::support::mcp::Reply| -> Vec<Value> {
        reply.result()["tasks"].as_array().unwrap().iter().map(|t| t["taskId"].clone()).collect()
    };
    let alice_sees = task_ids(alice_b.legacy("tasks/list", json!({})).await);
    assert_eq!(alice_sees, vec![json!(legacy_task), json!(modern_task)]);
    assert_eq!(
        task_ids(
            Mcp::new(&a.mcp_url).with_header("authorization", "Bearer bob-token").legacy("tasks/list", json!({})).await
        ),
        vec![bob_task]
    );
    let pending = |mcp: Mcp| async move {
        let reply = mcp.legacy("tools/call", json!({"name": "list_pending_questions", "arguments": {}})).await;
        let list = reply.result()["structuredContent"]["questions"].as_array().unwrap().clone();
        list.iter().map(|q| q["content"].as_str().unwrap().to_owned()).collect::<Vec<_>>()
    };
    assert_eq!(pending(alice_a.clone()).await, ["alice's legacy task?", "alice's modern task?"]);
    assert_eq!(pending(bob_b.clone()).await, ["bob's task?"]);

    // People behind the proxy: they read and answer (as themselves, whatever the body says), nothing more.
    let person = (PERSON_HEADER, "dave@example.com");
    let id = pending_question_id(&http, &b, person, "alice's legacy task?").await;
    let page = http.get(b.url("/ui")).header(PERSON_HEADER, "dave@example.com").send().await.unwrap();
    assert_eq!(page.status(), 200);
    let page = page.text().await.unwrap();
    assert!(page.contains("Answering as <strong>dave@example.com</strong>"), "the page names who answers");
    assert!(!page.contains(r#"name="answeredBy""#), "and asks for no name");
    let answered = http
        .post(b.url(&format!("/questions/{id}/answer")))
        .header(PERSON_HEADER, "dave@example.com")
        .json(&json!({"response": "go ahead", "answeredBy": "someone else"}))
        .send()
        .await
        .unwrap();
    let (status, answered) = json_of(answered).await;
    assert_eq!((status, answered["answeredBy"].as_str()), (200, Some("dave@example.com")), "{answered}");
    let agent_only = http.post(b.url("/questions")).header(PERSON_HEADER, "dave@example.com");
    let agent_only =
        agent_only.json(&json!({"sender": "ark://agents/x", "recipient": "ark://users/y", "content": "?"}));
    assert_unauthorized(agent_only.send().await.unwrap(), false).await;
    // An agent answering with its token is recorded as its principal.
    let bobs = pending_question_id(&http, &b, ("authorization", "Bearer bob-token"), "bob's task?").await;
    let by_token = http
        .patch(a.url(&format!("/questions/{bobs}")))
        .bearer_auth("alice-token")
        .json(&json!({"response": "done", "answeredBy": "mallory"}))
        .send()
        .await
        .unwrap();
    assert_eq!(json_of(by_token).await.1["answeredBy"], "alice");
    let result = alice_b.legacy("tasks/result", json!({"taskId": legacy_task})).await;
    assert_eq!(result.result()["structuredContent"]["response"], "go ahead");
}

/// The id of the pending question with `content`, listed with the `credential` header.
async fn pending_question_id(
    http: &reqwest::Client,
    replica: &Replica,
    credential: (&str, &str),
    content: &str,
) -> String {
    let list: Value = http
        .get(replica.url("/questions?status=pending"))
        .header(credential.0, credential.1)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let found = list["items"].as_array().unwrap().iter().find(|q| q["content"] == content).expect("the question");
    found["id"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_changed_tokens_file_takes_effect_without_a_restart_and_a_broken_one_is_ignored() {
    let url = fresh_database().await;
    let path = tokens_file("old-token ci\n");
    let replica = start_with_tokens(&url, &path).await;
    let http = reqwest::Client::new();
    let status_with = |token: &'static str| {
        let request = http.get(replica.url("/questions")).bearer_auth(token);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status_with("old-token").await, 200);
    assert_eq!(status_with("new-token").await, 401);
    // Rotated as a mounted Secret is: the new file replaces the old one.
    let next = tokens_file("new-token ci\n");
    next.persist(path.path()).unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while status_with("new-token").await != 200 {
        assert!(tokio::time::Instant::now() < deadline, "the new token was never accepted");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status_with("old-token").await, 401, "the rotated-out token is refused");
    // A broken file keeps the last good tokens (and says so in the log, without any token in it).
    std::fs::write(&path, "lonely-line-without-principal\n").unwrap();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !replica.log().contains("keeping the old tokens") {
        assert!(tokio::time::Instant::now() < deadline, "the broken file was not noticed");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(status_with("new-token").await, 200);
    assert!(!replica.log().contains("new-token") && !replica.log().contains("lonely-line"), "no token in the log");
}

#[tokio::test]
async fn kubernetes_auth_accepts_service_account_tokens_for_its_audience_via_token_review() {
    let url = fresh_database().await;
    let api = FakeTokenReview::start().await;
    api.issue("executor-token", "system:serviceaccount:ark:executor", &["ark-broker"]);
    api.issue("other-audience", "system:serviceaccount:ark:other", &["vault"]);
    api.issue("api-server-token", "system:serviceaccount:ark:default", &[API_SERVER_AUDIENCE]);
    let args = ["--auth", "kubernetes", "--kube-api-url", &api.url, "--auth-audiences", "ark-broker"];
    let replica = Replica::start_with(&url, &args).await;
    let http = reqwest::Client::new();
    let get = |token: &'static str| http.get(replica.url("/questions")).bearer_auth(token).send();

    assert_eq!(get("executor-token").await.unwrap().status(), 200);
    assert_eq!(get("executor-token").await.unwrap().status(), 200);
    let reviews = api.received();
    assert_eq!(reviews.len(), 1, "the verdict is cached: {reviews:?}");
    assert_eq!(reviews[0]["spec"]["audiences"], json!(["ark-broker"]), "the configured audiences are asked for");
    for refused in ["other-audience", "api-server-token", "forged"] {
        assert_unauthorized(get(refused).await.unwrap(), true).await;
    }
    // The principal is the ServiceAccount's user name: it answers as that (a question another one asked: no
    // principal answers its own).
    api.issue("agent-token", "system:serviceaccount:ark:agent", &["ark-broker"]);
    let asked = http
        .post(replica.url("/questions"))
        .bearer_auth("agent-token")
        .json(&json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "ok?"}))
        .send()
        .await
        .unwrap();
    let id = json_of(asked).await.1["id"].as_str().unwrap().to_owned();
    let answered = http
        .post(replica.url(&format!("/questions/{id}/answer")))
        .bearer_auth("executor-token")
        .json(&json!({"response": "yes"}))
        .send()
        .await
        .unwrap();
    assert_eq!(json_of(answered).await.1["answeredBy"], "system:serviceaccount:ark:executor");

    // The API server refusing the broker's own review is not the caller's fault: 503 with Retry-After.
    for code in [401, 403] {
        api.refuse(Some(code));
        let response = get("a-token-never-seen").await.unwrap();
        assert_eq!(response.headers().get("retry-after").map(|v| v.to_str().unwrap()), Some("1"));
        let (status, body) = json_of(response).await;
        assert_eq!((status, body["error"]["code"].as_str()), (503, Some("SERVICE_UNAVAILABLE")), "{body}");
    }
    assert!(replica.log().contains("system:auth-delegator"), "the log says what to grant");
    api.refuse(None);
    assert_eq!(get("executor-token").await.unwrap().status(), 200);
}

/// Ark's executor, controller and ark-api call some routes with no header at all (they find the broker through
/// the discovery ConfigMaps): with `--auth-open-ark-routes` those, and only those, take no credential, across
/// two replicas; a token that is sent must still be valid. Without it they get 401.
#[tokio::test]
async fn with_open_ark_routes_arks_header_less_calls_work_and_nothing_else_opens() {
    let url = fresh_database().await;
    let path = tokens_file("alice-token alice\n");
    let file = path.path().to_str().unwrap();
    let closed_args = ["--auth", "token", "--auth-tokens-file", file];
    let open = ["--auth", "token", "--auth-tokens-file", file, "--auth-open-ark-routes"];
    let (a, b, closed) = tokio::join!(
        Replica::start_with(&url, &open),
        Replica::start_with(&url, &open),
        Replica::start_with(&url, &closed_args)
    );
    let http = reqwest::Client::new();
    let ndjson = |url: String| http.post(url).header("content-type", "application/x-ndjson").body("{\"n\":1}\n");

    assert_unauthorized(ndjson(closed.url("/stream/q-closed")).send().await.unwrap(), false).await;
    let reply = ndjson(a.url("/stream/q-open")).send().await.unwrap();
    assert_eq!(reply.status(), 200, "the executor's chunk POST");
    let reply = http.post(b.url("/stream/q-open/complete")).send().await.unwrap();
    assert_eq!(reply.status(), 200, "its /complete, on another replica");
    let read = http.get(b.url("/stream/q-open?from-beginning=true&wait-for-query=5")).send().await.unwrap();
    assert_eq!(read.status(), 200, "ark-api's read of the stream");
    assert_eq!(read.text().await.unwrap().matches("data: ").count(), 2, "the chunk and [DONE]");
    let event = json!({"reason": "QueryExecutionStart", "data": {"queryId": "uid-1", "sessionId": "s"}});
    assert_eq!(http.post(a.url("/events")).json(&event).send().await.unwrap().status(), 201, "an executor's event");
    let spans = json!({"resourceSpans": []});
    assert_eq!(
        http.post(a.url("/v1/traces")).json(&spans).send().await.unwrap().status(),
        200,
        "the controller's spans"
    );

    let message = json!({"conversation_id": "c", "query_id": "q", "messages": []});
    assert_unauthorized(http.post(a.url("/messages")).json(&message).send().await.unwrap(), false).await;
    assert_unauthorized(http.get(a.url("/stream")).send().await.unwrap(), false).await;
    assert_unauthorized(http.get(a.url("/events")).send().await.unwrap(), false).await;
    assert_unauthorized(http.delete(a.url("/stream/q-open")).send().await.unwrap(), false).await;
    let wrong = ndjson(a.url("/stream/q-open")).bearer_auth("not-a-token").send().await.unwrap();
    assert_unauthorized(wrong, true).await;
    let own = ndjson(a.url("/stream/q-alice")).bearer_auth("alice-token").send().await.unwrap();
    assert_eq!(own.status(), 200, "a valid token still works");
}
