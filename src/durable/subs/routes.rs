//! The subscription APIs' handlers under `/v1/stream/__ds/`: read the request, ask the store, answer with
//! the protocol's bodies and its error codes (`{"error": {"code": "FENCED", …}}`).

use axum::{
    Json, Router,
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post, put},
};
use serde_json::{Value, json};

use super::{
    delivery::wake_link_json,
    keys::TokenRefusal,
    model::{self, Refused, offset_of},
    store::{Link, Put, Subscription},
    wakes::WakeRefusal,
};
use crate::{
    durable::{RouteState, routes::stream_url},
    error::ApiError,
};

/// The subscription routes.
pub fn router() -> Router<RouteState> {
    Router::new()
        .route("/v1/stream/__ds/jwks.json", get(jwks))
        .route("/v1/stream/__ds/subscriptions/{id}", put(create).get(read).delete(delete))
        .route("/v1/stream/__ds/subscriptions/{id}/streams", post(add_streams))
        .route("/v1/stream/__ds/subscriptions/{id}/streams/{path}", axum::routing::delete(remove_stream))
        .route("/v1/stream/__ds/subscriptions/{id}/callback", post(callback))
        .route("/v1/stream/__ds/subscriptions/{id}/claim", post(claim))
        .route("/v1/stream/__ds/subscriptions/{id}/ack", post(ack))
        .route("/v1/stream/__ds/subscriptions/{id}/release", post(release))
}

fn refused(refused: Refused) -> Response {
    refusal(refused.status, refused.code, &refused.message, json!({}))
}

fn refusal(status: u16, code: &str, message: &str, extra: Value) -> Response {
    let mut error = json!({"code": code, "message": message});
    if let (Some(error), Value::Object(extra)) = (error.as_object_mut(), extra) {
        error.extend(extra);
    }
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
    (status, Json(json!({ "error": error }))).into_response()
}

fn not_found() -> Response {
    refusal(404, "SUBSCRIPTION_NOT_FOUND", "no such subscription", json!({}))
}

fn wake_refused(refusal_of_wake: WakeRefusal) -> Response {
    match refusal_of_wake {
        WakeRefusal::NotFound => not_found(),
        WakeRefusal::Fenced => refusal(409, "FENCED", "not the current wake, or not held", json!({})),
        WakeRefusal::InvalidOffset(message) => refusal(409, "INVALID_OFFSET", &message, json!({})),
        WakeRefusal::NoPendingWork => refusal(409, "NO_PENDING_WORK", "nothing to claim", json!({})),
        WakeRefusal::AlreadyClaimed { holder, generation } => refusal(
            409,
            "ALREADY_CLAIMED",
            "another worker holds the wake",
            json!({"current_holder": holder, "generation": generation}),
        ),
        WakeRefusal::WrongKind => refused(Refused::invalid("not this kind of subscription's request")),
    }
}

fn id_ok(id: &str) -> bool {
    !id.is_empty() && id.len() <= 256 && id.bytes().all(|b| b.is_ascii_graphic() && b != b'/')
}

fn link_json(link: &Link) -> Value {
    json!({"path": link.path, "link_type": link.link_type, "acked_offset": offset_of(link.acked)})
}

/// A subscription as the APIs show it (never a secret).
async fn shown(state: &RouteState, subscription: &Subscription) -> Result<Value, ApiError> {
    let links = state.store.links(&subscription.id).await?;
    let mut shown = json!({
        "id": subscription.id,
        "subscription_id": subscription.id,
        "type": subscription.kind.name(),
        "streams": links.iter().map(link_json).collect::<Vec<_>>(),
        "lease_ttl_ms": subscription.lease_ttl_ms,
        "created_at": subscription.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        "status": if subscription.failing { "failing" } else { "active" },
    });
    if let Some(pattern) = &subscription.pattern {
        shown["pattern"] = pattern.as_str().into();
    }
    if let Some(description) = &subscription.description {
        shown["description"] = description.as_str().into();
    }
    if let Some(url) = &subscription.webhook_url {
        let keys = state.subscriptions.keys().await?;
        let jwks_url = format!("{}__ds/jwks.json", subscription.base_url);
        shown["webhook"] = json!({"url": url, "signing": {"alg": "ed25519", "kid": keys.kid(), "jwks_url": jwks_url}});
    }
    if let Some(wake_stream) = &subscription.wake_stream {
        shown["wake_stream"] = wake_stream.as_str().into();
    }
    Ok(shown)
}

async fn jwks(State(state): State<RouteState>) -> Response {
    match state.subscriptions.keys().await {
        Ok(keys) => (
            [(header::CONTENT_TYPE, "application/jwk-set+json"), (header::CACHE_CONTROL, "public, max-age=300")],
            keys.jwks().to_string(),
        )
            .into_response(),
        Err(error) => ApiError::from(error).into_response(),
    }
}

async fn create(State(state): State<RouteState>, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    if !id_ok(&id) {
        return refused(Refused::invalid("the subscription id: 1 to 256 printable characters"));
    }
    let wanted = match model::wanted(&body, state.config.durable.durable_webhook_loopback) {
        Ok(wanted) => wanted,
        Err(refusal) => return refused(refusal),
    };
    let base_url = stream_url(&headers, "");
    let (status, subscription) = match state.store.put_subscription(&id, &wanted, &base_url).await {
        Ok(Put::New(subscription)) => (StatusCode::CREATED, subscription),
        Ok(Put::Same(subscription)) => (StatusCode::OK, subscription),
        Ok(Put::Different) => {
            return refusal(409, "SUBSCRIPTION_ALREADY_EXISTS", "the subscription exists, made otherwise", json!({}));
        }
        Err(error) => return ApiError::from(error).into_response(),
    };
    match shown(&state, &subscription).await {
        Ok(shown) => (status, Json(shown)).into_response(),
        Err(error) => error.into_response(),
    }
}

async fn read(State(state): State<RouteState>, Path(id): Path<String>) -> Response {
    let subscription = match state.store.subscription(&id).await {
        Ok(Some(subscription)) => subscription,
        Ok(None) => return not_found(),
        Err(error) => return ApiError::from(error).into_response(),
    };
    match shown(&state, &subscription).await {
        Ok(shown) => Json(shown).into_response(),
        Err(error) => error.into_response(),
    }
}

fn done(found: Result<bool, crate::db::StoreError>) -> Response {
    match found {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => not_found(),
        Err(error) => ApiError::from(error).into_response(),
    }
}

async fn delete(State(state): State<RouteState>, Path(id): Path<String>) -> Response {
    done(state.store.delete_subscription(&id).await)
}

async fn add_streams(State(state): State<RouteState>, Path(id): Path<String>, body: Bytes) -> Response {
    let added = match model::body::<model::AddStreams>(&body) {
        Ok(added) if added.streams.iter().all(|path| model::stream_path_ok(path)) => added,
        Ok(_) => return refused(Refused::invalid("streams: each must be a stream's path")),
        Err(refusal) => return refused(refusal),
    };
    done(state.store.add_streams(&id, &added.streams).await)
}

async fn remove_stream(State(state): State<RouteState>, Path((id, path)): Path<(String, String)>) -> Response {
    if !model::stream_path_ok(&path) {
        return refused(Refused::invalid("not a stream's path"));
    }
    done(state.store.remove_stream(&id, &path).await)
}

/// The token of `Authorization: Bearer …`, checked: its generation (`epoch`), or the 401 to answer.
async fn token_epoch(state: &RouteState, headers: &HeaderMap, id: &str) -> Result<i64, Box<Response>> {
    let sent = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    let unauthorized = |code, message| Box::new(refusal(401, code, message, json!({})));
    let Some(token) = sent else { return Err(unauthorized("TOKEN_INVALID", "a Bearer token is required")) };
    let keys = state.subscriptions.keys().await.map_err(|error| Box::new(ApiError::from(error).into_response()))?;
    match keys.verify(token.trim(), id, chrono::Utc::now().timestamp()) {
        Ok(claims) => Ok(claims.epoch),
        Err(TokenRefusal::Invalid) => Err(unauthorized("TOKEN_INVALID", "not a token of this subscription")),
        Err(TokenRefusal::Expired) => Err(unauthorized("TOKEN_EXPIRED", "the token expired")),
    }
}

async fn acknowledged(state: RouteState, id: String, headers: HeaderMap, body: Bytes, held_as: &str) -> Response {
    let epoch = match token_epoch(&state, &headers, &id).await {
        Ok(epoch) => epoch,
        Err(refusal) => return *refusal,
    };
    let sent: model::Acks = match model::body(&body) {
        Ok(sent) => sent,
        Err(refusal) => return refused(refusal),
    };
    let named = (sent.wake_id.as_str(), sent.generation, epoch);
    match state.store.acknowledge_wake(&id, held_as, named, &sent.acks, sent.done).await {
        Ok(Ok(next_wake)) => Json(json!({"ok": true, "next_wake": next_wake})).into_response(),
        Ok(Err(why)) => wake_refused(why),
        Err(error) => ApiError::from(error).into_response(),
    }
}

async fn callback(
    State(state): State<RouteState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    acknowledged(state, id, headers, body, "delivered").await
}

async fn ack(State(state): State<RouteState>, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    acknowledged(state, id, headers, body, "claimed").await
}

async fn claim(State(state): State<RouteState>, Path(id): Path<String>, body: Bytes) -> Response {
    let sent = match model::body::<model::Claim>(&body) {
        Ok(sent) if !sent.worker.contains('\0') && sent.worker.len() <= 256 => sent,
        Ok(_) => return refused(Refused::invalid("worker: at most 256 bytes, no NUL")),
        Err(refusal) => return refused(refusal),
    };
    let wake = match state.store.claim_wake(&id, &sent.worker).await {
        Ok(Ok(wake)) => wake,
        Ok(Err(why)) => return wake_refused(why),
        Err(error) => return ApiError::from(error).into_response(),
    };
    let keys = match state.subscriptions.keys().await {
        Ok(keys) => keys,
        Err(error) => return ApiError::from(error).into_response(),
    };
    let subscription = &wake.subscription;
    Json(json!({
        "wake_id": subscription.wake_id,
        "generation": subscription.generation,
        "token": keys.token(&subscription.id, subscription.generation, chrono::Utc::now().timestamp()),
        "streams": wake.links.iter().map(wake_link_json).collect::<Vec<_>>(),
        "lease_ttl_ms": subscription.lease_ttl_ms,
    }))
    .into_response()
}

async fn release(State(state): State<RouteState>, Path(id): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    let epoch = match token_epoch(&state, &headers, &id).await {
        Ok(epoch) => epoch,
        Err(refusal) => return *refusal,
    };
    let sent: model::Release = match model::body(&body) {
        Ok(sent) => sent,
        Err(refusal) => return refused(refusal),
    };
    match state.store.release_wake(&id, (sent.wake_id.as_str(), sent.generation, epoch)).await {
        Ok(Ok(())) => StatusCode::NO_CONTENT.into_response(),
        Ok(Err(why)) => wake_refused(why),
        Err(error) => ApiError::from(error).into_response(),
    }
}
