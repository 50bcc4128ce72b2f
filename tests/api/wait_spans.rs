//! The human wait in the asking Query's trace: a question asked with a W3C trace context (REST's `traceparent`
//! header; MCP's `_meta.traceparent` or header, in both eras) becomes, when it closes, the span `execute_tool
//! ask_question` of that trace, a child of the caller's span from the ask to the close, written once by whichever
//! replica closes it. Without a context, or with a malformed or unsampled one, there is none and the ask works.

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::{
    support::{Replica, SseReader, TestApp, fresh_database, json_of, mcp::Mcp},
    traces::{b64, segment},
};

/// A sampled context: trace `trace` (32 hex digits), the caller's span `parent` (16).
fn traceparent(trace: &str, parent: &str) -> String {
    format!("00-{trace}-{parent}-01")
}

/// The spans of trace `trace` (hex) from `base`'s `GET /traces/{id}` (the id as stored: base64), `None` on 404.
async fn trace_spans(client: &reqwest::Client, base: &str, trace: &str) -> Option<Vec<Value>> {
    let response = client.get(format!("{base}/traces/{}", segment(&b64(trace)))).send().await.unwrap();
    let (status, body) = json_of(response).await;
    match status {
        404 => None,
        200 => Some(body["spans"].as_array().unwrap().clone()),
        _ => panic!("GET /traces/{trace}: {status} {body}"),
    }
}

/// The one span of trace `trace`, failing unless there is exactly one.
async fn only_span(client: &reqwest::Client, base: &str, trace: &str) -> Value {
    let spans = trace_spans(client, base, trace).await.unwrap_or_else(|| panic!("no trace {trace}"));
    assert_eq!(spans.len(), 1, "one span per question: {spans:#?}");
    spans[0].clone()
}

fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a str> {
    let attributes = span["attributes"].as_array().unwrap();
    attributes.iter().find(|a| a["key"] == key).map(|a| a["value"]["stringValue"].as_str().expect("a string"))
}

fn time(span: &Value, field: &str) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(span[field].as_str().expect("nanoseconds as a string").parse().unwrap())
}

/// `at` lies within `[from, to]` (a few milliseconds either side for the clocks' rounding).
fn assert_between(what: &str, at: DateTime<Utc>, from: DateTime<Utc>, to: DateTime<Utc>) {
    let slack = Duration::milliseconds(5);
    assert!(from - slack <= at && at <= to + slack, "{what} {at} is not within {from} … {to}");
}

/// The wait's span under the caller's span `parent` of trace `trace`, for question `id`, that ended as `status`.
fn assert_wait_span(span: &Value, trace: &str, parent: &str, id: &str, status: &str) {
    assert_eq!(span["name"], "execute_tool ask_question");
    assert_eq!(span["kind"], "SPAN_KIND_INTERNAL");
    assert_eq!((span["traceId"].as_str(), span["parentSpanId"].as_str()), (Some(&*b64(trace)), Some(&*b64(parent))));
    let span_id = span["spanId"].as_str().unwrap();
    assert!(span_id.len() == 12 && span_id != b64(parent), "a fresh 8-byte span id: {span_id}");
    assert_eq!(attribute(span, "gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(attribute(span, "gen_ai.tool.name"), Some("ask_question"));
    assert_eq!(attribute(span, "ark.question.id"), Some(id));
    assert_eq!(attribute(span, "ark.question.recipient"), Some("ark://users/dave"));
    assert_eq!(attribute(span, "ark.question.status"), Some(status));
    assert!(time(span, "startTimeUnixNano") <= time(span, "endTimeUnixNano"), "{span}");
    let code = if matches!(status, "expired" | "cancelled") { "STATUS_CODE_ERROR" } else { "STATUS_CODE_UNSET" };
    assert_eq!(span["status"]["code"], code, "{span}");
}

fn question(extra: Value) -> Value {
    let mut body = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Deploy?"});
    body.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    body
}

/// `POST /questions` on `base` with `traceparent` as the header (if any); the new question's id.
async fn ask(client: &reqwest::Client, base: &str, traceparent: Option<&str>, body: &Value) -> String {
    let mut request = client.post(format!("{base}/questions")).json(body);
    if let Some(traceparent) = traceparent {
        request = request.header("traceparent", traceparent);
    }
    let (status, asked) = json_of(request.send().await.unwrap()).await;
    assert_eq!(status, 201, "{asked}");
    asked["id"].as_str().unwrap().to_owned()
}

async fn answer(client: &reqwest::Client, base: &str, id: &str) -> u16 {
    let body = json!({"response": "yes", "answeredBy": "dave"});
    client.post(format!("{base}/questions/{id}/answer")).json(&body).send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn a_rest_question_with_a_traceparent_answered_on_another_replica_is_a_span_of_the_callers_trace() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let (trace, parent) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    // The Query's session, as the controller's events make it.
    let event = crate::sessions::controller_event("session-7", "review-42", "QueryExecutionStart", json!({}));
    assert_eq!(client.post(a.url("/events")).json(&event).send().await.unwrap().status(), 201);
    let body = question(json!({"query": {"namespace": "team-a", "name": "review-42"}, "toolCallId": "call_7"}));
    let before_ask = Utc::now();
    let id = ask(&client, &a.base, Some(&traceparent(trace, parent)), &body).await;
    let after_ask = Utc::now();
    assert_eq!(trace_spans(&client, &b.base, trace).await, None, "nothing is written while the question waits");
    let mut watch = SseReader::open(&client, &a.url("/traces?watch=true&session_id=session-7")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    let before_answer = Utc::now();
    assert_eq!(answer(&client, &b.base, &id).await, 200);
    let after_answer = Utc::now();
    assert_eq!(answer(&client, &a.base, &id).await, 409, "a late answer changes nothing");

    let span = only_span(&client, &a.base, trace).await;
    assert_eq!(only_span(&client, &b.base, trace).await, span, "every replica serves the same span");
    let live: Value = serde_json::from_str(&watch.take_data(1).await[0]).unwrap();
    assert_eq!(live, span, "A's watchers get the span B wrote, live");
    assert_wait_span(&span, trace, parent, &id, "answered");
    assert_between("the start", time(&span, "startTimeUnixNano"), before_ask, after_ask);
    assert_between("the end", time(&span, "endTimeUnixNano"), before_answer, after_answer);
    for (key, value) in [
        ("ark.question.answered_by", "dave"),
        ("ark.question.via", "api"),
        ("ark.question.sender", "ark://agents/deployer"),
        ("gen_ai.tool.call.id", "call_7"),
        ("query.name", "review-42"),
        ("ark.query.namespace", "team-a"),
        ("ark.session.id", "session-7"),
    ] {
        assert_eq!(attribute(&span, key), Some(value), "{key}");
    }
    assert_eq!(attribute(&span, "error.type"), None);
    // The session filter finds it too.
    let (_, page) = json_of(client.get(a.url("/traces?session_id=session-7")).send().await.unwrap()).await;
    assert_eq!(page["items"][0]["traceId"], b64(trace), "{page}");
}

async fn watch_questions(app: &TestApp) -> SseReader {
    let mut watch = SseReader::open(&app.client, &app.url("/questions?watch=true")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    watch
}

/// The id of the next question created, from the watch.
async fn created(watch: &mut SseReader) -> String {
    loop {
        let frame = watch.next_frame().await.expect("the watch stays open");
        if frame.starts_with("event: question_created") {
            let data = frame.lines().find_map(|line| line.strip_prefix("data: ")).expect("data");
            return serde_json::from_str::<Value>(data).unwrap()["id"].as_str().unwrap().to_owned();
        }
    }
}

fn ask_call(content: &str, extra: Value) -> Value {
    let mut params = json!({"name": "ask_question",
                            "arguments": {"recipient": "ark://users/dave", "content": content, "toolCallId": "call_1"}});
    params.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    params
}

#[tokio::test]
async fn an_mcp_ask_with_a_trace_context_is_a_span_in_both_eras_and_the_calls_meta_wins_over_the_header() {
    let app = TestApp::spawn().await;
    let mut watch = watch_questions(&app).await;
    let client = &app.client;

    // A blocking 2025-11-25 call with `_meta.traceparent`, answered over REST.
    let (t1, p1) = ("11111111111111111111111111111111", "1111111111111111");
    let mcp = Mcp::new(&app.mcp_url).with_header("x-ark-query", "team-a/review-42");
    let call = tokio::spawn({
        let params = ask_call("blocking", json!({"_meta": {"traceparent": traceparent(t1, p1)}}));
        async move { mcp.legacy("tools/call", params).await }
    });
    let id = created(&mut watch).await;
    assert_eq!(answer(client, &app.base, &id).await, 200);
    assert_eq!(call.await.unwrap().result()["structuredContent"]["response"], "yes");
    let span = only_span(client, &app.base, t1).await;
    assert_wait_span(&span, t1, p1, &id, "answered");
    assert_eq!(attribute(&span, "gen_ai.tool.call.id"), Some("call_1"));
    assert_eq!(attribute(&span, "query.name"), Some("review-42"), "the Query from the identity header");

    // A 2025-11-25 task whose context is the request's header alone, cancelled through tasks/cancel.
    let (t2, p2) = ("22222222222222222222222222222222", "2222222222222222");
    let headed = Mcp::new(&app.mcp_url).with_header("traceparent", &traceparent(t2, p2));
    let task = headed.legacy("tools/call", ask_call("as a task", json!({"task": {}}))).await;
    let task_id = task.result()["task"]["taskId"].as_str().unwrap().to_owned();
    let id = created(&mut watch).await;
    headed.legacy("tasks/cancel", json!({"taskId": task_id})).await.result();
    let span = only_span(client, &app.base, t2).await;
    assert_wait_span(&span, t2, p2, &id, "cancelled");
    assert_eq!(attribute(&span, "error.type"), Some("cancelled"));

    // A 2026-07-28 task: the call's `_meta` context wins over the request's header.
    let ((t3, p3), (t4, p4)) = (
        ("33333333333333333333333333333333", "3333333333333333"),
        ("44444444444444444444444444444444", "4444444444444444"),
    );
    let both = Mcp::new(&app.mcp_url).with_header("traceparent", &traceparent(t4, p4));
    let params = ask_call("modern", json!({"_meta": {"traceparent": traceparent(t3, p3)}}));
    assert_eq!(both.modern("tools/call", Some("ask_question"), params, true).await.result()["resultType"], "task");
    let id = created(&mut watch).await;
    assert_eq!(answer(client, &app.base, &id).await, 200);
    assert_wait_span(&only_span(client, &app.base, t3).await, t3, p3, &id, "answered");
    assert_eq!(trace_spans(client, &app.base, t4).await, None, "the header's context is not the call's");
}

#[tokio::test]
async fn an_expired_wait_ends_in_error_once_however_many_passes_race() {
    let app = TestApp::spawn().await;
    let (trace, parent) = ("5bf92f3577b34da6a3ce929d0e0e4736", "50f067aa0ba902b7");
    let before_ask = Utc::now();
    let id =
        ask(&app.client, &app.base, Some(&traceparent(trace, parent)), &question(json!({"ttlSeconds": 600}))).await;
    let after_ask = Utc::now();
    sqlx::query("update questions set expires_at = now() - interval '1 second' where id = $1")
        .bind(&id)
        .execute(&app.pool())
        .await
        .unwrap();
    let reaper = crate::memory::reaper(&app);
    let before_expiry = Utc::now();
    tokio::join!(reaper.pass(), reaper.pass());
    let after_expiry = Utc::now();
    assert_eq!(json_of(app.get(&format!("/questions/{id}")).await).await.1["status"], "expired");
    assert_eq!(answer(&app.client, &app.base, &id).await, 409);
    let span = only_span(&app.client, &app.base, trace).await;
    assert_wait_span(&span, trace, parent, &id, "expired");
    assert_eq!(attribute(&span, "error.type"), Some("expired"));
    assert_eq!(span["status"]["message"], "question expired before anyone answered it");
    assert_between("the start", time(&span, "startTimeUnixNano"), before_ask, after_ask);
    assert_between("the end", time(&span, "endTimeUnixNano"), before_expiry, after_expiry);
}

#[tokio::test]
async fn waits_of_one_trace_closed_in_one_transaction_are_a_span_each() {
    let app = TestApp::spawn().await;
    let trace = "7bf92f3577b34da6a3ce929d0e0e4736";
    let body = question(json!({"query": {"namespace": "team-a", "name": "review-9"}}));
    let mut asked = Vec::new();
    for parent in ["7000000000000001", "7000000000000002"] {
        asked.push((parent, ask(&app.client, &app.base, Some(&traceparent(trace, parent)), &body).await));
    }
    // The controller deletes the Query: both questions are cancelled in one transaction.
    let (status, removed) = json_of(app.delete("/sessions/queries/review-9").await).await;
    assert_eq!(status, 200, "{removed}");
    let spans = trace_spans(&app.client, &app.base, trace).await.expect("the trace");
    assert_eq!(spans.len(), 2, "{spans:#?}");
    for (parent, id) in &asked {
        let span = spans.iter().find(|s| attribute(s, "ark.question.id") == Some(id)).expect("a span each");
        assert_wait_span(span, trace, parent, id, "cancelled");
        assert_eq!(attribute(span, "ark.question.via"), Some("query-deleted"));
    }
    assert_ne!(spans[0]["spanId"], spans[1]["spanId"]);
}

#[tokio::test]
async fn without_a_traceparent_or_with_a_malformed_or_unsampled_one_there_is_no_span_and_the_ask_works() {
    let app = TestApp::spawn().await;
    let (trace, parent) = ("6bf92f3577b34da6a3ce929d0e0e4736", "60f067aa0ba902b7");
    let ignored = [
        None,
        Some("garbage".to_owned()),
        Some(traceparent(&trace.to_uppercase(), parent)),
        Some(traceparent("00000000000000000000000000000000", parent)),
        Some(traceparent(trace, "0000000000000000")),
        Some(format!("ff-{trace}-{parent}-01")),
        Some(format!("00-{trace}-{parent}-01-extra")),
        Some(format!("00-{trace}-{parent}-00")),
    ];
    for traceparent in &ignored {
        let id = ask(&app.client, &app.base, traceparent.as_deref(), &question(json!({}))).await;
        assert_eq!(answer(&app.client, &app.base, &id).await, 200, "{traceparent:?}");
    }
    let mcp = Mcp::new(&app.mcp_url).with_header("traceparent", "garbage");
    for meta in [json!({"traceparent": "nonsense"}), json!({"traceparent": 42})] {
        let task = mcp.legacy("tools/call", ask_call("malformed", json!({"task": {}, "_meta": meta}))).await;
        let task_id = task.result()["task"]["taskId"].as_str().unwrap().to_owned();
        mcp.legacy("tasks/cancel", json!({"taskId": task_id})).await.result();
    }
    let spans =
        || async { sqlx::query_scalar::<_, i64>("select count(*) from spans").fetch_one(&app.pool()).await.unwrap() };
    assert_eq!(spans().await, 0);
    assert_eq!(trace_spans(&app.client, &app.base, trace).await, None);
    // The same question with a context that reads is a span: the checks above could fail.
    let id = ask(&app.client, &app.base, Some(&traceparent(trace, parent)), &question(json!({}))).await;
    assert_eq!(answer(&app.client, &app.base, &id).await, 200);
    assert_eq!(spans().await, 1);
    assert_wait_span(&only_span(&app.client, &app.base, trace).await, trace, parent, &id, "answered");
}

#[tokio::test]
#[ignore = "needs Python with the OpenTelemetry SDK (tests/otel): ./scripts/test installs it and runs it"]
async fn the_wait_sits_under_the_tool_call_span_the_opentelemetry_sdk_exported() {
    let app = TestApp::spawn().await;
    let event = crate::sessions::controller_event("session-otel", "weather-query", "QueryExecutionStart", json!({}));
    assert_eq!(app.post_json("/events", &event).await.status(), 201);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("tests/otel/.venv/bin/python");
    assert!(python.exists(), "this test needs the pinned OpenTelemetry SDK; ./scripts/test installs it");
    let mut command = tokio::process::Command::new(python);
    command.arg(root.join("tests/otel/ask_in_trace.py")).args([&app.base, "session-otel", "weather-query"]);
    let output = crate::support::within("the SDK's traced ask", command.output()).await.expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the script failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let sdk: Value = serde_json::from_str(stdout.trim()).expect("the script prints the trace");
    let (trace, call) = (sdk["traceId"].as_str().unwrap(), sdk["callSpanId"].as_str().unwrap());
    // The SDK also sets W3C level 2's random-trace-id flag (`03`): the sampled bit is what counts.
    let header = sdk["traceparent"].as_str().expect("the SDK's propagator wrote the header");
    assert!(header.starts_with(&format!("00-{trace}-{call}-")) && header.ends_with(['1', '3']), "{header}");

    let spans = trace_spans(&app.client, &app.base, trace).await.expect("the trace");
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 3, "the SDK's two spans and the broker's: {names:?}");
    let by_name = |name: &str| spans.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{name}: {names:?}"));
    let (call_span, wait) = (by_name("tools/call ask_question"), by_name("execute_tool ask_question"));
    assert_eq!(wait["parentSpanId"], call_span["spanId"], "the wait is a child of the tool call, ids alike");
    assert_eq!(wait["traceId"], call_span["traceId"]);
    assert_wait_span(wait, trace, call, sdk["questionId"].as_str().unwrap(), "answered");
    assert!(time(wait, "startTimeUnixNano") >= time(call_span, "startTimeUnixNano"), "inside the call");
    assert!(time(wait, "endTimeUnixNano") <= time(call_span, "endTimeUnixNano"), "inside the call");
    let (_, page) = json_of(app.get("/traces?session_id=session-otel").await).await;
    assert_eq!(page["items"][0]["spans"].as_array().unwrap().len(), 3, "the session's filter finds all three");
}

#[tokio::test]
#[ignore = "needs Python with the MCP SDK (tests/mcp): ./scripts/test installs it and runs it"]
async fn the_official_mcp_python_sdks_meta_context_is_traced_across_replicas() {
    let python = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/.venv/bin/python");
    assert!(python.exists(), "this test needs the pinned MCP Python SDK; ./scripts/test installs it");
    let url = fresh_database().await;
    let (a, b, c) = tokio::join!(Replica::start(&url), Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::new();
    let (trace, parent) = ("8bf92f3577b34da6a3ce929d0e0e4736", "80f067aa0ba902b7");
    let mut watch = SseReader::open(&client, &b.url("/questions?watch=true")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/ask_with_trace.py");
    let call = tokio::spawn(
        tokio::process::Command::new(&python)
            .arg(script)
            .args([&a.mcp_url, &traceparent(trace, parent), "sdk"])
            .output(),
    );
    // Asked on A, answered on B, read on C.
    let id = created(&mut watch).await;
    assert_eq!(answer(&client, &b.base, &id).await, 200);
    let output = crate::support::within("the SDK's call", call).await.unwrap().expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "the SDK's call failed: {stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let result: Value = serde_json::from_str(stdout.trim()).expect("the script prints the result");
    assert_eq!(result["structuredContent"]["response"], "yes", "{result}");
    let span = only_span(&client, &c.base, trace).await;
    assert_wait_span(&span, trace, parent, &id, "answered");
    assert_eq!(attribute(&span, "gen_ai.tool.call.id"), Some("call_sdk"));
}
