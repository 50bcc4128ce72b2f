//! Slack as the tests play it against broker replicas: requests signed as Slack signs them, the payloads it
//! posts (interactions, Events API callbacks, button clicks), and waiting for what the broker sent the fake
//! Slack Web API ([`super::fake_channels`]).

use hmac::{KeyInit, Mac};
use serde_json::{Value, json};

use super::{
    Replica,
    fake_channels::{FakeApi, SLACK_TOKEN},
    fresh_database, json_of, settled, within,
};

/// The signing secret the replicas of [`three_replicas`] are started with.
pub const SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// Three replicas delivering to and answering from the fake Slack.
pub async fn three_replicas(slack: &FakeApi) -> (Replica, Replica, Replica) {
    let url = fresh_database().await;
    let args = [
        "--slack-bot-token",
        SLACK_TOKEN,
        "--slack-api-url",
        &slack.url,
        "--slack-signing-secret",
        SECRET,
        "--mcp-progress-interval-ms",
        "60000",
    ];
    Replica::three(&url, &args).await
}

/// `X-Slack-Signature` for `body` sent at `timestamp`, with `secret`.
pub fn sign(secret: &str, timestamp: i64, body: &str) -> String {
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// Sends `body` to `path` on `replica` as Slack would: signed now with [`SECRET`].
pub async fn from_slack(
    replica: &Replica,
    path: &str,
    content_type: &str,
    body: String,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    from_slack_at(&replica.base, path, content_type, body, headers).await
}

/// [`from_slack`] to the broker at `base`.
pub async fn from_slack_at(
    base: &str,
    path: &str,
    content_type: &str,
    body: String,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let now = chrono::Utc::now().timestamp();
    let mut request = reqwest::Client::new()
        .post(format!("{base}{path}"))
        .header("content-type", content_type)
        .header("x-slack-request-timestamp", now.to_string())
        .header("x-slack-signature", sign(SECRET, now, &body));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.body(body).send().await.unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// An interaction payload, form-encoded as Slack posts it.
pub async fn interaction(replica: &Replica, payload: &Value) -> (u16, Value) {
    retried_interaction(replica, payload, &[]).await
}

/// An interaction payload as Slack posts it, with `headers` (Slack's copy: `X-Slack-Retry-Num`).
pub async fn retried_interaction(replica: &Replica, payload: &Value, headers: &[(&str, &str)]) -> (u16, Value) {
    let body = serde_urlencoded::to_string([("payload", payload.to_string())]).unwrap();
    from_slack(replica, "/channels/slack/interactions", "application/x-www-form-urlencoded", body, headers).await
}

/// The Events API callback of `event`, with id `id`.
pub fn event_callback(id: &str, event: Value) -> Value {
    json!({"token": "legacy", "team_id": "T1", "type": "event_callback", "event_id": id,
           "event_time": 1_700_000_000, "event": event})
}

/// An Events API callback.
pub async fn event(replica: &Replica, id: &str, event: Value, retry: Option<&str>) -> (u16, Value) {
    let body = event_callback(id, event);
    let headers: Vec<(&str, &str)> = retry.map(|n| ("x-slack-retry-num", n)).into_iter().collect();
    from_slack(replica, "/channels/slack/events", "application/json", body.to_string(), &headers).await
}

/// Asks a question delivered to `slack:#ops` on `replica`; returns its id and the posted message.
pub async fn ask_on_slack(replica: &Replica, slack: &FakeApi, content: &str) -> (String, Value) {
    let question = json!({"sender": "ark://agents/deployer", "recipient": "ark://teams/ops", "content": content,
                          "channels": ["slack:#ops"], "options": ["Yes, proceed", "No, cancel"]});
    ask_with(replica, slack, &reqwest::Client::new(), question).await
}

/// Asks a typed question (`schema`) delivered to `slack:#ops` on `replica`; returns its id and the message.
pub async fn ask_typed_on_slack(replica: &Replica, slack: &FakeApi, content: &str, schema: Value) -> (String, Value) {
    let question = json!({"sender": "ark://agents/deployer", "recipient": "ark://teams/ops", "content": content,
                          "channels": ["slack:#ops"], "responseSchema": schema});
    ask_with(replica, slack, &reqwest::Client::new(), question).await
}

/// Asks `question` (which names `slack:#ops`) on `replica` with `client`; returns its id and the posted
/// message once its delivery is recorded.
pub async fn ask_with(
    replica: &Replica,
    slack: &FakeApi,
    client: &reqwest::Client,
    question: Value,
) -> (String, Value) {
    let (status, question) =
        json_of(client.post(replica.url("/questions")).json(&question).send().await.unwrap()).await;
    assert_eq!(status, 201, "{question}");
    let id = question["id"].as_str().unwrap().to_owned();
    let message = within("the question in Slack", async {
        loop {
            let posted = slack.messages().into_iter().find(|m| m["blocks"].to_string().contains(&id));
            if let Some(message) = posted {
                return message;
            }
            slack.wait_for(slack.messages().len() + 1, false).await;
        }
    })
    .await;
    // Slack's callbacks name the message: it must be recorded as the question's before they come.
    let deliveries = settled(client, &replica.url(&format!("/questions/{id}"))).await;
    assert_eq!(deliveries[0]["status"], "delivered", "{deliveries:?}");
    (id, message)
}

/// The `block_id` of the block of `blocks` whose text or label says `label` (a field of a typed question).
pub fn block_of(blocks: &Value, label: &str) -> String {
    let found = blocks.as_array().unwrap().iter().find(|b| {
        b["label"]["text"] == label || b["text"]["text"].as_str().is_some_and(|t| t.starts_with(&format!("*{label}*")))
    });
    found.unwrap_or_else(|| panic!("no block labelled {label} in {blocks}"))["block_id"].as_str().unwrap().to_owned()
}

/// The option titled `title` of the element of block `block_id` of `blocks`, as Slack sends a selected one.
pub fn option_of(blocks: &Value, block_id: &str, title: &str) -> Value {
    let block = blocks.as_array().unwrap().iter().find(|b| b["block_id"] == block_id).unwrap();
    let element = if block["element"].is_null() { &block["accessory"] } else { &block["element"] };
    let options = element["options"].as_array().unwrap();
    options
        .iter()
        .find(|o| o["text"]["text"] == title)
        .unwrap_or_else(|| panic!("no option {title} in {element}"))
        .clone()
}

/// The `view_submission` of `view` (as `views.open` got it) by `user`, its inputs at `values` (`state.values`).
pub fn submission(slack: &FakeApi, view: &Value, user: &str, values: Value) -> Value {
    json!({"type": "view_submission", "user": {"id": user, "username": user.to_lowercase()}, "team": {"id": "T1"},
           "api_app_id": "A1", "trigger_id": slack.trigger(),
           "view": {"id": "V0FAKE", "team_id": "T1", "type": "modal", "callback_id": view["callback_id"],
                    "private_metadata": view["private_metadata"], "blocks": view["blocks"], "title": view["title"],
                    "state": {"values": values}, "hash": "1700000000.abcd"}})
}

/// A click on button `action_id` (value `value`) of `message` by `user`.
pub fn click(slack: &FakeApi, message: &Value, user: &str, action_id: &str, value: &str) -> Value {
    json!({"type": "block_actions", "user": {"id": user, "username": user.to_lowercase()}, "team": {"id": "T1"},
           "trigger_id": slack.trigger(), "response_url": slack.response_url(user),
           "container": {"type": "message", "message_ts": message["ts"], "channel_id": message["channelId"]},
           "channel": {"id": message["channelId"]}, "message": {"ts": message["ts"], "text": message["text"]},
           "actions": [{"type": "button", "action_id": action_id, "block_id": "b", "value": value,
                        "action_ts": "1700000001.000200"}]})
}

/// A click on the Submit button of `message` (a typed question's form in the message) by `user`, with the
/// message's inputs at `values`, as Slack sends it (`state.values`).
pub fn submit(slack: &FakeApi, message: &Value, user: &str, id: &str, values: Value) -> Value {
    let mut clicked = click(slack, message, user, "submit_form", id);
    clicked["state"] = json!({"values": values});
    clicked
}

/// The `chat.update` of `message`, once made.
pub async fn updated(slack: &FakeApi, message: &Value) -> Value {
    within("the message updated", async {
        loop {
            let calls = slack.calls("chat.update");
            if let Some(update) = calls.into_iter().find(|u| u["ts"] == message["ts"]) {
                return update;
            }
            slack.wait_for_calls("chat.update", slack.calls("chat.update").len() + 1).await;
        }
    })
    .await
}

/// The question `id` as `replica` serves it.
pub async fn question(replica: &Replica, id: &str) -> Value {
    reqwest::get(replica.url(&format!("/questions/{id}"))).await.unwrap().json().await.unwrap()
}

/// A person in Slack, for a scenario run as another process: `POST {url}/reply/{question id}` (the body is the
/// text) waits for the question's message in `fake` and replies in its thread, sending Slack's event to the
/// replica at `base`; it answers with the broker's outcome.
pub async fn person(fake: FakeApi, base: String) -> String {
    use axum::{extract::Path, routing::post};
    let reply = move |Path(id): Path<String>, text: String| {
        let (fake, base) = (fake.clone(), base.clone());
        async move {
            let message = within("the question in Slack", async {
                loop {
                    if let Some(m) = fake.messages().into_iter().find(|m| m["blocks"].to_string().contains(&id)) {
                        return m;
                    }
                    fake.wait_for(fake.messages().len() + 1, false).await;
                }
            })
            .await;
            let event = json!({"type": "message", "channel": message["channelId"], "user": "U42", "text": text,
                               "ts": "1700000600.000100", "thread_ts": message["ts"], "channel_type": "channel"});
            let body = event_callback(&format!("Ev-{id}"), event).to_string();
            let (_, outcome) = from_slack_at(&base, "/channels/slack/events", "application/json", body, &[]).await;
            axum::Json(outcome)
        }
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(axum::serve(listener, axum::Router::new().route("/reply/{id}", post(reply))).into_future());
    url
}
