//! A fake Kubernetes API server for `POST /apis/authentication.k8s.io/v1/tokenreviews`, strict where the real
//! one is: JSON only, `apiVersion`/`kind` checked, a token required; it answers 201 with the review and its
//! `status` the way kube-apiserver does (audiences intersected, `error` for a bad token, the API server's
//! own audience when none is asked for), and can refuse the caller itself with 401 or 403.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use axum::{
    Json, Router,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use serde_json::{Value, json};

/// The audience of tokens issued for the API server itself.
pub const API_SERVER_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

#[derive(Default)]
struct Reviews {
    /// token → (user name, audiences the token was issued for).
    tokens: HashMap<String, (String, Vec<String>)>,
    /// Refuse every review with this status (the broker's own credentials or RBAC are wrong).
    refusal: Option<u16>,
    /// Every review body received.
    received: Vec<Value>,
}

/// The running fake.
#[derive(Clone)]
pub struct FakeTokenReview {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    reviews: Arc<Mutex<Reviews>>,
}

impl FakeTokenReview {
    /// Starts the fake on a free loopback port.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let fake =
            FakeTokenReview { url: format!("http://{}", listener.local_addr().unwrap()), reviews: Arc::default() };
        let app =
            Router::new().route("/apis/authentication.k8s.io/v1/tokenreviews", post(review)).with_state(fake.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        fake
    }

    /// Issues `token` to `user` for `audiences` (a projected ServiceAccount token).
    pub fn issue(&self, token: &str, user: &str, audiences: &[&str]) {
        let audiences = audiences.iter().map(|a| a.to_string()).collect();
        self.reviews.lock().unwrap().tokens.insert(token.to_owned(), (user.to_owned(), audiences));
    }

    /// Refuses every review with `code` (401, 403), or serves them again (`None`).
    pub fn refuse(&self, code: Option<u16>) {
        self.reviews.lock().unwrap().refusal = code;
    }

    /// The review bodies received so far.
    pub fn received(&self) -> Vec<Value> {
        self.reviews.lock().unwrap().received.clone()
    }
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                      "message": message, "reason": reason, "code": code});
    (StatusCode::from_u16(code).unwrap(), Json(body)).into_response()
}

async fn review(State(fake): State<FakeTokenReview>, headers: HeaderMap, body: Bytes) -> Response {
    let mut reviews = fake.reviews.lock().unwrap();
    match reviews.refusal {
        Some(401) => return status(401, "Unauthorized", "Unauthorized"),
        Some(code) => {
            let message = "tokenreviews.authentication.k8s.io is forbidden: User \
                           \"system:serviceaccount:ark:ark-broker\" cannot create resource \"tokenreviews\" in API \
                           group \"authentication.k8s.io\" at the cluster scope";
            return status(code, "Forbidden", message);
        }
        None => {}
    }
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !content_type.starts_with("application/json") {
        return status(
            415,
            "UnsupportedMediaType",
            &format!("the body of the request was in an unknown format: {content_type}"),
        );
    }
    let Ok(mut body) = serde_json::from_slice::<Value>(&body) else {
        return status(400, "BadRequest", "the body is not JSON");
    };
    reviews.received.push(body.clone());
    if body["apiVersion"] != "authentication.k8s.io/v1" || body["kind"] != "TokenReview" {
        return status(400, "BadRequest", "expected apiVersion authentication.k8s.io/v1, kind TokenReview");
    }
    let Some(token) = body["spec"]["token"].as_str().filter(|t| !t.is_empty()) else {
        return status(422, "Invalid", "TokenReview.authentication.k8s.io is invalid: spec.token: Required value");
    };
    let asked: Vec<String> = match body["spec"].get("audiences") {
        None | Some(Value::Null) => vec![API_SERVER_AUDIENCE.to_owned()],
        Some(Value::Array(items)) => items.iter().filter_map(|a| a.as_str().map(str::to_owned)).collect(),
        Some(_) => return status(400, "BadRequest", "spec.audiences: expected an array of strings"),
    };
    body["status"] = match reviews.tokens.get(token) {
        None => {
            json!({"user": {}, "error": "[invalid bearer token, square/go-jose: error in cryptographic primitive]"})
        }
        Some((user, issued)) => {
            let granted: Vec<&String> = asked.iter().filter(|a| issued.contains(a)).collect();
            if granted.is_empty() {
                json!({"user": {}, "audiences": asked, "error": "[invalid bearer token, token audiences is invalid for the target audiences]"})
            } else {
                json!({"authenticated": true, "audiences": granted,
                       "user": {"username": user, "uid": "7f8b4b0e-1111-2222-3333-444455556666",
                                "groups": ["system:serviceaccounts", "system:authenticated"]}})
            }
        }
    };
    body["metadata"] = json!({"creationTimestamp": null});
    (StatusCode::CREATED, Json(body)).into_response()
}
