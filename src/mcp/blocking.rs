//! A blocking `ask_question` (`tools/call` without a task), waited for in front of rmcp: the reply waits
//! until the question closes — preceded, over SSE, by `notifications/progress` when the caller gave a
//! progress token — as rmcp's handler does ([`super::server`]), but without the service rmcp spawns for every
//! stateless request, whose channels and tasks cost each waiting caller around 100 KiB (issues 27 and 35,
//! `scripts/bench --only memory`). [`ask`] serves the 2025-11-25 era and older whole; [`messages`] is the
//! wait of every era (2026-07-28's is [`super::handoff`]). A caller that goes away ends the wait, never the
//! question.

use std::{convert::Infallible, time::Duration};

use axum::{
    Json,
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt, stream};
use rmcp::{ErrorData as McpError, model::CallToolResult};
use serde_json::{Value, json};

use super::{
    caller,
    tasks::internal,
    tools::{self, Caller, NotAsked},
    waiter::{Wait, Waiter, pending_message, shutting_down},
};
use crate::{questions::model::Question, state::AppState};

/// SSE keep-alive while a caller with a progress token waits (rmcp's, for the same calls).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Asks the question of `params` for `caller` and answers JSON-RPC request `id` once it closes. A question
/// that asks its caller (`mcp:caller`) opens the reply with its `elicitation/create`, so the reply is SSE.
#[tracing::instrument(level = "debug", skip_all, fields(question.id))]
pub async fn ask(state: &AppState, caller: Caller, id: Value, params: Value) -> Response {
    let caller = caller.traced(params.pointer("/_meta/traceparent").and_then(Value::as_str), &state.config);
    let asked = match tools::ask(params["arguments"].as_object(), &caller, state).await {
        Ok(question) => {
            // Boxed: the store's future is ~17 KB and would otherwise stay in this future's layout for the
            // whole wait (issue 27's waiter memory).
            Box::pin(state.questions.create(&question)).await.map_err(|error| NotAsked::Invalid(internal(error)))
        }
        Err(not_asked) => Err(not_asked),
    };
    // Only the question's id is kept for the wait, and the request's JSON is let go: a caller may wait hours.
    // (Moving the id out of a bound question would keep its other fields until this function ends.)
    let (question_id, elicitation) = match asked {
        Ok(question) => {
            tracing::Span::current().record("question.id", question.id.as_str());
            let stored = question.caller_elicitation.as_ref();
            let elicitation = stored.map(|stored| caller::params(stored, &question.id, &caller.page_base));
            (question.id, elicitation)
        }
        Err(NotAsked::Invalid(error)) => return Json(envelope(id, Err(error))).into_response(),
        Err(NotAsked::ToolError(result)) => return Json(envelope(id, Ok(legacy_result(&result)))).into_response(),
    };
    let token = params.pointer("/_meta/progressToken").filter(|t| t.is_string() || t.is_number()).cloned();
    drop(params);
    let progress = token.is_some();
    let frame = move |message| match message {
        Message::Progress(progress, message) => {
            json!({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": token, "progress": progress, "message": message}})
        }
        Message::Done(outcome) => envelope(id.clone(), outcome.map(|result| legacy_result(&result))),
    };
    if let Some(params) = elicitation {
        let ask = caller::request(params.clone(), &question_id, None);
        let withdrawal = caller::withdrawal(&params, &question_id);
        let frames = messages(state.clone(), question_id, progress).flat_map(move |message| {
            // Once the question closed, the client's elicitation is over (answered here or elsewhere).
            let over = matches!(message, Message::Done(Ok(_))).then(|| withdrawal.clone());
            stream::iter(over.into_iter().chain([frame(message)]))
        });
        return sse(stream::once(async { ask }).chain(frames));
    }
    let messages = messages(state.clone(), question_id, progress).map(frame);
    if !progress {
        let mut messages = std::pin::pin!(messages);
        let last = messages.next().await.unwrap_or_else(|| json!({"jsonrpc": "2.0"}));
        return Json(last).into_response();
    }
    sse(messages)
}

/// The reply as SSE: each JSON-RPC message an event, with keep-alives.
fn sse(messages: impl Stream<Item = Value> + Send + 'static) -> Response {
    let events =
        messages.map(|message| Ok::<_, Infallible>(Event::default().event("message").data(message.to_string())));
    Sse::new(events).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)).into_response()
}

/// What the reply to a blocking call carries, in order.
pub enum Message {
    /// A report while the question is pending (e.g. "Delivered to slack:#ops"), numbered from 1; only for
    /// a caller that gave a progress token.
    Progress(u32, String),
    /// The call's outcome, the last message: the tool's result once the question closes, or an error.
    Done(Result<CallToolResult, McpError>),
}

/// The messages of the reply for question `question_id`: progress while it is pending (when `progress`),
/// then the outcome. A caller that goes away (the stream dropped before its outcome) ends the wait, never
/// the question.
pub fn messages(state: AppState, question_id: String, progress: bool) -> impl Stream<Item = Message> {
    async_stream::stream! {
        let mut waiter = Waiter::new(&state, &question_id, state.config.mcp_progress_interval());
        let mut gone = Gone { question_id: &question_id, waiting: true };
        let mut reported = 0u32;
        loop {
            let next = tokio::select! {
                next = waiter.next() => next,
                () = state.shutdown.cancelled() => {
                    gone.waiting = false;
                    yield Message::Done(Err(shutting_down(&question_id)));
                    return;
                }
            };
            let reports = match next {
                Ok(Some(Wait::Tick)) => vec![pending_message(&question_id)],
                Ok(Some(Wait::Delivered(reports))) => reports,
                Ok(Some(Wait::Closed(closed))) => {
                    gone.waiting = false;
                    let outcome = tools::outcome(&closed).ok_or_else(|| internal_message("the question is pending"));
                    yield Message::Done(outcome);
                    return;
                }
                Ok(None) => {
                    gone.waiting = false;
                    yield Message::Done(Err(internal_message("the question disappeared")));
                    return;
                }
                Err(error) => {
                    gone.waiting = false;
                    yield Message::Done(Err(internal(error)));
                    return;
                }
            };
            if !progress {
                continue;
            }
            for message in reports {
                reported += 1;
                yield Message::Progress(reported, message);
            }
        }
    }
}

/// Says, when a blocking call's caller goes away before its outcome, that its question stays (as rmcp's
/// handler says it when its request is cancelled).
struct Gone<'a> {
    question_id: &'a str,
    waiting: bool,
}

impl Drop for Gone<'_> {
    fn drop(&mut self) {
        if self.waiting {
            tracing::info!(question.id = %self.question_id, "caller went away; the question stays pending");
        }
    }
}

fn internal_message(message: &'static str) -> McpError {
    McpError::internal_error(message, None)
}

/// A tool result as this era's clients get it: without 2026-07-28's `resultType`.
fn legacy_result(result: &CallToolResult) -> Value {
    let mut result = serde_json::to_value(result).unwrap_or_default();
    result.as_object_mut().map(|r| r.remove("resultType"));
    result
}

/// The tool's result for a closed question, as this era's clients get it.
pub fn result_of(closed: &Question) -> Value {
    // `resultType` belongs to 2026-07-28; this era's clients never see it.
    tools::outcome(closed).map(|result| legacy_result(&result)).unwrap_or_default()
}

/// The JSON-RPC response object for `id`.
pub fn envelope(id: Value, outcome: Result<Value, McpError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
    }
}
