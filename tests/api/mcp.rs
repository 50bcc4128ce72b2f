//! The MCP server on one broker: tools, blocking `ask_question` with progress, and tasks in both protocol
//! eras, driven with raw JSON-RPC so the wire itself is checked.

use serde_json::{Value, json};

use crate::support::{TestApp, mcp::Mcp, within};

fn ask_args(content: &str) -> Value {
    json!({"recipient": "ark://users/dave", "content": content})
}

async fn pending_id(app: &TestApp, content: &str) -> String {
    let list: Value = app.get("/questions?status=pending").await.json().await.unwrap();
    let item = list["items"].as_array().unwrap().iter().find(|q| q["content"] == content).expect("the question");
    item["id"].as_str().unwrap().to_owned()
}

async fn answer(app: &TestApp, id: &str, response: &str) {
    let reply = app.post_json(&format!("/questions/{id}/answer"), &json!({"response": response})).await;
    assert_eq!(reply.status(), 200);
}

#[tokio::test]
async fn initialize_advertises_2025_11_25_tasks_without_a_session() {
    let app = TestApp::spawn().await;
    let mcp = Mcp::new(&app.mcp_url);
    let init = mcp.initialize("2025-11-25").await;
    let result = init.result();
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(result["capabilities"]["tasks"], json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}));
    assert!(result["capabilities"].get("extensions").is_none(), "no SEP-2663 extension for this era");
    let tools = mcp.legacy("tools/list", json!({})).await;
    let tools = tools.result()["tools"].as_array().unwrap().clone();
    let ask = tools.iter().find(|t| t["name"] == "ask_question").expect("ask_question");
    assert_eq!(ask["execution"], json!({"taskSupport": "optional"}));
    // The schemas are derived from the tools' argument and result types.
    let input = &ask["inputSchema"];
    assert_eq!((input["type"].as_str(), input["required"].clone()), (Some("object"), json!(["recipient", "content"])));
    assert!(input["properties"]["recipient"]["description"].as_str().unwrap().contains("ark://users/<name>"));
    assert!(input["properties"]["channels"].to_string().contains("array"), "{input}");
    let output = &ask["outputSchema"];
    assert_eq!(output["required"], json!(["questionId", "response", "answeredAt"]), "{output}");
    assert_eq!(output["properties"]["answeredAt"]["format"], "date-time");
    let list = tools.iter().find(|t| t["name"] == "list_pending_questions").expect("list_pending_questions");
    assert_eq!(list["inputSchema"]["type"], "object");
    assert_eq!(list["outputSchema"]["required"], json!(["questions"]));
    // Arguments that do not fit get REST's messages, naming the field.
    let bad = mcp.legacy("tools/call", json!({"name": "ask_question", "arguments": {"content": 42}})).await;
    assert_eq!(bad.error_code(), -32602);
    assert_eq!(bad.message["error"]["message"], "content: expected string, received number", "{}", bad.message);
    for version in ["2025-06-18", "2025-03-26"] {
        let init = mcp.initialize(version).await;
        assert_eq!(init.result()["protocolVersion"], version);
        assert!(init.result()["capabilities"].get("tasks").is_none(), "tasks only exist in 2025-11-25");
    }
}

#[tokio::test]
async fn a_2025_11_25_task_is_created_listed_fetched_and_answered() {
    let app = TestApp::spawn().await;
    let mcp = Mcp::new(&app.mcp_url);
    let created = mcp
        .legacy(
            "tools/call",
            json!({"name": "ask_question", "arguments": ask_args("legacy?"), "task": {"ttl": 120000}}),
        )
        .await;
    let task = created.result()["task"].clone();
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&task_id).is_ok());
    assert_eq!((task["status"].as_str(), task["ttl"].as_i64()), (Some("working"), Some(120000)));
    assert!(task["pollInterval"].is_number() && task["createdAt"].is_string() && task["lastUpdatedAt"].is_string());
    assert!(created.result()["_meta"]["io.modelcontextprotocol/model-immediate-response"].is_string());

    let question_id = pending_id(&app, "legacy?").await;
    let question: Value = app.get(&format!("/questions/{question_id}")).await.json().await.unwrap();
    assert_eq!(question["taskId"], task_id.as_str(), "the question records its task");

    let got = mcp.legacy("tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(got.result()["status"], "working");
    let listed = mcp.legacy("tasks/list", json!({})).await;
    assert!(listed.result()["tasks"].as_array().unwrap().iter().any(|t| t["taskId"] == task_id.as_str()));

    let waiting = tokio::spawn({
        let mcp = mcp.clone();
        let task_id = task_id.clone();
        async move { mcp.legacy("tasks/result", json!({"taskId": task_id})).await }
    });
    answer(&app, &question_id, "yes").await;
    let result = within("tasks/result", waiting).await.unwrap();
    let result = result.result();
    assert_eq!(result["structuredContent"]["response"], "yes");
    assert_eq!(result["structuredContent"]["questionId"], question_id.as_str());
    assert_eq!(result["isError"], false);
    assert_eq!(result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], task_id.as_str());
    assert!(result.get("resultType").is_none(), "no 2026-07-28 fields in this era");
    assert_eq!(mcp.legacy("tasks/get", json!({"taskId": task_id})).await.result()["status"], "completed");
    assert_eq!(mcp.legacy("tasks/cancel", json!({"taskId": task_id})).await.error_code(), -32602, "terminal");
}

#[tokio::test]
async fn unknown_tasks_bad_cursors_and_untaskable_tools_get_the_specified_errors() {
    let app = TestApp::spawn().await;
    let mcp = Mcp::new(&app.mcp_url);
    let unknown = json!({"taskId": uuid::Uuid::new_v4().to_string()});
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        assert_eq!(mcp.legacy(method, unknown.clone()).await.error_code(), -32602, "{method}");
    }
    assert_eq!(mcp.legacy("tasks/get", json!({"taskId": "not-a-uuid"})).await.error_code(), -32602);
    assert_eq!(mcp.legacy("tasks/list", json!({"cursor": "garbage"})).await.error_code(), -32602);
    let untaskable =
        mcp.legacy("tools/call", json!({"name": "list_pending_questions", "arguments": {}, "task": {}})).await;
    assert_eq!(untaskable.error_code(), -32601);
    let invalid = mcp
        .legacy("tools/call", json!({"name": "ask_question", "arguments": {"content": "no recipient"}, "task": {}}))
        .await;
    assert_eq!(invalid.error_code(), -32602);
}

#[tokio::test]
async fn task_ttls_are_clamped_and_tasks_are_listed_in_pages() {
    let app = TestApp::spawn_with(|config| config.mcp_task_max_ttl_seconds = 3600).await;
    let mcp = Mcp::new(&app.mcp_url);
    let ttl_of = |reply: crate::support::mcp::Reply| reply.result()["task"]["ttl"].as_i64().unwrap();
    let huge = mcp
        .legacy(
            "tools/call",
            json!({"name": "ask_question", "arguments": ask_args("a"), "task": {"ttl": 999_999_999_999u64}}),
        )
        .await;
    assert_eq!(ttl_of(huge), 3_600_000, "clamped to the maximum");
    let tiny =
        mcp.legacy("tools/call", json!({"name": "ask_question", "arguments": ask_args("b"), "task": {"ttl": 1}})).await;
    assert_eq!(ttl_of(tiny), 1000, "raised to the minimum");
    let default =
        mcp.legacy("tools/call", json!({"name": "ask_question", "arguments": ask_args("c"), "task": {}})).await;
    assert_eq!(ttl_of(default), 3_600_000, "the default (a day) clamped too");
    for n in 0..55 {
        mcp.legacy(
            "tools/call",
            json!({"name": "ask_question", "arguments": ask_args(&format!("page {n}")), "task": {}}),
        )
        .await;
    }
    let mut seen = std::collections::HashSet::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = cursor.as_ref().map_or(json!({}), |c| json!({"cursor": c}));
        let page = mcp.legacy("tasks/list", params).await;
        for task in page.result()["tasks"].as_array().unwrap() {
            assert!(seen.insert(task["taskId"].as_str().unwrap().to_owned()), "no task twice");
        }
        match page.result()["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    assert!(seen.len() >= 57, "every live task is listed ({} seen)", seen.len());
}

#[tokio::test]
async fn a_2026_07_28_task_reports_its_inlined_result_and_cancel_acknowledges() {
    let app = TestApp::spawn().await;
    let mcp = Mcp::new(&app.mcp_url);
    let discover = mcp.modern("server/discover", None, json!({}), true).await;
    assert!(discover.result()["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object());
    assert!(discover.result()["supportedVersions"].as_array().unwrap().iter().any(|v| v == "2025-11-25"));

    let created = mcp
        .modern(
            "tools/call",
            Some("ask_question"),
            json!({"name": "ask_question", "arguments": ask_args("modern?")}),
            true,
        )
        .await;
    let task = created.result();
    assert_eq!((task["resultType"].as_str(), task["status"].as_str()), (Some("task"), Some("working")));
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    assert!(task["ttlMs"].is_number() && task["pollIntervalMs"].is_number());

    let get = |id: String| {
        let mcp = mcp.clone();
        async move { mcp.modern("tasks/get", Some(&id), json!({"taskId": id}), true).await }
    };
    assert_eq!(get(task_id.clone()).await.result()["status"], "working");
    let question_id = pending_id(&app, "modern?").await;
    answer(&app, &question_id, "modern yes").await;
    let done = get(task_id.clone()).await;
    assert_eq!(done.result()["status"], "completed");
    assert_eq!(done.result()["result"]["structuredContent"]["response"], "modern yes");

    // The same task through the other era: one store behind both.
    let legacy = mcp.legacy("tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(legacy.result()["status"], "completed");

    let update =
        mcp.modern("tasks/update", Some(&task_id), json!({"taskId": task_id, "inputResponses": {}}), true).await;
    assert_eq!(update.result(), &json!({"resultType": "complete"}), "update is acknowledged");
    let ack = mcp.modern("tasks/cancel", Some(&task_id), json!({"taskId": task_id}), true).await;
    assert_eq!(ack.result(), &json!({"resultType": "complete"}), "cancel is an idempotent acknowledgement");
    let missing_name = mcp.modern("tasks/get", None, json!({"taskId": task_id}), true).await;
    assert_eq!((missing_name.status, missing_name.error_code()), (400, -32020), "Mcp-Name is validated");
    let unknown = uuid::Uuid::new_v4().to_string();
    assert_eq!(get(unknown).await.error_code(), -32602);
    let without_extension = mcp.modern("tasks/get", Some(&task_id), json!({"taskId": task_id}), false).await;
    assert_eq!(without_extension.error_code(), -32021);
}

#[tokio::test]
async fn cancelling_a_modern_task_cancels_its_question() {
    let app = TestApp::spawn().await;
    let mcp = Mcp::new(&app.mcp_url);
    let created = mcp
        .modern(
            "tools/call",
            Some("ask_question"),
            json!({"name": "ask_question", "arguments": ask_args("cancel me")}),
            true,
        )
        .await;
    let task_id = created.result()["taskId"].as_str().unwrap().to_owned();
    let question_id = pending_id(&app, "cancel me").await;
    mcp.modern("tasks/cancel", Some(&task_id), json!({"taskId": task_id}), true).await.result();
    let question: Value = app.get(&format!("/questions/{question_id}")).await.json().await.unwrap();
    assert_eq!(question["status"], "cancelled");
    let got = mcp.modern("tasks/get", Some(&task_id), json!({"taskId": task_id}), true).await;
    assert_eq!(got.result()["status"], "cancelled");
}

#[tokio::test]
async fn only_allowed_hosts_reach_mcp_including_the_legacy_task_methods_and_bodies_are_bounded() {
    let app = TestApp::spawn_with(|config| {
        config.mcp_allowed_hosts = vec!["broker.ark.svc".into()];
        config.max_body_bytes = 64 * 1024;
    })
    .await;
    let client = reqwest::Client::new();
    let call = |host: &'static str, body: Value| {
        client
            .post(&app.mcp_url)
            .header("host", host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body)
            .send()
    };
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/list", "params": {}});
    assert_eq!(call("evil.example", list.clone()).await.unwrap().status(), 403, "a foreign Host is refused");
    assert_eq!(call("broker.ark.svc", list).await.unwrap().status(), 200);
    let tools = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    assert_eq!(call("evil.example", tools.clone()).await.unwrap().status(), 403);
    assert_eq!(call("broker.ark.svc:8081", tools).await.unwrap().status(), 200, "host:port matches the host");
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "ask_question", "arguments": {"recipient": "ark://users/d", "content": "x".repeat(100_000)}}});
    assert_eq!(call("broker.ark.svc", huge).await.unwrap().status(), 413, "bodies over the limit are refused");
}
