//! Handlers of the web page: render it, take a form answer, serve the embedded assets.

use axum::{
    Form,
    extract::{Path, State},
    http::header,
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;

use super::page::{self, Flash, View};
use crate::{
    error::ApiError,
    http::extract::ApiQuery,
    questions::{
        Change,
        model::{Answer, QuestionStatus},
        store::QuestionFilter,
    },
    state::AppState,
};

/// Most questions one view shows.
const VIEW_LIMIT: i64 = 500;

/// Query parameters of `/ui`: which tab, and the outcome of a form post to report.
#[derive(Debug, Default, Deserialize)]
pub struct PageParams {
    view: Option<String>,
    answered: Option<String>,
    conflict: Option<String>,
    missing: Option<String>,
    invalid: Option<String>,
}

/// `GET /ui`.
pub async fn page(State(state): State<AppState>, ApiQuery(params): ApiQuery<PageParams>) -> Result<Response, ApiError> {
    let view = match params.view.as_deref() {
        Some("closed") => View::Closed,
        _ => View::Pending,
    };
    let flash = if let Some(id) = params.answered {
        Some(Flash::Answered(id))
    } else if let Some(id) = params.conflict {
        Some(Flash::Conflict(id))
    } else if let Some(id) = params.missing {
        Some(Flash::Missing(id))
    } else {
        params.invalid.map(Flash::Invalid)
    };
    let pending = QuestionFilter { status: Some(QuestionStatus::Pending), ..QuestionFilter::default() };
    let (version, pending) = state.questions.list(&pending, 0, VIEW_LIMIT).await?;
    let closed = match view {
        View::Closed => state.questions.recently_closed(VIEW_LIMIT).await?,
        View::Pending => Vec::new(),
    };
    Ok(page::render(view, version, &pending, &closed, flash.as_ref()).into_response())
}

/// The answer form's fields.
#[derive(Debug, Deserialize)]
pub struct AnswerForm {
    response: String,
    #[serde(default, rename = "answeredBy")]
    answered_by: String,
}

/// `POST /ui/questions/{id}/answer`: answers, then redirects back to the page with the outcome.
pub async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Form(form): Form<AnswerForm>,
) -> Result<Redirect, ApiError> {
    let answered_by = Some(form.answered_by.trim()).filter(|by| !by.is_empty()).map(str::to_owned);
    let answer = Answer { response: form.response, answered_by };
    let outcome = if answer.validate().is_err() {
        "invalid"
    } else {
        match state.questions.answer(&id, &answer.response, answer.answered_by.as_deref()).await? {
            Change::Made(_) => "answered",
            Change::Conflict(_) => "conflict",
            Change::NotFound => "missing",
        }
    };
    let id: String = url_safe(&id);
    Ok(Redirect::to(&format!("/ui?{outcome}={id}")))
}

/// Keeps an id fit for a query string (ids are `q-<uuid>`; anything else is dropped).
fn url_safe(id: &str) -> String {
    id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect()
}

/// `GET /ui/assets/app.js`.
pub async fn script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("assets/app.js"))
}

/// `GET /ui/assets/app.css`.
pub async fn stylesheet() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("assets/app.css"))
}
