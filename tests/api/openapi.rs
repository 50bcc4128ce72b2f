//! The OpenAPI document: `GET /openapi.json` is OpenAPI 3.1 with every REST route (checked against the list
//! below, and by the pinned `openapi-spec-validator`), and a property-based fuzzer (`schemathesis`, pinned)
//! run against a real broker process from that document finds no 5xx and no response that does not conform
//! to it. The Python tools live in tests/openapi/.venv: the two tests that need them are ignored by plain
//! `cargo test`, and ./scripts/test installs the venv and runs them.

use std::{
    collections::{BTreeSet, HashSet},
    path::{Path, PathBuf},
    time::Duration,
};

use serde_json::Value;

use crate::support::{Replica, TestApp, fresh_database, json_of};

/// Every REST route the router serves: (method, path template). `/ui…` (HTML) and `/mcp` (JSON-RPC, its own
/// port) are not in the document.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/"),
    ("get", "/health"),
    ("get", "/readyz"),
    ("get", "/metrics"),
    ("get", "/openapi.json"),
    ("get", "/messages"),
    ("post", "/messages"),
    ("delete", "/messages"),
    ("get", "/memory-status"),
    ("get", "/conversations"),
    ("post", "/conversations"),
    ("delete", "/conversations"),
    ("get", "/conversations/{id}"),
    ("delete", "/conversations/{id}"),
    ("delete", "/conversations/{conversation_id}/queries/{query_id}/messages"),
    ("delete", "/queries/{query_id}/messages"),
    ("get", "/events"),
    ("post", "/events"),
    ("delete", "/events"),
    ("get", "/events/{query_id}"),
    ("delete", "/events/{query_id}"),
    ("get", "/sessions"),
    ("post", "/sessions"),
    ("delete", "/sessions"),
    ("get", "/sessions/{id}"),
    ("delete", "/sessions/queries/{queryName}"),
    ("post", "/v1/traces"),
    ("get", "/traces"),
    ("delete", "/traces"),
    ("get", "/traces/{id}"),
    ("get", "/stream"),
    ("delete", "/stream"),
    ("get", "/stream/{id}"),
    ("post", "/stream/{id}"),
    ("post", "/stream/{id}/complete"),
    ("get", "/questions"),
    ("post", "/questions"),
    ("get", "/questions/{id}"),
    ("patch", "/questions/{id}"),
    ("delete", "/questions/{id}"),
    ("post", "/questions/{id}/answer"),
    ("post", "/questions/{id}/decline"),
    ("get", "/questions/{id}/history"),
    ("get", "/queries/{query_id}/{name}/state"),
    ("put", "/queries/{query_id}/{name}/tool-calls/{tool_call_id}"),
    ("post", "/channels/github/webhook"),
    ("post", "/channels/slack/interactions"),
    ("post", "/channels/slack/events"),
];

const METHODS: [&str; 7] = ["get", "put", "post", "delete", "patch", "head", "options"];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// tests/openapi's venv, failing the test with how to get it when it is missing.
fn openapi_venv() -> PathBuf {
    let venv = root().join("tests/openapi/.venv");
    assert!(
        venv.join("bin/schemathesis").exists() && venv.join("bin/openapi-spec-validator").exists(),
        "{} is missing: ./scripts/test installs it (or run scripts/python-venv tests/openapi)",
        venv.display()
    );
    venv
}

async fn document(app: &TestApp) -> Value {
    let response = app.get("/openapi.json").await;
    assert_eq!(response.headers()["content-type"], "application/json");
    let (status, document) = json_of(response).await;
    assert_eq!(status, 200);
    document
}

fn operations(document: &Value) -> impl Iterator<Item = (&str, &str, &Value)> {
    let paths = document["paths"].as_object().expect("paths");
    paths.iter().flat_map(|(path, item)| {
        METHODS.into_iter().filter_map(move |method| item.get(method).map(|op| (method, path.as_str(), op)))
    })
}

#[tokio::test]
async fn the_document_is_openapi_3_1_with_every_rest_route_and_the_error_body() {
    let app = TestApp::spawn().await;
    let document = document(&app).await;
    assert!(document["openapi"].as_str().unwrap().starts_with("3.1."), "{}", document["openapi"]);
    assert_eq!(document["info"]["version"], env!("CARGO_PKG_VERSION"));
    // Descriptions come from doc comments; their rustdoc links read as plain code.
    let text = document.to_string();
    assert!(!text.contains("[`") && !text.contains("crate::"), "a rustdoc link in a description");

    let served: BTreeSet<(&str, &str)> = operations(&document).map(|(method, path, _)| (method, path)).collect();
    let expected: BTreeSet<(&str, &str)> = ROUTES.iter().copied().collect();
    assert_eq!(served, expected, "the document's operations are the router's REST routes");
    assert_eq!(document["paths"].as_object().unwrap().len(), 32);
    let ids: Vec<&str> = operations(&document).map(|(_, _, op)| op["operationId"].as_str().unwrap()).collect();
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len(), "operation ids are unique: {ids:?}");

    let op = |method: &str, path: &str| document["paths"][path][method].clone();
    // Every operation answers errors in the documented body, including those of the layers in front of it.
    let body_of = |response: &Value| response["content"]["application/json"]["schema"]["$ref"].clone();
    for (method, path, operation) in operations(&document) {
        assert_eq!(body_of(&operation["responses"]["500"]), "#/components/schemas/ErrorBody", "{method} {path}");
        // Open with `--auth` on: the probes and the scrape; the channels' routes answer 401 to a bad signature.
        let probe = ["/health", "/readyz", "/metrics"].contains(&path);
        assert_eq!(operation["responses"].get("401").is_some(), !probe, "401 on {method} {path}");
    }
    let error = &document["components"]["schemas"]["ErrorObject"];
    assert_eq!(error["required"], serde_json::json!(["code", "message", "requestId", "type"]));
    assert!(document["components"]["schemas"]["ErrorCode"].to_string().contains("IDEMPOTENCY_KEY_REUSED"));
    // Media types: NDJSON in, server-sent events out, text probes and metrics.
    assert!(op("post", "/stream/{id}")["requestBody"]["content"]["application/x-ndjson"].is_object());
    assert!(op("get", "/stream/{id}")["responses"]["200"]["content"]["text/event-stream"].is_object());
    let questions = &op("get", "/questions")["responses"]["200"]["content"];
    assert!(questions["application/json"].is_object() && questions["text/event-stream"].is_object());
    for probe in ["/health", "/readyz", "/metrics"] {
        assert!(op("get", probe)["responses"]["200"]["content"]["text/plain"].is_object(), "{probe}");
    }
    assert!(op("get", "/readyz")["responses"]["503"]["content"]["text/plain"].is_object());
    // Query parameters with their constraints.
    let limit = op("get", "/messages")["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .cloned()
        .expect("a limit parameter");
    assert_eq!(
        (limit["in"].as_str(), &limit["schema"]["minimum"], &limit["schema"]["maximum"]),
        (Some("query"), &1.into(), &1000.into())
    );
    // The answer's 409 carries the question as it is.
    let conflict = &op("patch", "/questions/{id}")["responses"]["409"]["content"]["application/json"]["schema"];
    assert_eq!(conflict["$ref"], "#/components/schemas/QuestionConflict");
}

#[tokio::test]
#[ignore = "needs Python with openapi-spec-validator (tests/openapi): ./scripts/test installs it and runs it"]
async fn the_pinned_validator_accepts_the_document_as_openapi_3_1() {
    let venv = openapi_venv();
    let app = TestApp::spawn().await;
    let document = document(&app).await;
    // Removed when dropped, also if the validator cannot be run.
    let file = tempfile::Builder::new().prefix("ark-broker-openapi-").suffix(".json").tempfile().unwrap();
    std::fs::write(file.path(), serde_json::to_vec_pretty(&document).unwrap()).unwrap();
    let output = tokio::process::Command::new(venv.join("bin/openapi-spec-validator"))
        .args(["--schema", "3.1", "--validation-errors", "all"])
        .arg(file.path())
        .output()
        .await
        .expect("run openapi-spec-validator");
    drop(file);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("OK"),
        "openapi-spec-validator refused the document:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Schemathesis against one broker process: the document's examples, the coverage phase (boundary and invalid
/// values of every parameter and body), fuzzing (a fixed number of examples per operation, repeated while the
/// time budget lasts) and stateful sequences along the document's links (a question created, then read,
/// answered twice, cancelled; chunks posted, then the stream completed and read; …); deterministic
/// generation, four workers (most of the time goes to waiting on server-sent event streams, not to the cores). Checks: no
/// 5xx (`not_a_server_error`), and every response's status, media type and body are what the document says
/// (`status_code_conformance`, `content_type_conformance`, `response_schema_conformance`). Nothing is excluded:
/// the purges only empty the run's own database, server-sent event streams (watches, chunk streams) are read
/// for a second and cut (tests/openapi/schemathesis.toml), and most webhook calls are signed (hooks.py).
#[tokio::test]
#[ignore = "needs Python with schemathesis (tests/openapi): ./scripts/test installs it and runs it"]
async fn schemathesis_finds_no_server_error_and_no_response_that_does_not_conform() {
    // A bound, not a budget: the deterministic cases take about 90 s on two idle cores; a loaded machine needs
    // longer, and a run cut short by the limit fails the count below.
    const FUZZ_SECONDS: u64 = 240;
    let venv = openapi_venv();
    let url = fresh_database().await;
    // Slack and GitHub configured, their APIs nowhere (a closed port), so tests/openapi/hooks.py can sign the
    // fuzzer's webhook calls and they reach the payload handling.
    let secret = "fuzz-webhook-secret";
    let nowhere = "http://127.0.0.1:9";
    let channels = [
        ["--slack-signing-secret", secret, "--slack-bot-token", "xoxb-fuzz", "--slack-api-url", nowhere],
        ["--github-webhook-secret", secret, "--github-token", "fuzz", "--github-api-url", nowhere],
    ];
    let broker = Replica::start_with(&url, &channels.concat()).await;
    let run = || {
        tokio::process::Command::new(venv.join("bin/schemathesis"))
            .current_dir(root().join("tests/openapi"))
            .env("SCHEMATHESIS_HOOKS", "hooks")
            .env("WEBHOOK_SECRET", secret)
            .env("PYTHONPATH", root().join("tests/openapi"))
            .args(["--config-file", "schemathesis.toml", "--no-color", "run"])
            .arg(broker.url("/openapi.json"))
            .args([
                "--phases",
                "examples,coverage,fuzzing,stateful",
                "--max-examples",
                "15",
                "--generation-deterministic",
            ])
            .args([
                "--checks",
                "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            ])
            .args(["--workers", "4", "--suppress-health-check", "all", "--max-time", &FUZZ_SECONDS.to_string()])
            .kill_on_drop(true)
            .output()
    };
    let mut output = tokio::time::timeout(Duration::from_secs(FUZZ_SECONDS + 60), run())
        .await
        .expect("schemathesis finished within its time limit")
        .expect("run schemathesis");
    // CPython 3.11 before 3.11.8 may fail `ast.parse` when threads call it at once (python/cpython#106905),
    // which Hypothesis does while naming strategies: a crash of the tool, not a finding about the broker. Such
    // a run, with no failure of the broker's in it, is made once more.
    let report = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success()
        && report.contains("AST constructor recursion depth mismatch")
        && !report.contains("=== FAILURES ===")
    {
        eprintln!("schemathesis crashed in CPython's ast module (python/cpython#106905); running it again");
        output = tokio::time::timeout(Duration::from_secs(FUZZ_SECONDS + 60), run())
            .await
            .expect("schemathesis finished within its time limit")
            .expect("run schemathesis");
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // CI keeps the tail of a failure's output: the broker's warnings and errors first, schemathesis' report
    // (its failures, each with a curl command that replays it) last.
    let broker_log = broker.log();
    let broker_warnings: Vec<&str> = broker_log.lines().filter(|line| !line.contains(r#""level":"INFO""#)).collect();
    assert!(
        output.status.success(),
        "the broker's warnings and errors:\n{}\nschemathesis found failures:\n{stderr}\n{stdout}",
        broker_warnings.join("\n")
    );
    // "Test cases:\n  3943 generated, 3943 passed": it ran, and every case passed.
    let counts = stdout.lines().find(|line| line.contains(" generated, ")).unwrap_or_default();
    let numbers: Vec<u64> = counts.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok()).collect();
    assert!(
        matches!(numbers[..], [generated, passed] if generated > 1000 && passed == generated),
        "schemathesis did not run and pass its cases:\n{stdout}"
    );
}
