//! The request bodies the routes read by hand — GitHub's and Slack's payloads, OTLP/JSON, an event's
//! `ttl_seconds` and `data` strings — held to what `GET /openapi.json` shows: every payload the suite sends and
//! every documented example fits the documented schema, and its route takes it (the outcome shows the fields
//! were read). The fields each parser reads are held to the document by the unit tests beside the parsers.

use serde_json::{Value, json};

use crate::support::{
    TestApp,
    fake_channels::{FakeApi, SLACK_TOKEN},
    github::{deliver, issue_comment},
    json_of,
    slack::{click, event_callback, from_slack_at, submission, submit},
};

const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// Whether `value` fits `schema` as JSON Schema reads it, for the keywords the document uses; a keyword this
/// does not know fails, so a new kind of constraint is not passed over. `at` names the place, for the message.
fn fits(document: &Value, schema: &Value, value: &Value, at: &str) -> Result<(), String> {
    const NOTES: [&str; 5] = ["description", "example", "examples", "title", "format"];
    let schema = match schema["$ref"].as_str().and_then(|r| r.strip_prefix("#/components/schemas/")) {
        Some(name) => &document["components"]["schemas"][name],
        None => schema,
    };
    for (keyword, rule) in schema.as_object().ok_or(format!("{at}: no schema"))? {
        match keyword.as_str() {
            "type" => {
                let types: Vec<&str> = match rule {
                    Value::Array(types) => types.iter().filter_map(Value::as_str).collect(),
                    other => other.as_str().into_iter().collect(),
                };
                if !types.iter().any(|t| is_a(value, t)) {
                    return Err(format!("{at}: {value} is no {types:?}"));
                }
            }
            "properties" if value.is_object() => {
                for (name, property) in rule.as_object().unwrap() {
                    if let Some(field) = value.get(name) {
                        fits(document, property, field, &format!("{at}.{name}"))?;
                    }
                }
            }
            "required" if value.is_object() => {
                if let Some(missing) =
                    rule.as_array().unwrap().iter().find(|n| value.get(n.as_str().unwrap()).is_none())
                {
                    return Err(format!("{at}: {missing} is missing"));
                }
            }
            "items" if value.is_array() => {
                for (n, item) in value.as_array().unwrap().iter().enumerate() {
                    fits(document, rule, item, &format!("{at}[{n}]"))?;
                }
            }
            "allOf" => {
                for part in rule.as_array().unwrap() {
                    fits(document, part, value, at)?;
                }
            }
            "oneOf" => {
                let (fitting, misfits): (Vec<_>, Vec<_>) =
                    rule.as_array().unwrap().iter().map(|s| fits(document, s, value, at)).partition(Result::is_ok);
                if fitting.len() != 1 {
                    let why: Vec<String> = misfits.into_iter().filter_map(Result::err).collect();
                    return Err(format!("{at}: fits {} of oneOf ({})", fitting.len(), why.join("; ")));
                }
            }
            "minLength" | "maxLength" if value.is_string() => {
                let (length, bound) = (value.as_str().unwrap().chars().count() as u64, rule.as_u64().unwrap());
                if (keyword == "minLength" && length < bound) || (keyword == "maxLength" && length > bound) {
                    return Err(format!("{at}: {length} characters, {keyword} {bound}"));
                }
            }
            "minimum" | "maximum" if value.is_number() => {
                let (number, bound) = (value.as_f64().unwrap(), rule.as_f64().unwrap());
                if (keyword == "minimum" && number < bound) || (keyword == "maximum" && number > bound) {
                    return Err(format!("{at}: {number}, {keyword} {bound}"));
                }
            }
            "properties" | "required" | "items" | "minLength" | "maxLength" | "minimum" | "maximum" => {}
            note if NOTES.contains(&note) => {}
            other => return Err(format!("{at}: the check does not know `{other}`")),
        }
    }
    Ok(())
}

fn is_a(value: &Value, json_type: &str) -> bool {
    match json_type {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "string" => value.is_string(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

/// The documented schema of the `content_type` request body of `POST path`.
fn body_schema<'a>(document: &'a Value, path: &str, content_type: &str) -> &'a Value {
    &document["paths"][path]["post"]["requestBody"]["content"][content_type]["schema"]
}

/// The document `app` serves.
async fn document_of(app: &TestApp) -> Value {
    json_of(app.get("/openapi.json").await).await.1
}

/// Fails unless `payload` fits the documented body of `POST path`.
fn assert_fits(document: &Value, path: &str, content_type: &str, payload: &Value) {
    let schema = body_schema(document, path, content_type);
    assert!(schema.is_object(), "POST {path} documents no {content_type} body");
    if let Err(why) = fits(document, schema, payload, "body") {
        panic!("a payload for POST {path} does not fit its documented body: {why}\n{payload}");
    }
}

/// The `example` of the documented body of `POST path`.
fn example(document: &Value, path: &str, content_type: &str) -> Value {
    let schema = body_schema(document, path, content_type);
    let name = schema["$ref"].as_str().unwrap().trim_start_matches("#/components/schemas/");
    document["components"]["schemas"][name]["example"].clone()
}

#[test]
fn the_check_refuses_what_does_not_fit() {
    let document = json!({"components": {"schemas": {"S": {"type": "object", "required": ["n"],
        "properties": {"n": {"type": "integer", "minimum": 1}, "s": {"oneOf": [{"type": "null"}, {"type": "string", "maxLength": 2}]}}}}}});
    let schema = json!({"$ref": "#/components/schemas/S"});
    assert_eq!(fits(&document, &schema, &json!({"n": 1, "s": "ab", "other": true}), "body"), Ok(()));
    for wrong in [json!({}), json!({"n": 0}), json!({"n": "1"}), json!({"n": 1, "s": "abc"}), json!([])] {
        assert!(fits(&document, &schema, &wrong, "body").is_err(), "{wrong} fits");
    }
    let unknown = json!({"type": "string", "pattern": "^a$"});
    assert!(fits(&document, &unknown, &json!("a"), "body").unwrap_err().contains("pattern"));
}

/// A broker taking Slack's and GitHub's calls, answering Slack through `slack`.
async fn channels_app(slack: &FakeApi) -> TestApp {
    TestApp::spawn_with(|config| {
        config.channels.slack_bot_token = Some(SLACK_TOKEN.parse().unwrap());
        config.channels.slack_signing_secret = Some(SECRET.parse().unwrap());
        config.channels.slack_api_url = slack.url.clone();
        config.channels.github_webhook_secret = Some(SECRET.parse().unwrap());
    })
    .await
}

#[tokio::test]
async fn githubs_deliveries_fit_the_documented_body_and_are_taken() {
    let slack = FakeApi::slack().await;
    let app = channels_app(&slack).await;
    let document = document_of(&app).await;
    let path = "/channels/github/webhook";
    // The suite's deliveries (channels.rs, github_typed.rs), and the document's example.
    let cases = [
        ("ping", json!({"zen": "Keep it logically awesome."}), "pong"),
        ("issue_comment", issue_comment("/answer yes", "octocat", "User"), "ignored: no question was asked here"),
        ("issue_comment", issue_comment("/answer yes", "ark-broker[bot]", "Bot"), "ignored: a bot's comment"),
        ("issue_comment", issue_comment("Looks good to me", "octocat", "User"), "ignored: not an /answer"),
        ("issue_comment", example(&document, path, "application/json"), "ignored: no question was asked here"),
    ];
    for (n, (event, payload, outcome)) in cases.into_iter().enumerate() {
        assert_fits(&document, path, "application/json", &payload);
        let (status, reply) = deliver(&app.url(path), event, &format!("d-{n}"), &payload, SECRET).await;
        assert_eq!((status, reply["outcome"].as_str()), (200, Some(outcome)), "{payload}: {reply}");
    }
}

#[tokio::test]
async fn slacks_events_fit_the_documented_body_and_are_taken() {
    let slack = FakeApi::slack().await;
    let app = channels_app(&slack).await;
    let document = document_of(&app).await;
    let path = "/channels/slack/events";
    // The suite's events (slack.rs, slack_socket.rs, channel_policy.rs), and the document's example.
    let reply = json!({"type": "message", "channel": "C0001", "user": "U7", "text": "us-east-1",
                       "ts": "1700000500.000100", "thread_ts": "1700000000.000100", "channel_type": "channel"});
    let mut bot = reply.clone();
    bot["bot_id"] = json!("B01");
    bot["subtype"] = json!("bot_message");
    let cases = [
        (event_callback("Ev-1", reply), "ignored: not a question's thread"),
        (event_callback("Ev-2", bot), "ignored: not a person's message"),
        (event_callback("Ev-3", json!({"type": "message"})), "ignored: not a reply in a thread"),
        (example(&document, path, "application/json"), "ignored: not a question's thread"),
    ];
    for (payload, outcome) in cases {
        assert_fits(&document, path, "application/json", &payload);
        let (status, reply) = from_slack_at(&app.base, path, "application/json", payload.to_string(), &[]).await;
        assert_eq!((status, reply["outcome"].as_str()), (200, Some(outcome)), "{payload}: {reply}");
    }
    let challenge = json!({"token": "legacy", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
                           "type": "url_verification"});
    assert_fits(&document, path, "application/json", &challenge);
    let (status, reply) = from_slack_at(&app.base, path, "application/json", challenge.to_string(), &[]).await;
    assert_eq!((status, &reply["challenge"]), (200, &challenge["challenge"]));
}

#[tokio::test]
async fn slacks_interactions_fit_the_documented_form_and_are_taken() {
    let slack = FakeApi::slack().await;
    let app = channels_app(&slack).await;
    let document = document_of(&app).await;
    let (path, form) = ("/channels/slack/interactions", "application/x-www-form-urlencoded");
    // The suite's interactions (support/slack.rs) on a question that is gone, and the document's example.
    let message = json!({"ts": "1700000000.000100", "channelId": "C0001", "text": "Which region?"});
    let view = json!({"callback_id": "answer", "private_metadata": "q-gone", "blocks": [],
                      "title": {"type": "plain_text", "text": "Answer the question"}});
    let text = json!({"answer": {"text": {"type": "plain_text_input", "value": "Yes"}}});
    let example = example(&document, path, form);
    let cases = [
        (click(&slack, &message, "U1", "option:0", "q-gone|0").to_string(), json!("not found")),
        (click(&slack, &message, "U1", "answer_modal", "q-gone").to_string(), json!("not found")),
        (submit(&slack, &message, "U1", "q-gone", json!({})).to_string(), json!("not found")),
        (submission(&slack, &view, "U1", text).to_string(), Value::Null),
        (example["payload"].as_str().unwrap().to_owned(), json!("not found")),
    ];
    for (payload, outcome) in cases {
        let body = serde_urlencoded::to_string([("payload", &payload)]).unwrap();
        let fields: serde_json::Map<String, Value> = serde_urlencoded::from_str::<Vec<(String, String)>>(&body)
            .unwrap()
            .into_iter()
            .map(|(name, value)| (name, Value::String(value)))
            .collect();
        assert_fits(&document, path, form, &Value::Object(fields));
        let (status, reply) = from_slack_at(&app.base, path, form, body, &[]).await;
        assert_eq!((status, &reply["outcome"]), (200, &outcome), "{payload}: {reply}");
        if outcome.is_null() {
            assert_eq!(reply["response_action"], "errors", "the modal is told the question is gone: {reply}");
        }
    }
}

#[tokio::test]
async fn otlp_json_exports_fit_the_documented_body_and_are_taken() {
    let app = TestApp::spawn().await;
    let document = document_of(&app).await;
    // The suite's exports (traces.rs, observability.rs, traces/otlp_tests.rs).
    let cases = [
        crate::traces::export_of(&[("trace-1", json!({"stringValue": "session-123"})), ("trace-2", json!("s"))]),
        json!({"resourceSpans": [{"scopeSpans": [{"spans": [
            {"traceId": "t-1", "spanId": "a", "name": "one"}, {"traceId": "t-1", "spanId": "b", "name": "two"}]}]}]}),
        json!({"resourceSpans": [{
            "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
            "scopeSpans": [{"spans": [{"traceId": "trace-3", "spanId": "span-1", "name": "n", "kind": 2,
                "startTimeUnixNano": "1763892000123456789", "endTimeUnixNano": 1_763_892_001_000_000_000_u64,
                "status": {"code": 1}, "ignored": true, "attributes": [{"key": "ark.session.id", "value": "plain"}]}]}],
        }]}),
    ];
    for payload in cases {
        assert_fits(&document, "/v1/traces", "application/json", &payload);
        let (status, reply) = json_of(app.post_json("/v1/traces", &payload).await).await;
        assert_eq!((status, reply), (200, json!({})), "{payload}");
    }
}

#[tokio::test]
async fn events_fit_the_documented_body_and_are_taken() {
    let app = TestApp::spawn().await;
    let document = document_of(&app).await;
    // The suite's events (events.rs, sessions.rs, observability.rs).
    let mut emitted = crate::events::event("uid-1", "QueryExecutionStart", "s-1");
    emitted["ttl_seconds"] = json!(3600);
    let extra = json!({"conversationId": "conv-1", "tool": "search", "error": "timed out"});
    let cases = [emitted, crate::sessions::controller_event("s-2", "q1", "ToolCallComplete", extra)];
    for payload in cases {
        assert_fits(&document, "/events", "application/json", &payload);
        crate::events::post_event(&app, &payload).await;
    }
}
