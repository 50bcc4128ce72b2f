//! Handlers of the questions REST API.

use axum::{
    Extension, Json,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use serde::{Deserialize, Serialize};

use super::{
    model::{Answer, NewQuestion, Question, QuestionStatus},
    store::{Change, QuestionFilter},
    watch,
};
use crate::{
    auth::Principal,
    error::ApiError,
    http::{
        extract::{ApiJson, ApiQuery},
        params::{PageRequest, flag},
    },
    state::AppState,
};

/// Parameters of `GET /questions`.
#[derive(Debug, Deserialize)]
pub struct ListParams {
    status: Option<String>,
    recipient: Option<String>,
    sender: Option<String>,
    limit: Option<String>,
    cursor: Option<String>,
    watch: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

/// `{"resourceVersion":"N","items":[…]}`, plus the page fields when the request was paginated.
#[derive(Debug, Serialize)]
struct QuestionList {
    #[serde(rename = "resourceVersion")]
    resource_version: String,
    items: Vec<Question>,
    #[serde(rename = "hasMore", skip_serializing_if = "Option::is_none")]
    has_more: Option<bool>,
    #[serde(rename = "nextCursor", skip_serializing_if = "Option::is_none")]
    next_cursor: Option<i64>,
}

/// `POST /questions`: 201 with the stored question.
pub async fn create(
    State(state): State<AppState>,
    principal: Option<Extension<Principal>>,
    ApiJson(mut new): ApiJson<NewQuestion>,
) -> Result<(StatusCode, Json<Question>), ApiError> {
    new.validate()?;
    state.channels.check(&mut new.channels).map_err(ApiError::Validation)?;
    if state.auth.is_on() {
        new.owner = principal.map(|Extension(principal)| principal.name().to_owned());
    }
    Ok((StatusCode::CREATED, Json(state.questions.create(&new).await?)))
}

/// `GET /questions`: the list with its resourceVersion, or with `watch=true` the change stream.
pub async fn list(
    State(state): State<AppState>,
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

/// `GET /questions/{id}`.
pub async fn get(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<Question>, ApiError> {
    state.questions.get(&id).await?.map(Json).ok_or_else(not_found)
}

/// `PATCH /questions/{id}` and `POST /questions/{id}/answer`: the first answer wins, later ones get 409. Who
/// answered is the authenticated principal (or the person a trusted proxy names) when there is one.
pub async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    ApiJson(mut answer): ApiJson<Answer>,
) -> Result<Json<Question>, ApiError> {
    answer.validate()?;
    if let Some(Extension(principal)) = principal {
        answer.answered_by = Some(principal.name().to_owned());
    }
    let change = state.questions.answer(&id, &answer.response, answer.answered_by.as_deref()).await?;
    into_reply(change)
}

/// `DELETE /questions/{id}`: cancels a pending question (the row stays).
pub async fn cancel(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<Question>, ApiError> {
    into_reply(state.questions.cancel(&id).await?)
}

/// The reply to a change: the question, 409 with the question as it is, or 404.
pub fn into_reply(change: Change) -> Result<Json<Question>, ApiError> {
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
            "status: Invalid enum value. Expected 'pending' | 'answered' | 'cancelled' | 'expired', received '{raw}'"
        ))
    })
}

fn parse_version(raw: &str) -> Result<i64, ApiError> {
    raw.parse::<i64>()
        .ok()
        .filter(|v| *v >= 0)
        .ok_or_else(|| ApiError::Validation(format!("resourceVersion: must be a non-negative integer, got '{raw}'")))
}
