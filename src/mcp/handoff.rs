//! A blocking `ask_question` of 2026-07-28, taken over from rmcp once rmcp has admitted it. rmcp checks
//! the request (its era's headers and `_meta`, the version, the arguments) and runs the handler, which asks
//! the question; then, rather than waiting inside rmcp's per-request service (a spawned service loop and
//! handler task with their channels: 115 KiB per waiting caller, issue 35), the handler hands the wait over
//! here and returns at once. rmcp's reply to it is dropped unread, and this layer answers as rmcp would have:
//! the JSON-RPC response as JSON when it is the first message, else SSE (`data:` frames, keep-alives)
//! from the first progress notification on — the HTTP status is known only with the first message.

use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Json,
    extract::Request,
    http::{HeaderValue, request::Parts},
    middleware::Next,
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures::{StreamExt, stream};
use rmcp::{
    RoleServer,
    model::{
        ProgressNotification, ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestId,
        ServerJsonRpcMessage, ServerNotification, ServerResult,
    },
    service::RequestContext,
};
use serde_json::Value;

use super::{
    blocking::{Message, messages},
    tools::BrokerTool,
};
use crate::state::AppState;

/// rmcp's SSE keep-alive (`with_sse_keep_alive` in [`super::router`]).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A blocking wait handed over by the handler: put, empty, in a 2026-07-28 `ask_question` request's
/// extensions by the layer in front of rmcp, and filled by the handler once it has asked the question.
#[derive(Debug, Clone, Default)]
pub struct Handoff(Arc<Mutex<Option<Handed>>>);

/// What the wait needs of the request: the question, the JSON-RPC id, the progress token.
#[derive(Debug)]
pub struct Handed {
    pub question_id: String,
    pub id: RequestId,
    pub token: Option<ProgressToken>,
}

impl Handoff {
    /// The handoff of the request `context` serves, when it has one and speaks 2026-07-28 (or later): rmcp
    /// shapes results by the request's era, and only that era's shape is built here.
    pub fn of(context: &RequestContext<RoleServer>) -> Option<&Handoff> {
        let modern = context.protocol_version().is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        modern.then(|| context.extensions.get::<Parts>()?.extensions.get::<Handoff>()).flatten()
    }

    /// Hands the wait over.
    pub fn give(&self, handed: Handed) {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(handed);
    }

    fn take(&self) -> Option<Handed> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
    }
}

/// Whether `message` (of 2026-07-28) calls `ask_question`: only such a call can be handed over.
pub fn wanted(message: &Value) -> bool {
    message["method"] == "tools/call"
        && message.pointer("/params/name").and_then(Value::as_str).and_then(BrokerTool::named)
            == Some(BrokerTool::AskQuestion)
}

/// Sends `request` through rmcp, and waits here if its handler handed the wait over.
pub async fn serve(state: &AppState, mut request: Request, next: Next) -> Response {
    let handoff = Handoff::default();
    request.extensions_mut().insert(handoff.clone());
    // Boxed, as is the wait: inline, each would stay in this future's layout for the whole wait.
    let response = Box::pin(next.run(request)).await;
    let Some(handed) = handoff.take() else { return response };
    drop((response, handoff));
    Box::pin(wait(state.clone(), handed)).await
}

/// Waits for the handed-over question and answers as rmcp would.
#[tracing::instrument(level = "debug", skip_all, fields(question.id = %handed.question_id))]
async fn wait(state: AppState, handed: Handed) -> Response {
    let Handed { question_id, id, token } = handed;
    let progress = token.is_some();
    let mut messages = Box::pin(messages(state, question_id, progress).map(move |message| match message {
        Message::Progress(progress, message) => {
            let token = token.clone().expect("progress only with a token");
            let update = ProgressNotificationParam::new(token, f64::from(progress)).with_message(message);
            let notification = ServerNotification::ProgressNotification(ProgressNotification::new(update));
            ServerJsonRpcMessage::notification(notification)
        }
        Message::Done(Ok(result)) => ServerJsonRpcMessage::response(ServerResult::CallToolResult(result), id.clone()),
        Message::Done(Err(error)) => ServerJsonRpcMessage::error(error, Some(id.clone())),
    }));
    let Some(first) = messages.next().await else { unreachable!("the wait ends with its outcome") };
    if matches!(first, ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_)) {
        // Its errors are internal ones (shutdown, the store), which this era sends with HTTP 200.
        return Json(first).into_response();
    }
    let events = stream::once(async { first }).chain(messages).map(|message| {
        let data = serde_json::to_string(&message).expect("a JSON-RPC message serialises");
        Ok::<_, Infallible>(Event::default().data(data))
    });
    let mut response = Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response();
    response.headers_mut().insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
