//! A blocking `ask_question` of the 2025-11-25 era or older (`tools/call` without `task`), served in front
//! of rmcp: the question is asked, and the reply waits until it closes — preceded, over SSE, by
//! `notifications/progress` when the caller gave a progress token — as rmcp's handler does
//! ([`super::server`]), but without the service rmcp spawns for every stateless request, whose channels
//! cost each waiting caller around 100 KiB (issue 27's probe, `scripts/bench --only memory`). A caller that
//! goes away ends the wait, never the question.

use std::{convert::Infallible, time::Duration};

use axum::{
    Json,
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt};
use rmcp::ErrorData as McpError;
use serde_json::{Value, json};

use super::{
    tasks::internal,
    tools::{self, Caller},
    waiter::{Wait, Waiter, pending_message, shutting_down},
};
use crate::{questions::model::Question, state::AppState};

/// SSE keep-alive while a caller with a progress token waits (rmcp's, for the same calls).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Asks the question of `params` for `caller` and answers JSON-RPC request `id` once it closes.
pub async fn ask(state: &AppState, caller: Caller, id: Value, params: Value) -> Response {
    let caller = caller.traced(params.pointer("/_meta/traceparent").and_then(Value::as_str), &state.config);
    let asked = match tools::ask_arguments(params["arguments"].as_object(), &caller, &state.config) {
        Ok(question) => {
            // Boxed: the store's future is ~17 KB and would otherwise stay in this future's layout for the
            // whole wait (issue 27's waiter memory).
            Box::pin(state.questions.create(&question)).await.map_err(internal)
        }
        Err(error) => Err(error),
    };
    // Only the question's id is kept for the wait, and the request's JSON is let go: a caller may wait hours.
    // (Moving the id out of a bound question would keep its other fields until this function ends.)
    let question_id = match asked {
        Ok(question) => question.id,
        Err(error) => return Json(envelope(id, Err(error))).into_response(),
    };
    let token = params.pointer("/_meta/progressToken").filter(|t| t.is_string() || t.is_number()).cloned();
    drop(params);
    let progress = token.is_some();
    let messages = messages(state.clone(), question_id, id, token);
    if !progress {
        let mut messages = std::pin::pin!(messages);
        let last = messages.next().await.unwrap_or_else(|| json!({"jsonrpc": "2.0"}));
        return Json(last).into_response();
    }
    let events =
        messages.map(|message| Ok::<_, Infallible>(Event::default().event("message").data(message.to_string())));
    Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response()
}

/// The messages of the reply: progress notifications while question `question_id` is pending (with a token), then the
/// response.
fn messages(state: AppState, question_id: String, id: Value, token: Option<Value>) -> impl Stream<Item = Value> {
    async_stream::stream! {
        let mut waiter = Waiter::new(&state, &question_id, state.config.mcp_progress_interval());
        let mut progress = 0u32;
        loop {
            let next = tokio::select! {
                next = waiter.next() => next,
                () = state.shutdown.cancelled() => {
                    yield envelope(id, Err(shutting_down(&question_id)));
                    return;
                }
            };
            let reports = match next {
                Ok(Some(Wait::Closed(closed))) => {
                    yield envelope(id, Ok(result_of(&closed)));
                    return;
                }
                Ok(None) => {
                    yield envelope(id, Err(McpError::internal_error("the question disappeared", None)));
                    return;
                }
                Err(error) => {
                    yield envelope(id, Err(internal(error)));
                    return;
                }
                Ok(Some(Wait::Tick)) => vec![pending_message(&question_id)],
                Ok(Some(Wait::Delivered(reports))) => reports,
            };
            let Some(token) = &token else { continue };
            for message in reports {
                progress += 1;
                yield json!({"jsonrpc": "2.0", "method": "notifications/progress",
                             "params": {"progressToken": token, "progress": progress, "message": message}});
            }
        }
    }
}

/// The tool's result for a closed question, as this era's clients get it.
pub fn result_of(closed: &Question) -> Value {
    let mut result = serde_json::to_value(tools::outcome(closed)).unwrap_or_default();
    // `resultType` belongs to 2026-07-28; this era's clients never see it.
    result.as_object_mut().map(|r| r.remove("resultType"));
    result
}

/// The JSON-RPC response object for `id`.
pub fn envelope(id: Value, outcome: Result<Value, McpError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    }
}
