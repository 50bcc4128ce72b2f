//! The 2025-11-25 task era, in front of rmcp (which serves only SEP-2663 tasks), as the last step of the MCP
//! router's one middleware ([`super::admit`]): it answers `tools/call` with `params.task`, `tasks/get`,
//! `tasks/result`, `tasks/list` and `tasks/cancel` from the same Postgres-backed tasks, and adds the era's
//! `capabilities.tasks` and `execution.taskSupport` to rmcp's `initialize` and `tools/list` replies. A
//! blocking `ask_question` of the era is answered here too ([`super::blocking`]), for what a waiting caller
//! costs. Everything else passes through to rmcp untouched — every 2026-07-28 request too, though a blocking
//! `ask_question` of that era, once rmcp has admitted it and asked the question, is waited for here
//! ([`super::handoff`]).

use std::{convert::Infallible, time::Duration};

use axum::{
    Json,
    body::{Body, Bytes, to_bytes},
    extract::Request,
    http::{HeaderMap, Method, StatusCode, header, request::Parts},
    middleware::Next,
    response::{
        IntoResponse, Response,
        sse::{Event, KeepAlive, Sse},
    },
};
use rmcp::{ErrorData as McpError, model::ErrorCode};
use serde_json::{Value, json};

use super::{
    blocking::{envelope, result_of},
    caller::{self, Modes, Replied},
    handoff,
    tasks::{self, RELATED_TASK, Tasks, internal},
    tools::{self, BrokerTool, Caller, NotAsked},
    waiter::{Wait, Waiter},
};
use crate::{auth::Principal, questions::Change, state::AppState};

/// The first protocol version in which tasks are an extension rather than a core utility.
const MODERN_VERSION: &str = "2026-07-28";
/// Tasks per `tasks/list` page.
const LIST_PAGE: i64 = 50;
/// How often a blocked `tasks/result` re-checks when no notification comes (the wake-ups are also backed by the poll).
const RESULT_TICK: Duration = Duration::from_secs(30);

/// Answers legacy task traffic here, and sends the rest on to rmcp.
pub async fn serve(state: AppState, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    // Every MCP request body is read here first, so the body deadline of the REST API applies here too.
    let deadline = Duration::from_secs(state.config.body_read_timeout_seconds);
    let bytes = match tokio::time::timeout(deadline, to_bytes(body, state.config.max_body_bytes)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => return (StatusCode::PAYLOAD_TOO_LARGE, "request body too large").into_response(),
        Err(_) => {
            let headers = [(header::CONNECTION, "close")];
            return (StatusCode::REQUEST_TIMEOUT, headers, "request body not received in time").into_response();
        }
    };
    let rebuilt = |parts: Parts, bytes: Bytes| Request::from_parts(parts, Body::from(bytes));
    let mut message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) if is_caller_reply(&message) => return Box::pin(caller_reply(&state, &parts, &message)).await,
        Ok(message) if is_legacy(&parts.headers, &message) && message.get("id").is_some() => message,
        Ok(message) if !is_legacy(&parts.headers, &message) && handoff::wanted(&message) => {
            drop(message);
            return Box::pin(handoff::serve(&state, rebuilt(parts, bytes), next)).await;
        }
        _ => return next.run(rebuilt(parts, bytes)).await,
    };
    let id = message["id"].clone();
    let params = &message["params"];
    let caller = Caller::from_request(&parts, &state);
    let legacy = Legacy { tasks: Tasks::new(state.clone()), state: state.clone(), caller };
    // Each branch's future is boxed: this future lives as long as the longest of them (a blocking ask or
    // `tasks/result` waits for a person), and inline it would be as large as the largest branch, the store
    // calls included (issue 27's waiter memory).
    let outcome = match message["method"].as_str().unwrap_or_default() {
        "initialize" => {
            // A client that can be asked (elicitation) gets a session id spelling how ([`caller::Modes`]).
            let session = Modes::of(&params["capabilities"]).session_id();
            let response = Box::pin(patch(next.run(rebuilt(parts, bytes)).await, add_task_capabilities)).await;
            return with_session(response, session);
        }
        "tools/list" => return Box::pin(patch(next.run(rebuilt(parts, bytes)).await, add_task_support)).await,
        "tools/call" if params.get("task").is_some_and(Value::is_object) => Box::pin(legacy.create(params)).await,
        "tools/call" if params["name"].as_str().and_then(BrokerTool::named) == Some(BrokerTool::AskQuestion) => {
            // The request's JSON moves into the call, which lets it go once the question is asked, and the
            // body, the head and rmcp's copy of the service are let go now: a caller may wait hours, and the
            // body's bytes can share the connection's read buffer.
            let params = message.get_mut("params").map(Value::take).unwrap_or_default();
            drop((parts, bytes, message, next));
            return Box::pin(super::blocking::ask(&state, legacy.caller, id, params)).await;
        }
        "tasks/get" => Box::pin(legacy.get(params)).await,
        "tasks/list" => Box::pin(legacy.list(params)).await,
        "tasks/cancel" => Box::pin(legacy.cancel(params)).await,
        "tasks/result" => return Box::pin(legacy.result(id, params, &parts.headers)).await,
        _ => return next.run(rebuilt(parts, bytes)).await,
    };
    reply(id, outcome)
}

/// A request is of the 2025-11-25 era (or older) unless it names 2026-07-28 in its `_meta` or header.
fn is_legacy(headers: &HeaderMap, message: &Value) -> bool {
    let in_meta = message.pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion").is_some();
    let header = headers.get("mcp-protocol-version").and_then(|v| v.to_str().ok());
    !in_meta && header.is_none_or(|version| version < MODERN_VERSION)
}

struct Legacy {
    state: AppState,
    tasks: Tasks,
    caller: Caller,
}

impl Legacy {
    async fn create(&self, params: &Value) -> Result<Value, McpError> {
        if !params["name"].as_str().and_then(BrokerTool::named).is_some_and(BrokerTool::supports_tasks) {
            return Err(McpError::new(ErrorCode::METHOD_NOT_FOUND, "This tool does not support task execution", None));
        }
        let caller = self
            .caller
            .clone()
            .traced(params.pointer("/_meta/traceparent").and_then(Value::as_str), &self.state.config);
        let question = match tools::ask(params["arguments"].as_object(), &caller, &self.state).await {
            Ok(question) => question,
            Err(NotAsked::Invalid(error)) => return Err(error),
            // A task-augmented call is answered with a task or an error, never a tool result.
            Err(NotAsked::ToolError(result)) => return Err(McpError::invalid_params(tools::text_of(&result), None)),
        };
        let ttl = params.pointer("/task/ttl").and_then(Value::as_u64);
        let question = self.tasks.create(question, ttl).await?;
        let immediate = format!(
            "Question {} was sent to {}; the answer will be this task's result.",
            question.id, question.recipient
        );
        Ok(json!({
            "task": tasks::legacy_task(&question, self.tasks.task_poll_interval_ms()),
            "_meta": {"io.modelcontextprotocol/model-immediate-response": immediate},
        }))
    }

    #[tracing::instrument(level = "debug", skip_all, fields(task.id = params["taskId"].as_str()))]
    async fn get(&self, params: &Value) -> Result<Value, McpError> {
        let question = self.tasks.find(task_id(params)?, &self.caller).await?;
        Ok(tasks::legacy_task(&question, self.tasks.task_poll_interval_ms()))
    }

    async fn list(&self, params: &Value) -> Result<Value, McpError> {
        let (page, next) = self.tasks.list(params["cursor"].as_str(), LIST_PAGE, &self.caller).await?;
        let tasks: Vec<Value> =
            page.iter().map(|q| tasks::legacy_task(q, self.tasks.task_poll_interval_ms())).collect();
        let mut result = json!({"tasks": tasks});
        if let Some(next) = next {
            result["nextCursor"] = json!(next);
        }
        Ok(result)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(task.id = params["taskId"].as_str()))]
    async fn cancel(&self, params: &Value) -> Result<Value, McpError> {
        let question = self.tasks.find(task_id(params)?, &self.caller).await?;
        match self.state.questions.cancel(&question.id).await.map_err(internal)? {
            Change::Made(cancelled) => {
                let mut task = tasks::legacy_task(&cancelled, self.tasks.task_poll_interval_ms());
                task["statusMessage"] = json!("The task was cancelled by request.");
                Ok(task)
            }
            Change::Conflict(closed) => {
                let (status, _) = tasks::legacy_status(closed.status);
                Err(McpError::invalid_params(
                    format!("Cannot cancel task: already in terminal status \"{status}\""),
                    None,
                ))
            }
            Change::NotFound => Err(McpError::invalid_params("Failed to retrieve task: Task not found", None)),
        }
    }

    /// Blocks until the task is terminal, then returns exactly the tool's result with the related-task
    /// `_meta`. Streams SSE keep-alives while it waits when the client accepts SSE.
    #[tracing::instrument(level = "debug", skip_all, fields(task.id = params["taskId"].as_str()))]
    async fn result(&self, id: Value, params: &Value, headers: &HeaderMap) -> Response {
        let question = match task_id(params) {
            Ok(task) => self.tasks.find(task, &self.caller).await,
            Err(error) => Err(error),
        };
        let question = match question {
            Ok(question) => question,
            Err(error) => return reply(id, Err(error)),
        };
        let task = question.task_id.map(|t| t.to_string()).unwrap_or_default();
        // A task waiting for its caller (`input_required`) asks on this stream, as the era has it.
        let ask = caller::elicitation(&question, &self.caller.page_base).map(|params| {
            (caller::request(params.clone(), &question.id, Some(&task)), caller::withdrawal(&params, &question.id))
        });
        let mut waiter = Waiter::new(&self.state, &question.id, RESULT_TICK);
        let outcome = async move {
            loop {
                match waiter.next().await {
                    Ok(Some(Wait::Closed(closed))) => {
                        let mut result = result_of(&closed);
                        result["_meta"] = json!({RELATED_TASK: {"taskId": task}});
                        return Ok(result);
                    }
                    Ok(Some(Wait::Tick | Wait::Delivered(_))) => continue,
                    Ok(None) => return Err(McpError::invalid_params("Failed to retrieve task: Task not found", None)),
                    Err(error) => return Err(internal(error)),
                }
            }
        };
        let accepts_sse = headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|accept| accept.contains("text/event-stream"));
        if !accepts_sse {
            return reply(id, outcome.await);
        }
        let shutdown = self.state.shutdown.clone();
        let event = |message: &Value| Ok::<_, Infallible>(Event::default().event("message").data(message.to_string()));
        let stream = async_stream::stream! {
            if let Some((request, _)) = &ask {
                yield event(request);
            }
            tokio::select! {
                outcome = outcome => {
                    if let (Some((_, withdrawal)), Ok(_)) = (&ask, &outcome) {
                        yield event(withdrawal);
                    }
                    yield event(&envelope(id, outcome));
                }
                // The client calls tasks/result again on another replica.
                _ = shutdown.cancelled() => yield Ok(Event::default().retry(Duration::from_secs(1))),
            }
        };
        Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))).into_response()
    }
}

/// Whether `message` is a client's JSON-RPC response to an elicitation this broker sent (`mcp:caller`).
fn is_caller_reply(message: &Value) -> bool {
    message.get("method").is_none()
        && (message.get("result").is_some() || message.get("error").is_some())
        && caller::question_of_request(&message["id"]).is_some()
}

/// Takes a client's reply to an elicitation, whichever replica asked: 202 once taken (or too late: the first
/// answer won), 400 or 403 with a JSON-RPC error when it is not, 404 for an unknown question.
async fn caller_reply(state: &AppState, parts: &Parts, message: &Value) -> Response {
    let question = caller::question_of_request(&message["id"]).unwrap_or_default();
    let principal = if state.auth.is_on() { parts.extensions.get::<Principal>() } else { None };
    let result = message.get("result").ok_or(&message["error"]);
    let refusal = |status: StatusCode, code: ErrorCode, why: String| {
        (status, Json(json!({"jsonrpc": "2.0", "error": McpError::new(code, why, None)}))).into_response()
    };
    match caller::apply(state, question, principal, result).await {
        Ok(Replied::Question(_)) => StatusCode::ACCEPTED.into_response(),
        Ok(Replied::Refused(why)) => refusal(StatusCode::BAD_REQUEST, ErrorCode::INVALID_PARAMS, why),
        Ok(Replied::Forbidden(why)) => refusal(StatusCode::FORBIDDEN, ErrorCode::INVALID_REQUEST, why),
        Ok(Replied::NotFound) => refusal(
            StatusCode::NOT_FOUND,
            ErrorCode::INVALID_PARAMS,
            format!("No question {question} asked this client anything"),
        ),
        Err(error) => {
            tracing::warn!(error = %crate::telemetry::chain(&error), question.id = %question, "cannot take a reply");
            refusal(StatusCode::SERVICE_UNAVAILABLE, ErrorCode::INTERNAL_ERROR, "Try again".into())
        }
    }
}

/// `response` with the session id `session`, when there is one and the response succeeded.
fn with_session(mut response: Response, session: Option<String>) -> Response {
    if let Some(value) = session.filter(|_| response.status().is_success()).and_then(|s| s.parse().ok()) {
        response.headers_mut().insert("mcp-session-id", value);
    }
    response
}

fn task_id(params: &Value) -> Result<&str, McpError> {
    params["taskId"].as_str().ok_or_else(|| McpError::invalid_params("taskId is required", None))
}

/// A JSON-RPC response; legacy errors travel with HTTP 200, as the era's transport has it.
fn reply(id: Value, outcome: Result<Value, McpError>) -> Response {
    Json(envelope(id, outcome)).into_response()
}

/// Applies `edit` to the `result` of rmcp's JSON reply (left alone if it is not JSON).
async fn patch(response: Response, edit: fn(&mut Value)) -> Response {
    let is_json =
        response.headers().get(header::CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !is_json || !response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = to_bytes(body, usize::MAX).await else {
        return (StatusCode::BAD_GATEWAY, "unreadable MCP reply").into_response();
    };
    let mut message: Value = match serde_json::from_slice(&bytes) {
        Ok(message) => message,
        Err(_) => return Response::from_parts(parts, Body::from(bytes)),
    };
    if let Some(result) = message.get_mut("result") {
        edit(result);
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    (parts, Json(message)).into_response()
}

/// `initialize`: the 2025-11-25 task capabilities instead of the SEP-2663 extension.
fn add_task_capabilities(result: &mut Value) {
    if result["protocolVersion"] != "2025-11-25" {
        return;
    }
    let capabilities = &mut result["capabilities"];
    capabilities["tasks"] = json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
    if let Some(extensions) = capabilities.get_mut("extensions").and_then(Value::as_object_mut) {
        extensions.remove(rmcp::model::TASKS_EXTENSION_ID);
        if extensions.is_empty() {
            capabilities.as_object_mut().map(|c| c.remove("extensions"));
        }
    }
}

/// `tools/list`: the tools that may be called as a task say so.
fn add_task_support(result: &mut Value) {
    for tool in result["tools"].as_array_mut().into_iter().flatten() {
        if tool["name"].as_str().and_then(BrokerTool::named).is_some_and(BrokerTool::supports_tasks) {
            tool["execution"] = json!({"taskSupport": "optional"});
        }
    }
}
