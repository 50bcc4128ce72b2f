//! GitHub as the tests play it against a broker: webhook deliveries signed as GitHub signs them, the
//! `issue_comment` payloads it sends, and the fake REST API's "create an issue comment" (served by
//! [`FakeApi::github`]).

use axum::{
    Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use hmac::{KeyInit, Mac};
use serde_json::{Value, json};

use super::{
    fake_channels::{FakeApi, GITHUB_TOKEN, header},
    json_of,
};

/// Delivers `payload` as GitHub event `event` with delivery id `delivery` to the webhook at `url`, signed
/// with `secret`.
pub async fn deliver(url: &str, event: &str, delivery: &str, payload: &Value, secret: &str) -> (u16, Value) {
    let body = payload.to_string();
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    let signature = format!("sha256={}", hex::encode(mac.finalize().into_bytes()));
    let request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("x-github-event", event)
        .header("x-github-delivery", delivery)
        .header("x-hub-signature-256", signature)
        .body(body);
    json_of(request.send().await.unwrap()).await
}

/// A new comment `text` by `login` (a `User` or a `Bot`) on issue `acme/app#7`.
pub fn issue_comment(text: &str, login: &str, kind: &str) -> Value {
    json!({"action": "created", "issue": {"number": 7}, "repository": {"full_name": "acme/app"},
           "comment": {"id": 1, "body": text, "user": {"login": login, "type": kind}, "performed_via_github_app": null},
           "sender": {"login": login}})
}

/// `POST /repos/{owner}/{repo}/issues/{number}/comments`, checked as GitHub checks it.
pub(super) async fn create_comment(
    State(fake): State<FakeApi>,
    Path((owner, repo, number)): Path<(String, String, u64)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Some(refused) = fake.refuse() {
        return refused;
    }
    let error = |status: StatusCode, message: &str| {
        (status, Json(json!({"message": message, "documentation_url": "https://docs.github.com/rest"}))).into_response()
    };
    if header(&headers, "user-agent").is_empty() {
        return error(
            StatusCode::FORBIDDEN,
            "Request forbidden by administrative rules. Please make sure your request has a User-Agent header",
        );
    }
    if header(&headers, "authorization") != format!("Bearer {GITHUB_TOKEN}") {
        return error(StatusCode::UNAUTHORIZED, "Bad credentials");
    }
    if header(&headers, "accept") != "application/vnd.github+json"
        || header(&headers, "x-github-api-version") != "2022-11-28"
    {
        return error(StatusCode::BAD_REQUEST, "expected Accept: application/vnd.github+json and an API version");
    }
    let Ok(comment) = serde_json::from_slice::<Value>(&body) else {
        return error(StatusCode::BAD_REQUEST, "Problems parsing JSON");
    };
    let Some(text) = comment["body"].as_str().filter(|b| !b.is_empty()) else {
        return error(StatusCode::UNPROCESSABLE_ENTITY, "Validation Failed");
    };
    if repo == "missing" {
        return error(StatusCode::NOT_FOUND, "Not Found");
    }
    let message = json!({"target": format!("{owner}/{repo}#{number}"), "body": text});
    let id = fake.accept_numbered(|n| (message, 999 + n as u64));
    let html_url = format!("https://github.com/{owner}/{repo}/issues/{number}#issuecomment-{id}");
    let reply = json!({"id": id, "node_id": "IC_fake", "html_url": html_url, "body": text,
                       "user": {"login": "ark-broker[bot]", "type": "Bot"}});
    (StatusCode::CREATED, Json(reply)).into_response()
}
