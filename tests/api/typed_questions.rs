//! Typed questions (`responseSchema`: MCP elicitation's form schema) and declines, over REST, the page's form
//! post and MCP in both task eras.

use serde_json::{Value, json};

use crate::support::{TestApp, json_of, mcp::Mcp, within};

fn form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "oneOf": [{"const": "approve", "title": "Approve"}, {"const": "reject", "title": "Reject"}]},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
            "regions": {"type": "array", "items": {"type": "string", "enum": ["eu", "us"]}}
        },
        "required": ["decision", "replicas"]
    })
}

async fn ask(app: &TestApp, body: Value) -> (u16, Value) {
    json_of(app.post_json("/questions", &body).await).await
}

async fn typed(app: &TestApp) -> String {
    let body = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Deploy?",
                      "responseSchema": form()});
    let (status, question) = ask(app, body).await;
    assert_eq!(status, 201, "{question}");
    assert_eq!(question["responseSchema"], form(), "the form is kept as asked");
    question["id"].as_str().unwrap().to_owned()
}

async fn answer(app: &TestApp, id: &str, response: Value) -> (u16, Value) {
    json_of(app.post_json(&format!("/questions/{id}/answer"), &json!({"response": response})).await).await
}

#[tokio::test]
async fn a_typed_answer_is_kept_as_json_with_its_defaults_and_a_bad_one_names_the_field_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let id = typed(&app).await;
    for (response, field) in [
        (json!({"replicas": 2}), "response.decision: required"),
        (json!({"decision": "maybe"}), "response.decision: must be one of"),
        (json!({"decision": "approve", "replicas": 0}), "response.replicas: must be between 1"),
        (json!({"decision": "approve", "regions": ["mars"]}), "response.regions: each choice"),
        (json!({"decision": "approve", "colour": "red"}), "response.colour: not a field"),
        (json!("approve"), "response: expected an object"),
    ] {
        let (status, body) = answer(&app, &id, response.clone()).await;
        assert_eq!(status, 400, "{response}: {body}");
        assert_eq!(body["error"]["code"], "VALIDATION_ERROR");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field), "{response}: {message}");
    }
    let (_, question) = json_of(app.get(&format!("/questions/{id}")).await).await;
    assert_eq!(question["status"], "pending", "a refused answer changes nothing");
    assert!(question.get("response").is_none());

    let (status, answered) = answer(&app, &id, json!({"decision": "approve", "regions": ["eu"]})).await;
    assert_eq!(status, 200, "{answered}");
    assert_eq!(answered["status"], "answered");
    assert_eq!(answered["response"], json!({"decision": "approve", "replicas": 3, "regions": ["eu"]}));
    let (_, again) = json_of(app.get(&format!("/questions/{id}")).await).await;
    assert_eq!(again["response"], answered["response"], "read back as JSON");
    let (status, _) = answer(&app, &id, json!({"decision": "reject", "replicas": 1})).await;
    assert_eq!(status, 409, "the first answer wins");
}

#[tokio::test]
async fn a_text_question_still_takes_text_and_its_answer_stays_a_string() {
    let app = TestApp::spawn().await;
    let (_, question) =
        ask(&app, json!({"sender": "ark://agents/a", "recipient": "ark://users/dave", "content": "Name?"})).await;
    let id = question["id"].as_str().unwrap();
    assert!(question.get("responseSchema").is_none());
    let (status, body) = answer(&app, id, json!({"name": "x"})).await;
    assert_eq!((status, body["error"]["code"].as_str()), (400, Some("VALIDATION_ERROR")), "{body}");
    let (status, answered) = answer(&app, id, json!("Ada")).await;
    assert_eq!(status, 200);
    assert_eq!(answered["response"], json!("Ada"));
}

#[tokio::test]
async fn a_form_outside_the_elicitation_subset_or_beside_options_is_refused() {
    let app = TestApp::spawn().await;
    let base = json!({"sender": "ark://agents/a", "recipient": "ark://users/dave", "content": "?"});
    let with = |extra: Value| {
        let mut body = base.clone();
        body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        body
    };
    for (body, starts) in [
        (
            with(json!({"responseSchema": {"type": "object", "properties": {"a": {"type": "object"}}}})),
            "responseSchema: a: type `object` is not supported",
        ),
        (
            with(
                json!({"responseSchema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}}),
            ),
            "responseSchema: required names 'b'",
        ),
        (with(json!({"responseSchema": form(), "options": ["Yes", "No"]})), "options: not with responseSchema"),
    ] {
        let (status, reply) = ask(&app, body).await;
        assert_eq!(status, 400, "{reply}");
        assert!(reply["error"]["message"].as_str().unwrap().starts_with(starts), "{reply}");
    }
    let (_, list) = json_of(app.get("/questions").await).await;
    assert_eq!(list["items"].as_array().unwrap().len(), 0, "nothing was stored");
}

#[tokio::test]
async fn a_declined_question_is_closed_with_who_and_why_and_answers_after_it_get_409() {
    let app = TestApp::spawn().await;
    let id = typed(&app).await;
    let (status, declined) = json_of(
        app.post_json(&format!("/questions/{id}/decline"), &json!({"reason": "not my call", "declinedBy": "dave"}))
            .await,
    )
    .await;
    assert_eq!(status, 200, "{declined}");
    assert_eq!(declined["status"], "declined");
    assert_eq!(
        (declined["declineReason"].as_str(), declined["answeredBy"].as_str()),
        (Some("not my call"), Some("dave"))
    );
    assert!(declined["closedAt"].is_string() && declined.get("response").is_none());
    let (status, conflict) = answer(&app, &id, json!({"decision": "approve"})).await;
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(conflict["question"]["status"], "declined");
    let (_, list) = json_of(app.get("/questions?status=declined").await).await;
    assert_eq!(list["items"][0]["id"], id.as_str(), "declined is a status lists filter on");

    // Without a body, the same; a second decline is a 409.
    let other = typed(&app).await;
    let reply = app.client.post(app.url(&format!("/questions/{other}/decline"))).send().await.unwrap();
    assert_eq!(reply.status(), 200);
    let reply = app.client.post(app.url(&format!("/questions/{other}/decline"))).send().await.unwrap();
    assert_eq!(reply.status(), 409);
    let reply = app.client.post(app.url("/questions/q-00000000-0000-0000-0000-000000000000/decline")).send().await;
    assert_eq!(reply.unwrap().status(), 404);
}

#[tokio::test]
async fn mcp_asks_with_a_form_and_gets_the_typed_answer_as_structured_content_in_both_eras() {
    let app = TestApp::spawn().await;
    let mcp = Mcp::new(&app.mcp_url);
    let arguments = json!({"recipient": "ark://users/dave", "content": "Ship it?", "responseSchema": form()});
    let legacy =
        mcp.legacy("tools/call", json!({"name": "ask_question", "arguments": arguments, "task": {"ttl": 60000}})).await;
    let task_id = legacy.result()["task"]["taskId"].as_str().unwrap().to_owned();
    let (_, list) = json_of(app.get("/questions?status=pending").await).await;
    let question = &list["items"][0];
    assert_eq!(question["responseSchema"], form(), "the tool's form reaches the question");
    let id = question["id"].as_str().unwrap().to_owned();
    let waiting = tokio::spawn({
        let (mcp, task_id) = (mcp.clone(), task_id.clone());
        async move { mcp.legacy("tasks/result", json!({"taskId": task_id})).await }
    });
    let (status, _) = answer(&app, &id, json!({"decision": "reject", "replicas": 1})).await;
    assert_eq!(status, 200);
    let result = within("tasks/result", waiting).await.unwrap();
    let expected = json!({"decision": "reject", "replicas": 1});
    assert_eq!(result.result()["structuredContent"]["response"], expected);
    let modern = mcp.modern("tasks/get", Some(&task_id), json!({"taskId": task_id}), true).await;
    assert_eq!(modern.result()["result"]["structuredContent"]["response"], expected, "the same in the 2026 era");

    // A bad form is the tool's invalid params, and asks nothing.
    let bad = json!({"recipient": "ark://users/dave", "content": "?", "responseSchema": {"type": "object", "properties": {}}});
    let refused = mcp.legacy("tools/call", json!({"name": "ask_question", "arguments": bad})).await;
    assert_eq!(refused.error_code(), -32602, "invalid params");
}

#[tokio::test]
async fn an_mcp_waiter_of_a_declined_question_gets_a_tool_error_naming_who_declined() {
    let app = TestApp::spawn().await;
    let mcp = Mcp::new(&app.mcp_url);
    let legacy = mcp
        .legacy(
            "tools/call",
            json!({"name": "ask_question", "arguments": {"recipient": "ark://users/dave", "content": "Go?"}, "task": {"ttl": 60000}}),
        )
        .await;
    let task_id = legacy.result()["task"]["taskId"].as_str().unwrap().to_owned();
    let (_, list) = json_of(app.get("/questions?status=pending").await).await;
    let id = list["items"][0]["id"].as_str().unwrap().to_owned();
    let reply =
        app.post_json(&format!("/questions/{id}/decline"), &json!({"declinedBy": "dave", "reason": "no"})).await;
    assert_eq!(reply.status(), 200);
    let result = mcp.legacy("tasks/result", json!({"taskId": task_id})).await;
    assert_eq!(result.result()["isError"], true);
    let text = result.result()["content"][0]["text"].as_str().unwrap();
    assert!(text.ends_with("was declined by dave: no"), "{text}");
    let task = mcp.legacy("tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(task.result()["status"], "failed", "the 2025-11-25 task of a tool error");
}

#[tokio::test]
async fn the_fields_keep_the_order_the_asker_wrote_them_in_on_rest_mcp_and_the_page() {
    let app = TestApp::spawn().await;
    let schema = json!({"type": "object", "properties": {
        "zone": {"type": "string"}, "approve": {"type": "boolean"}, "mode": {"type": "string", "enum": ["a", "b"]}}});
    let names = |question: &Value| -> Vec<String> {
        question["responseSchema"]["properties"].as_object().unwrap().keys().cloned().collect()
    };
    let body = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Where?",
                      "responseSchema": schema});
    let (status, asked) = ask(&app, body).await;
    assert_eq!(status, 201, "{asked}");
    assert_eq!(names(&asked), ["zone", "approve", "mode"], "not alphabetical: as asked");
    let id = asked["id"].as_str().unwrap();
    let (_, read) = json_of(app.get(&format!("/questions/{id}")).await).await;
    assert_eq!(names(&read), ["zone", "approve", "mode"], "read back from jsonb in the asker's order");

    let mcp = Mcp::new(&app.mcp_url);
    let arguments = json!({"recipient": "ark://users/erin", "content": "Which?", "responseSchema": {"type": "object",
        "properties": {"size": {"type": "integer"}, "colour": {"type": "string"}}}});
    mcp.legacy("tools/call", json!({"name": "ask_question", "arguments": arguments, "task": {}})).await.result();
    let (_, listed) = json_of(app.get("/questions?recipient=ark%3A%2F%2Fusers%2Ferin").await).await;
    assert_eq!(names(&listed["items"][0]), ["size", "colour"], "{listed}");

    let page = app.get("/ui").await.text().await.unwrap();
    let at = |name: &str| page.find(&format!("name=\"field.{name}\"")).unwrap_or_else(|| panic!("{name} on the page"));
    assert!(at("zone") < at("approve") && at("approve") < at("mode"), "the page's form follows the asker's order");
}
