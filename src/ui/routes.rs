//! Handlers of the web page: render it, take a form answer, serve the embedded assets.

use axum::{
    Extension,
    extract::{Path, State},
    http::header,
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;

use super::{
    page::{self, Flash, View},
    query_page,
};
use crate::{
    auth::Principal,
    error::ApiError,
    http::extract::{ApiForm, ApiQuery},
    queries::resume,
    questions::{
        Change,
        model::{Answer, QuestionStatus},
        store::QuestionFilter,
    },
    state::AppState,
    streams::unified,
    validate,
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

impl PageParams {
    /// The outcome of the form post that redirected here, if any.
    fn flash(self) -> Option<Flash> {
        if let Some(id) = self.answered {
            Some(Flash::Answered(id))
        } else if let Some(id) = self.conflict {
            Some(Flash::Conflict(id))
        } else if let Some(id) = self.missing {
            Some(Flash::Missing(id))
        } else {
            self.invalid.map(Flash::Invalid)
        }
    }
}

/// `GET /ui`.
pub async fn page(
    State(state): State<AppState>,
    principal: Option<Extension<Principal>>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Response, ApiError> {
    let view = match params.view.as_deref() {
        Some("closed") => View::Closed,
        _ => View::Pending,
    };
    let flash = params.flash();
    let pending = QuestionFilter { status: Some(QuestionStatus::Pending), ..QuestionFilter::default() };
    let (version, pending) = state.questions.list(&pending, 0, VIEW_LIMIT).await?;
    let closed = match view {
        View::Closed => state.questions.recently_closed(VIEW_LIMIT).await?,
        View::Pending => Vec::new(),
    };
    let person = principal.as_ref().map(|Extension(principal)| principal.name());
    Ok(page::render(view, version, &pending, &closed, flash.as_ref(), person).into_response())
}

/// `GET /ui/queries/{namespace}/{name}`: the Query's timeline as stored; the script keeps it live.
pub async fn query_page(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    principal: Option<Extension<Principal>>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Response, ApiError> {
    validate::key("namespace", &namespace)?;
    validate::key("name", &name)?;
    // Not started yet (or not streamed): `unknown`, and the page waits for it.
    let phase = resume::phase(&state, &namespace, &name).await?;
    let events = unified::replay(&state.chunks, &name).await?;
    let items = query_page::timeline(&events);
    let person = principal.as_ref().map(|Extension(principal)| principal.name());
    Ok(query_page::render(&namespace, &name, &phase, &items, params.flash().as_ref(), person).into_response())
}

/// The answer form's fields.
#[derive(Debug, Deserialize)]
pub struct AnswerForm {
    /// Absent counts as empty: reported on the page like an empty answer.
    #[serde(default)]
    response: String,
    #[serde(default, rename = "answeredBy")]
    answered_by: String,
    /// The page to go back to (a Query's page); `/ui` when absent or not one of ours.
    #[serde(default)]
    back: Option<String>,
}

/// `POST /ui/questions/{id}/answer`: answers, then redirects back to the page with the outcome.
pub async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    ApiForm(form): ApiForm<AnswerForm>,
) -> Result<Redirect, ApiError> {
    let answered_by = match principal {
        Some(Extension(principal)) => Some(principal.name().to_owned()),
        None => Some(form.answered_by.trim()).filter(|by| !by.is_empty()).map(str::to_owned),
    };
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
    let back = form.back.filter(|back| is_query_page(back)).unwrap_or_else(|| "/ui".to_owned());
    Ok(Redirect::to(&format!("{back}?{outcome}={id}")))
}

/// Whether `path` is a Query page's path (so the redirect cannot be pointed anywhere else).
fn is_query_page(path: &str) -> bool {
    let Some(rest) = path.strip_prefix("/ui/queries/") else { return false };
    let segments: Vec<&str> = rest.split('/').collect();
    segments.len() == 2
        && segments
            .iter()
            .all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)))
}

/// Keeps an id fit for a query string (ids are `q-<uuid>`; anything else is dropped).
fn url_safe(id: &str) -> String {
    id.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect()
}

/// `GET /ui/assets/app.js`.
pub async fn script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("assets/app.js"))
}

/// `GET /ui/assets/query.js`.
pub async fn query_script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("assets/query.js"))
}

/// `GET /ui/assets/app.css`.
pub async fn stylesheet() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("assets/app.css"))
}
