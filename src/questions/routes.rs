//! Handlers of the questions REST API. Each handler's `#[utoipa::path]` is its route and its OpenAPI
//! description.

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{
    RouteState,
    answering::{self, Outcome},
    bodies::{Answer, Decline, NewQuestion, QuestionConflict},
    model::{Question, QuestionStatus},
    policy::Answerer,
    record::HistoryItem,
    store::{Change, QuestionFilter},
    watch,
};
use crate::{
    auth::Principal,
    error::{ApiError, ErrorBody},
    http::{
        extract::{ApiJson, ApiQuery},
        params::{Flag, PageRequest, flag},
        sse::SseEvent,
    },
    traces::wait::WaitTrace,
};

/// Parameters of `GET /questions` (an empty value means "any").
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only questions with this status.
    #[param(value_type = Option<QuestionStatus>, inline)]
    status: Option<String>,
    /// Only questions to this `ark://` address.
    recipient: Option<String>,
    /// Only questions from this `ark://` address.
    sender: Option<String>,
    /// Page size, 1 to 1000; with it (or `cursor`) the reply has `hasMore` and `nextCursor`.
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
    /// Only questions created after this one (the previous page's `nextCursor`).
    #[param(value_type = Option<i64>, minimum = 0)]
    cursor: Option<String>,
    /// `true`: a `text/event-stream` of changes (`event:` the change, `id:` the resourceVersion, `data:` the
    /// question).
    #[param(value_type = Option<Flag>, inline)]
    watch: Option<String>,
    /// Watch: resume after this version (else after `Last-Event-ID`, else from now).
    #[serde(rename = "resourceVersion")]
    #[param(rename = "resourceVersion", value_type = Option<i64>, minimum = 0)]
    resource_version: Option<String>,
}

/// `{"resourceVersion":"N","items":[…]}`, plus the page fields when the request was paginated.
#[derive(Debug, Serialize, ToSchema)]
struct QuestionList {
    /// The version the list is as of (a watch resumes after it).
    #[serde(rename = "resourceVersion")]
    resource_version: String,
    /// The questions, oldest first.
    items: Vec<Question>,
    /// With `limit` or `cursor`: whether more follow.
    #[serde(rename = "hasMore", skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    has_more: Option<bool>,
    /// With `limit` or `cursor`, when more follow: the next page's `cursor`.
    #[serde(rename = "nextCursor", skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    next_cursor: Option<i64>,
}

/// `POST /questions`: 201 with the stored question.
#[utoipa::path(
    post,
    path = "/questions",
    tag = "questions",
    operation_id = "create_question",
    request_body = NewQuestion,
    params(("traceparent" = Option<String>, Header, description = "The asker's W3C trace context: the wait, from now until the question closes, becomes a span of that trace (`execute_tool ask_question`). A malformed or unsampled one is ignored")),
    responses(
        (status = 201, description = "Stored and announced", body = Question, links(
            ("GetQuestion" = (operation_id = "get_question", parameters(("id" = "$response.body#/id")))),
            ("AnswerQuestion" = (operation_id = "answer_question", parameters(("id" = "$response.body#/id")))),
            ("PostAnswer" = (operation_id = "post_answer", parameters(("id" = "$response.body#/id")))),
            ("CancelQuestion" = (operation_id = "cancel_question", parameters(("id" = "$response.body#/id")))),
        )),
        (status = 400, description = "A field is missing or wrong, a channel cannot be reached, or the body is not JSON", body = ErrorBody),
        (status = 415, description = "The body is not declared JSON", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all, fields(question.id))]
pub async fn create(
    State(state): State<RouteState>,
    principal: Option<Extension<Principal>>,
    headers: HeaderMap,
    ApiJson(mut new): ApiJson<NewQuestion>,
) -> Result<(StatusCode, Json<Question>), ApiError> {
    new.admit(&state.config)?;
    new.trace = WaitTrace::from_headers(&headers, &state.config);
    if state.auth.is_on() {
        new.owner = principal.map(|Extension(principal)| principal.name().to_owned());
    }
    let question = state.questions.create(&new).await?;
    tracing::Span::current().record("question.id", question.id.as_str());
    Ok((StatusCode::CREATED, Json(question)))
}

/// `GET /questions`: the list with its resourceVersion, or with `watch=true` the change stream.
#[utoipa::path(
    get,
    path = "/questions",
    tag = "questions",
    operation_id = "list_questions",
    params(ListParams, ("Last-Event-ID" = Option<String>, Header, description = "Watch: resume after this version")),
    responses(
        (status = 200, description = "The questions; with `watch=true` one event per change (`question_created`, `question_answered`, `question_cancelled`, `question_expired`, `question_updated`)",
            content((QuestionList = "application/json"), (SseEvent = "text/event-stream"))),
        (status = 400, description = "A bad `status`, `limit`, `cursor`, `watch` or `resourceVersion`", body = ErrorBody),
        (status = 410, description = "The watch log no longer keeps `resourceVersion`: list again", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn list(
    State(state): State<RouteState>,
    headers: HeaderMap,
    ApiQuery(params): ApiQuery<ListParams>,
) -> Result<Response, ApiError> {
    // An empty value (`?status=&recipient=`) means "any", as a form with blank fields sends it.
    let given = |value: Option<String>| value.filter(|v| !v.is_empty());
    let filter = QuestionFilter {
        status: given(params.status).as_deref().map(parse_status).transpose()?,
        recipient: given(params.recipient),
        sender: given(params.sender),
        ..QuestionFilter::default()
    };
    if flag("watch", params.watch.as_deref())? {
        let from = match params.resource_version.as_deref() {
            Some(raw) => Some(raw),
            None => headers.get("last-event-id").and_then(|v| v.to_str().ok()),
        };
        let from = from.map(parse_version).transpose()?;
        return watch::respond(&state, filter, from).await;
    }
    let paginated = params.limit.is_some() || params.cursor.is_some();
    let page = PageRequest::parse(params.limit.as_deref(), params.cursor.as_deref())?;
    let limit = if paginated { page.limit + 1 } else { i64::MAX };
    let (version, mut items) = state.questions.list(&filter, page.cursor, limit).await?;
    let (has_more, next_cursor) = if paginated {
        let has_more = items.len() as i64 > page.limit;
        items.truncate(page.limit as usize);
        (Some(has_more), if has_more { items.last().map(|q| q.sequence) } else { None })
    } else {
        (None, None)
    };
    let list = QuestionList { resource_version: version.to_string(), items, has_more, next_cursor };
    Ok(Json(list).into_response())
}

/// `GET /questions/{id}`: one question.
#[utoipa::path(get, path = "/questions/{id}", tag = "questions", operation_id = "get_question",
    params(("id" = String, Path, description = "The question")),
    responses(
        (status = 200, description = "The question", body = Question),
        (status = 404, description = "`Question not found`", body = ErrorBody),
    ))]
#[tracing::instrument(level = "debug", skip_all, fields(question.id = %id))]
pub async fn get(State(state): State<RouteState>, Path(id): Path<String>) -> Result<Json<Question>, ApiError> {
    state.questions.get(&id).await?.map(Json).ok_or_else(not_found)
}

/// `PATCH /questions/{id}`: answers it; the first answer wins, later ones get 409. Who answered is the
/// authenticated principal (or the person a trusted proxy names) when there is one.
#[utoipa::path(
    patch,
    path = "/questions/{id}",
    tag = "questions",
    operation_id = "answer_question",
    params(("id" = String, Path, description = "The question")),
    request_body = Answer,
    responses(
        (status = 200, description = "Answered", body = Question),
        (status = 400, description = "`response` is missing or empty, does not fit the question's `responseSchema` (the message names the field), or the body is not JSON", body = ErrorBody),
        (status = 403, description = "The answer policy does not let this principal answer it (the message says why)", body = ErrorBody),
        (status = 404, description = "`Question not found`", body = ErrorBody),
        (status = 409, description = "Answered, cancelled, expired or declined already: the question as it is", body = QuestionConflict),
        (status = 415, description = "The body is not declared JSON", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all, fields(question.id = %id))]
pub async fn answer(
    State(state): State<RouteState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    ApiJson(answer): ApiJson<Answer>,
) -> Result<Json<Question>, ApiError> {
    let answerer = match &principal {
        Some(Extension(principal)) => Answerer::Principal(principal),
        None => Answerer::Named(answer.answered_by.as_deref()),
    };
    let given = answering::Given::Json(&answer.response);
    into_reply(answering::answer(&state.questions, &state.policy, &id, given, answerer, "api").await?)
}

/// `POST /questions/{id}/answer`: the same as `PATCH /questions/{id}`.
#[utoipa::path(
    post,
    path = "/questions/{id}/answer",
    tag = "questions",
    operation_id = "post_answer",
    params(("id" = String, Path, description = "The question")),
    request_body = Answer,
    responses(
        (status = 200, description = "Answered", body = Question),
        (status = 400, description = "`response` is missing or empty, does not fit the question's `responseSchema` (the message names the field), or the body is not JSON", body = ErrorBody),
        (status = 403, description = "The answer policy does not let this principal answer it (the message says why)", body = ErrorBody),
        (status = 404, description = "`Question not found`", body = ErrorBody),
        (status = 409, description = "Answered, cancelled, expired or declined already: the question as it is", body = QuestionConflict),
        (status = 415, description = "The body is not declared JSON", body = ErrorBody),
    )
)]
pub async fn post_answer(
    state: State<RouteState>,
    id: Path<String>,
    principal: Option<Extension<Principal>>,
    body: ApiJson<Answer>,
) -> Result<Json<Question>, ApiError> {
    answer(state, id, principal, body).await
}

/// `POST /questions/{id}/decline`: the person refuses to answer (unlike a cancel, which is the asker
/// withdrawing the question). Who declined is the authenticated principal when there is one.
#[utoipa::path(
    post,
    path = "/questions/{id}/decline",
    tag = "questions",
    operation_id = "decline_question",
    params(("id" = String, Path, description = "The question")),
    request_body(content = Decline, description = "Optional: why, and who declines"),
    responses(
        (status = 200, description = "Declined", body = Question),
        (status = 400, description = "`reason` too long, or the body is not JSON", body = ErrorBody),
        (status = 403, description = "The answer policy does not let this principal answer it (the message says why)", body = ErrorBody),
        (status = 404, description = "`Question not found`", body = ErrorBody),
        (status = 409, description = "Answered, cancelled, expired or declined already: the question as it is", body = QuestionConflict),
        (status = 415, description = "The body is not declared JSON", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all, fields(question.id = %id))]
pub async fn decline(
    State(state): State<RouteState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    body: Option<ApiJson<Decline>>,
) -> Result<Json<Question>, ApiError> {
    let Decline { reason, declined_by } = body.map(|ApiJson(body)| body).unwrap_or_default();
    let answerer = match &principal {
        Some(Extension(principal)) => Answerer::Principal(principal),
        None => Answerer::Named(declined_by.as_deref()),
    };
    into_reply(answering::decline(&state.questions, &state.policy, &id, reason.as_deref(), answerer, "api").await?)
}

/// `GET /questions/{id}/history`: every recorded step of the question's decision, in order.
#[utoipa::path(get, path = "/questions/{id}/history", tag = "questions", operation_id = "question_history",
    params(("id" = String, Path, description = "The question")),
    responses(
        (status = 200, description = "The steps, oldest first (kept `--question-history-seconds`)", body = History),
        (status = 404, description = "`Question not found` (and no step of it kept)", body = ErrorBody),
    ))]
#[tracing::instrument(level = "debug", skip_all, fields(question.id = %id))]
pub async fn history(State(state): State<RouteState>, Path(id): Path<String>) -> Result<Json<History>, ApiError> {
    let items = state.questions.history(&id).await?;
    if items.is_empty() && state.questions.get(&id).await?.is_none() {
        return Err(not_found());
    }
    Ok(Json(History { question_id: id, items }))
}

/// `{"questionId", "items": [step…]}`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct History {
    /// The question.
    question_id: String,
    /// Its steps, oldest first.
    items: Vec<HistoryItem>,
}

/// `DELETE /questions/{id}`: cancels a pending question (the row stays).
#[utoipa::path(delete, path = "/questions/{id}", tag = "questions", operation_id = "cancel_question",
    params(("id" = String, Path, description = "The question")),
    responses(
        (status = 200, description = "Cancelled", body = Question),
        (status = 404, description = "`Question not found`", body = ErrorBody),
        (status = 409, description = "Answered, cancelled or expired already: the question as it is", body = QuestionConflict),
    ))]
#[tracing::instrument(level = "debug", skip_all, fields(question.id = %id))]
pub async fn cancel(State(state): State<RouteState>, Path(id): Path<String>) -> Result<Json<Question>, ApiError> {
    into_reply(Outcome::Changed(Box::new(state.questions.cancel(&id).await?)))
}

/// The reply to an answer, a decline or a cancel: the question, 409 with the question as it is, 400 when the
/// answer does not fit the question, or 404.
pub fn into_reply(outcome: Outcome) -> Result<Json<Question>, ApiError> {
    let change = match outcome {
        Outcome::Changed(change) => *change,
        Outcome::Refused(invalid) => return Err(invalid.into()),
        Outcome::Forbidden(why) => return Err(ApiError::Forbidden(why)),
    };
    match change {
        Change::Made(question) => Ok(Json(question)),
        Change::Conflict(question) => Err(ApiError::Conflict {
            message: format!("Question {} is already {}", question.id, question.status.as_str()),
            current: [("question".to_owned(), serde_json::to_value(&question).unwrap_or_default())]
                .into_iter()
                .collect(),
        }),
        Change::NotFound => Err(not_found()),
    }
}

fn not_found() -> ApiError {
    ApiError::NotFound("Question not found".into())
}

fn parse_status(raw: &str) -> Result<QuestionStatus, ApiError> {
    QuestionStatus::parse(raw).ok_or_else(|| {
        ApiError::Validation(format!(
            "status: Invalid enum value. Expected 'pending' | 'answered' | 'cancelled' | 'expired' | 'declined', received '{raw}'"
        ))
    })
}

fn parse_version(raw: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>()
        .ok()
        .filter(|v| *v >= 0)
        .ok_or_else(|| ApiError::Validation(format!("resourceVersion: must be a non-negative integer, got '{raw}'")))
}
