//! MCP across three broker processes: ask on one, wait on another, answer on a third, kill one in the
//! middle; and the real clients (the official Python SDK 1.x and 2.x, the TypeScript SDK, the conformance suite) against live replicas.

use std::path::Path;

use serde_json::{Value, json};

use crate::support::{
    Replica, fake_channels::FakeApi, fresh_database, mcp::Mcp, pgbouncer::three_replicas_through_pgbouncer,
    rotating_proxy::RotatingProxy, slack, within,
};

/// A poll so slow that a prompt wake-up can only have come through NOTIFY.
const NO_POLL: &[&str] = &["--poll-interval-ms", "600000"];

async fn pending_id(client: &reqwest::Client, replica: &Replica, content: &str) -> String {
    let list: Value = client.get(replica.url("/questions?status=pending")).send().await.unwrap().json().await.unwrap();
    let found = list["items"].as_array().unwrap().iter().find(|q| q["content"] == content).expect("the question");
    found["id"].as_str().unwrap().to_owned()
}

async fn answer(client: &reqwest::Client, replica: &Replica, id: &str, response: &str) {
    let reply = client
        .patch(replica.url(&format!("/questions/{id}")))
        .json(&json!({"response": response}))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
}

#[tokio::test]
async fn a_task_asked_on_a_and_answered_on_c_completes_a_result_blocked_on_b_through_notify() {
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start_with(&url, NO_POLL), Replica::start(&url));
    task_across_replicas(a, b, c).await;
}

#[tokio::test]
#[ignore = "needs pgbouncer: ./scripts/test installs it and runs it"]
async fn a_task_asked_on_a_and_answered_on_c_completes_a_result_blocked_on_b_through_pgbouncer() {
    let (_bouncer, [a, b, c]) = three_replicas_through_pgbouncer([&[], NO_POLL, &[]]).await;
    task_across_replicas(a, b, c).await;
}

#[tokio::test]
#[ignore = "needs pgbouncer: ./scripts/test installs it and runs it"]
async fn a_blocking_ask_on_a_returns_the_answer_given_on_c_through_pgbouncer() {
    let waits_on_notify_only: &[&str] = &["--poll-interval-ms", "600000", "--mcp-progress-interval-ms", "100"];
    let (_bouncer, [a, _b, c]) = three_replicas_through_pgbouncer([waits_on_notify_only, &[], &[]]).await;
    blocking_ask_across_replicas(a, c).await;
}

/// A task asked on A, its result awaited on B (which polls only every 10 minutes), answered on C.
async fn task_across_replicas(a: Replica, b: Replica, c: Replica) {
    let client = reqwest::Client::new();
    let args = json!({"recipient": "ark://users/dave", "content": "across?"});
    let created =
        Mcp::new(&a.mcp_url).legacy("tools/call", json!({"name": "ask_question", "arguments": args, "task": {}})).await;
    let task_id = created.result()["task"]["taskId"].as_str().unwrap().to_owned();
    // B subscribes before it sends the reply's headers, so once they arrive B is waiting.
    let blocked = Mcp::new(&b.mcp_url).legacy_started("tasks/result", json!({"taskId": task_id})).await;
    let blocked = tokio::spawn(blocked.finish());
    let id = pending_id(&client, &c, "across?").await;
    answer(&client, &c, &id, "from C").await;
    let result = within("B's tasks/result (B polls only every 10 minutes)", blocked).await.unwrap();
    assert_eq!(result.result()["structuredContent"]["response"], "from C");
    let on_a = Mcp::new(&a.mcp_url).legacy("tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(on_a.result()["status"], "completed");
    let modern_on_c = Mcp::new(&c.mcp_url).modern("tasks/get", Some(&task_id), json!({"taskId": task_id}), true).await;
    assert_eq!(modern_on_c.result()["result"]["structuredContent"]["response"], "from C");
}

#[tokio::test]
async fn a_blocking_ask_on_a_returns_the_answer_given_on_c_through_notify() {
    let url = fresh_database().await;
    let waits_on_notify_only = &["--poll-interval-ms", "600000", "--mcp-progress-interval-ms", "100"];
    let (a, c) = tokio::join!(Replica::start_with(&url, waits_on_notify_only), Replica::start(&url));
    blocking_ask_across_replicas(a, c).await;
}

/// A blocking `ask_question` on A (which polls only every 10 minutes), answered on C.
async fn blocking_ask_across_replicas(a: Replica, c: Replica) {
    let client = reqwest::Client::new();
    let (observer, mut progress) = tokio::sync::mpsc::unbounded_channel();
    let call = tokio::spawn({
        let a = Mcp::new(&a.mcp_url);
        async move {
            let params = json!({"name": "ask_question", "arguments": {"recipient": "ark://users/dave", "content": "block across?"},
                                "_meta": {"progressToken": 7}});
            a.legacy_observed("tools/call", params, Some(observer)).await
        }
    });
    // A's first progress notification says it is waiting, and names the question.
    let first = within("A's first progress", progress.recv()).await.expect("progress while pending");
    let message = first["params"]["message"].as_str().unwrap();
    let id = message.rsplit('(').next().unwrap().trim_end_matches(')').to_owned();
    assert!(id.starts_with("q-"), "{message}");
    answer(&client, &c, &id, "blocking from C").await;
    let reply = within("A's blocking call", call).await.unwrap();
    assert_eq!(reply.result()["structuredContent"]["response"], "blocking from C");
}

#[tokio::test]
async fn a_blocked_task_result_on_a_killed_replica_is_simply_asked_again_elsewhere() {
    let url = fresh_database().await;
    let (a, mut b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let args = json!({"recipient": "ark://users/dave", "content": "survive?"});
    let created =
        Mcp::new(&a.mcp_url).legacy("tools/call", json!({"name": "ask_question", "arguments": args, "task": {}})).await;
    let task_id = created.result()["task"]["taskId"].as_str().unwrap().to_owned();
    let doomed = Mcp::new(&b.mcp_url).legacy_started("tasks/result", json!({"taskId": task_id})).await;
    b.kill().await;
    let cut = within("the call on the killed replica to end", doomed.finish_or_cut()).await;
    assert!(cut.is_none(), "B died mid-call, so its reply never came");
    let again = tokio::spawn({
        let c = Mcp::new(&c.mcp_url);
        let task_id = task_id.clone();
        async move { c.legacy("tasks/result", json!({"taskId": task_id})).await }
    });
    let id = pending_id(&client, &a, "survive?").await;
    answer(&client, &a, &id, "still here").await;
    let result = within("tasks/result on C", again).await.unwrap();
    assert_eq!(result.result()["structuredContent"]["response"], "still here");
}

fn tool_path(relative: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Runs a client scenario (`program script`, `what` for messages) against replicas `a`, `b`, `c`, given their
/// MCP endpoints and REST bases as `MCP_A`… and `REST_A`…; asserts it succeeded and returns its stdout.
async fn scenario(what: &'static str, program: &std::path::Path, script: &str, replicas: [&Replica; 3]) -> String {
    scenario_with(what, program, script, replicas, &[]).await
}

/// [`scenario`] with more environment variables.
async fn scenario_with(
    what: &'static str,
    program: &std::path::Path,
    script: &str,
    [a, b, c]: [&Replica; 3],
    more: &[(&str, &str)],
) -> String {
    let output = within(
        what,
        tokio::process::Command::new(program)
            .arg(tool_path(script))
            .envs(more.iter().copied())
            .env("MCP_A", &a.mcp_url)
            .env("MCP_B", &b.mcp_url)
            .env("MCP_C", &c.mcp_url)
            .env("REST_A", &a.base)
            .env("REST_B", &b.base)
            .env("REST_C", &c.base)
            .output(),
    )
    .await
    .unwrap_or_else(|error| panic!("run {}: {error}", program.display()));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "{what} failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
    stdout
}

#[tokio::test]
#[ignore = "needs Python with the MCP SDK (tests/mcp): ./scripts/test installs it and runs it"]
async fn the_official_python_sdk_uses_tasks_and_progress_across_three_replicas() {
    let python = tool_path("tests/mcp/.venv/bin/python");
    assert!(
        python.exists(),
        "this test needs the pinned MCP Python SDK; ./scripts/test installs it (scripts/python-venv tests/mcp)"
    );
    let url = fresh_database().await;
    let fast_progress = &["--mcp-progress-interval-ms", "200"];
    let (a, b, c) = tokio::join!(
        Replica::start_with(&url, fast_progress),
        Replica::start_with(&url, fast_progress),
        Replica::start_with(&url, fast_progress)
    );
    scenario("the Python SDK scenario", &python, "tests/mcp/legacy_tasks.py", [&a, &b, &c]).await;
}

#[tokio::test]
#[ignore = "needs Python with the MCP SDK 2.x (tests/mcp2): ./scripts/test installs it and runs it"]
async fn the_official_python_sdk_2_client_asks_across_three_replicas_in_auto_and_legacy_mode() {
    let python = tool_path("tests/mcp2/.venv/bin/python");
    assert!(
        python.exists(),
        "this test needs the pinned MCP Python SDK 2.x; ./scripts/test installs it (scripts/python-venv tests/mcp2)"
    );
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let stdout = scenario("the Python SDK 2.x scenario", &python, "tests/mcp2/client_modes.py", [&a, &b, &c]).await;
    assert!(stdout.contains("mode=auto: negotiated protocol version 2026-07-28"), "{stdout}");
    assert!(stdout.contains("mode=legacy: negotiated protocol version 2025-11-25"), "{stdout}");
}

#[tokio::test]
#[ignore = "needs Python with the MCP SDK 2.x (tests/mcp2): ./scripts/test installs it and runs it"]
async fn the_official_python_sdk_2_client_asks_its_person_through_elicitation_in_both_eras() {
    let python = tool_path("tests/mcp2/.venv/bin/python");
    assert!(
        python.exists(),
        "this test needs the pinned MCP Python SDK 2.x; ./scripts/test installs it (scripts/python-venv tests/mcp2)"
    );
    let fake = FakeApi::slack().await;
    let (a, b, c) = slack::three_replicas(&fake).await;
    let person = slack::person(fake, b.base.clone()).await;
    let what = "the Python SDK 2.x elicitation scenario";
    let stdout =
        scenario_with(what, &python, "tests/mcp2/elicitation.py", [&a, &b, &c], &[("SLACK_PERSON", &person)]).await;
    for mode in ["auto", "legacy"] {
        assert!(stdout.contains(&format!("ok - [{mode}] the page and Slack race the person")), "{stdout}");
    }
}

#[tokio::test]
#[ignore = "needs Node with the MCP TypeScript SDK (tests/mcp_ts): ./scripts/test installs it and runs it"]
async fn the_official_typescript_sdk_client_asks_its_person_by_form_and_by_link() {
    assert!(
        tool_path("tests/mcp_ts/node_modules/@modelcontextprotocol/sdk").exists(),
        "this test needs the pinned MCP TypeScript SDK; ./scripts/test installs it (npm ci in tests/mcp_ts)"
    );
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let node = std::path::Path::new("node");
    let stdout =
        scenario("the TypeScript SDK elicitation scenario", node, "tests/mcp_ts/elicitation.mjs", [&a, &b, &c]).await;
    assert!(stdout.contains("3 passed, 0 failed"), "{stdout}");
}

#[tokio::test]
#[ignore = "needs Node with the MCP TypeScript SDK (tests/mcp_ts): ./scripts/test installs it and runs it"]
async fn the_official_typescript_sdk_client_asks_across_three_replicas() {
    assert!(
        tool_path("tests/mcp_ts/node_modules/@modelcontextprotocol/sdk").exists(),
        "this test needs the pinned MCP TypeScript SDK; ./scripts/test installs it (npm ci in tests/mcp_ts)"
    );
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let node = std::path::Path::new("node");
    let stdout = scenario("the TypeScript SDK scenario", node, "tests/mcp_ts/client.mjs", [&a, &b, &c]).await;
    assert!(stdout.contains("# negotiated protocol version 2025-11-25"), "{stdout}");
}

#[tokio::test]
#[ignore = "needs Node with the MCP conformance suite (tests/conformance): ./scripts/test installs it and runs it"]
async fn the_whole_mcp_conformance_suite_passes_across_three_replicas_each_request_on_the_next() {
    if !cfg!(feature = "conformance-fixtures") {
        panic!("the suite needs the fixture tools: cargo test --features conformance-fixtures (./scripts/test does)");
    }
    let runner = tool_path("tests/conformance/run.sh");
    assert!(
        tool_path("tests/conformance/node_modules/@modelcontextprotocol/conformance").exists(),
        "this test needs the pinned conformance suite; ./scripts/test installs it"
    );
    let url = fresh_database().await;
    // A poll slower than the suite: every task a replica did not create it learns of from the database.
    let (a, b, c) = Replica::three(&url, &["--mcp-conformance-fixtures", "--mcp-task-poll-interval-ms", "200"]).await;
    let mcp_base = |replica: &Replica| replica.mcp_url.trim_end_matches("/mcp").to_owned();
    let bases = [mcp_base(&a), mcp_base(&b), mcp_base(&c)];
    let proxy = RotatingProxy::start(&bases.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let output = tokio::time::timeout(
        std::time::Duration::from_secs(300),
        tokio::process::Command::new("bash").arg(&runner).arg(proxy.url("/mcp")).output(),
    )
    .await
    .expect("the conformance suite finishes")
    .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "conformance failures:\n{stdout}\n{stderr}");
    assert!(stdout.contains(" 0 failed") && !stdout.contains("FAIL "), "{stdout}");
    // Every replica served part of it (the proxy turns per request, not per connection).
    for replica in [&a, &b, &c] {
        let metrics = reqwest::get(replica.url("/metrics")).await.unwrap().text().await.unwrap();
        let served = metrics
            .lines()
            .find_map(|line| {
                line.strip_prefix(r#"ark_broker_http_requests_total{method="POST",route="/mcp",status="200"} "#)
            })
            .and_then(|count| count.parse::<f64>().ok())
            .unwrap_or_default();
        assert!(served >= 20.0, "{} served {served} MCP requests:\n{metrics}", replica.base);
    }
}
