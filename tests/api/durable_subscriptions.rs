//! Durable Streams subscriptions beyond what the conformance suite asks, on three replica processes under
//! `--auth token`: a webhook is delivered once per wake (whichever replica's worker takes it), signed with a
//! key every replica's JWKS gives, retried after its receiver failed, and acknowledged by a callback that
//! carries only its wake's token; managing a subscription needs the broker's credential.

use std::{
    collections::VecDeque,
    io::Write,
    sync::{Arc, Mutex},
};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, routing::post};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use ring::signature::{ED25519, UnparsedPublicKey};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::support::{Replica, fresh_database, within};

const TOKEN: &str = "subscriber-secret";

/// A webhook receiver: answers each POST with the next scripted `(status, body)` (then `200 {}`), and hands
/// the test each request's `webhook-signature` and body.
struct Receiver {
    url: String,
    requests: mpsc::UnboundedReceiver<(String, Bytes)>,
}

#[derive(Clone)]
struct Script {
    answers: Arc<Mutex<VecDeque<(u16, &'static str)>>>,
    requests: mpsc::UnboundedSender<(String, Bytes)>,
}

async fn receive(State(script): State<Script>, headers: HeaderMap, body: Bytes) -> (axum::http::StatusCode, String) {
    let signature = headers.get("webhook-signature").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let _ = script.requests.send((signature, body));
    let (status, answer) = script.answers.lock().unwrap().pop_front().unwrap_or((200, "{}"));
    (axum::http::StatusCode::from_u16(status).unwrap(), answer.to_owned())
}

impl Receiver {
    async fn start(answers: &[(u16, &'static str)]) -> Self {
        let (sender, requests) = mpsc::unbounded_channel();
        let script = Script { answers: Arc::new(Mutex::new(answers.iter().copied().collect())), requests: sender };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/webhook", listener.local_addr().unwrap());
        let app = Router::new().route("/webhook", post(receive)).with_state(script);
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { url, requests }
    }

    /// The next webhook: its signature header, its body as sent, and parsed.
    async fn next(&mut self) -> (String, Bytes, Value) {
        let (signature, body) = within("a webhook", self.requests.recv()).await.expect("the receiver runs");
        let parsed = serde_json::from_slice(&body).expect("a JSON webhook");
        (signature, body, parsed)
    }

    /// Checks `signature` over `body` against the JWKS at `jwks_url`, fetched without a credential.
    async fn verify(signature: &str, body: &Value, raw: &[u8], jwks_url: &str) {
        let fields: Vec<(&str, &str)> = signature.split(',').filter_map(|part| part.split_once('=')).collect();
        let field = |name: &str| fields.iter().find(|(key, _)| *key == name).map(|(_, value)| *value).unwrap();
        let jwks: Value = reqwest::get(jwks_url).await.unwrap().json().await.unwrap();
        let key = jwks["keys"].as_array().unwrap().iter().find(|key| key["kid"] == field("kid")).expect("its key");
        let public = URL_SAFE_NO_PAD.decode(key["x"].as_str().unwrap()).unwrap();
        let mut signed = format!("{}.", field("t")).into_bytes();
        signed.extend_from_slice(raw);
        let signature_bytes = URL_SAFE_NO_PAD.decode(field("ed25519")).unwrap();
        let verified = UnparsedPublicKey::new(&ED25519, public).verify(&signed, &signature_bytes);
        assert!(verified.is_ok(), "the webhook's signature verifies: {body}");
    }
}

fn tokens_file() -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    writeln!(file, "{TOKEN} system:serviceaccount:ark:subscriber").unwrap();
    file
}

async fn three_with_auth(file: &tempfile::NamedTempFile) -> [Replica; 3] {
    let url = fresh_database().await;
    let path = file.path().to_str().unwrap();
    let flags = ["--auth", "token", "--auth-tokens-file", path, "--durable-webhook-loopback"];
    let (a, b, c) = Replica::three(&url, &flags).await;
    [a, b, c]
}

fn authed(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    request.bearer_auth(TOKEN)
}

async fn put_json(client: &reqwest::Client, url: String, body: Value) -> reqwest::Response {
    authed(client.put(url)).header("content-type", "application/json").body(body.to_string()).send().await.unwrap()
}

#[tokio::test]
async fn a_webhook_is_delivered_once_per_wake_signed_retried_and_acknowledged_by_its_token_alone() {
    let file = tokens_file();
    let [a, b, c] = three_with_auth(&file).await;
    let client = reqwest::Client::new();
    // Refused once, then taken: the wake is tried again, and its callback acknowledges it.
    let mut receiver = Receiver::start(&[(500, "{}")]).await;
    let subscription = json!({"type": "webhook", "pattern": "events/*", "webhook": {"url": receiver.url}});
    let unauthenticated = client.put(a.url("/v1/stream/__ds/subscriptions/s1")).body(subscription.to_string());
    assert_eq!(unauthenticated.send().await.unwrap().status(), 401, "managing a subscription needs a credential");
    let created = put_json(&client, a.url("/v1/stream/__ds/subscriptions/s1"), subscription).await;
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    let jwks_url = created["webhook"]["signing"]["jwks_url"].as_str().unwrap().to_owned();
    assert_eq!(jwks_url, a.url("/v1/stream/__ds/jwks.json"));

    let written = put_json(&client, b.url("/v1/stream/events/e1"), json!({"n": 1})).await;
    assert_eq!(written.status(), 201);
    let (signature, raw, first) = receiver.next().await;
    Receiver::verify(&signature, &first, &raw, &c.url("/v1/stream/__ds/jwks.json")).await;
    let (_, _, retried) = receiver.next().await;
    assert_eq!((&retried["wake_id"], &retried["generation"]), (&first["wake_id"], &json!(1)), "the same wake again");
    let stream = &retried["streams"][0];
    assert_eq!(
        (&stream["path"], &stream["acked_offset"], &stream["has_pending"]),
        (&json!("events/e1"), &json!("-1"), &json!(true))
    );

    // Written again while the wake is out: no second wake until this one is acknowledged.
    let appended = authed(client.post(c.url("/v1/stream/events/e1")))
        .header("content-type", "application/json")
        .body(r#"{"n": 2}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(appended.status(), 204);
    let callback = |body: Value| {
        client
            .post(retried["callback_url"].as_str().unwrap())
            .bearer_auth(retried["callback_token"].as_str().unwrap())
            .json(&body)
            .send()
    };
    let acks = json!([{"stream": "events/e1", "offset": stream["tail_offset"]}]);
    let body = json!({"wake_id": retried["wake_id"], "generation": 1, "acks": acks, "done": true});
    let answered = callback(body.clone()).await.unwrap();
    assert_eq!(answered.status(), 200, "the wake's token is the callback's only credential");
    assert_eq!(answered.json::<Value>().await.unwrap(), json!({"ok": true, "next_wake": true}), "n=2 is pending");
    assert_eq!(callback(body).await.unwrap().status(), 409, "the wake was let go: fenced");

    // The next wake tells of the second append only, as acknowledged up to the first.
    let (_, _, next) = receiver.next().await;
    assert_eq!(next["generation"], 2);
    assert_eq!(next["streams"][0]["acked_offset"], stream["tail_offset"]);
    assert_ne!(next["streams"][0]["tail_offset"], stream["tail_offset"]);
    let forged = client
        .post(next["callback_url"].as_str().unwrap())
        .bearer_auth(TOKEN)
        .json(&json!({"wake_id": next["wake_id"], "generation": 2, "acks": [], "done": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(forged.status(), 401, "the broker's own credential is not a wake's token");
    let error: Value = forged.json().await.unwrap();
    assert_eq!(error["error"]["code"], "TOKEN_INVALID");
}

#[tokio::test]
async fn a_replica_at_its_defaults_refuses_webhooks_to_its_own_loopback() {
    let url = fresh_database().await;
    let replica = Replica::start(&url).await;
    let client = reqwest::Client::new();
    for webhook in ["http://127.0.0.1:15000/quitquitquit", "http://localhost/hook", "https://10.0.0.1/hook"] {
        let body = json!({"type": "webhook", "pattern": "events/*", "webhook": {"url": webhook}});
        let refused = client.put(replica.url("/v1/stream/__ds/subscriptions/s")).json(&body).send().await.unwrap();
        assert_eq!(refused.status(), 400, "{webhook}");
        let error: Value = refused.json().await.unwrap();
        assert_eq!(error["error"]["code"], "WEBHOOK_URL_REJECTED", "{webhook}");
    }
    let absent = client.get(replica.url("/v1/stream/__ds/subscriptions/s")).send().await.unwrap();
    assert_eq!(absent.status(), 404, "nothing stored");
}
