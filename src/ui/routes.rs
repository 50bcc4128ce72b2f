//! Handlers of the web page: render it (a page of a tab, searched and filtered), render one card for the
//! script, take a form answer, serve the embedded assets.

use axum::{
    Extension,
    extract::{Path, State},
    http::header,
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;

use super::{
    cards,
    error_page::{Unsent, reachable},
    filters::{self, Search},
    page::{self, Flash, Listing, View},
    query_page,
};
use crate::{
    auth::Principal,
    error::ApiError,
    http::extract::{ApiForm, ApiQuery},
    queries::resume,
    questions::{
        Change,
        answering::{self, Given, Outcome},
        list::Counted,
        model::QuestionStatus,
        policy::Answerer,
        store::QuestionFilter,
    },
    state::AppState,
    streams::unified,
    validate,
};

/// Most questions one page of a tab shows; the pager goes on from there.
const VIEW_LIMIT: usize = 500;

/// Query parameters of `/ui`: which tab, which page, the search, and the outcome of a form post to report.
#[derive(Debug, Default, Deserialize)]
pub struct PageParams {
    view: Option<String>,
    cursor: Option<String>,
    #[serde(flatten)]
    search: Search,
    answered: Option<String>,
    conflict: Option<String>,
    missing: Option<String>,
    invalid: Option<String>,
    forbidden: Option<String>,
}

impl PageParams {
    /// The outcome of the form post that redirected here, if any.
    fn flash(&self) -> Option<Flash> {
        let flash = |make: fn(String) -> Flash, id: &Option<String>| id.clone().map(make);
        flash(Flash::Answered, &self.answered)
            .or_else(|| flash(Flash::Conflict, &self.conflict))
            .or_else(|| flash(Flash::Missing, &self.missing))
            .or_else(|| flash(Flash::Invalid, &self.invalid))
            .or_else(|| flash(Flash::Forbidden, &self.forbidden))
    }
}

/// `GET /ui`.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn page(
    State(state): State<AppState>,
    principal: Option<Extension<Principal>>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Response, ApiError> {
    reachable(&state)?;
    let view = match params.view.as_deref() {
        Some("closed") => View::Closed,
        _ => View::Pending,
    };
    let flash = params.flash();
    let search = params.search.cleaned();
    let cursor = params.cursor.as_deref();
    let (tab, after) = match view {
        View::Pending => (
            QuestionFilter { status: Some(QuestionStatus::Pending), ..search.filter() },
            filters::pending_cursor(cursor)?,
        ),
        View::Closed => {
            (QuestionFilter { closed: true, closed_before: filters::closed_cursor(cursor)?, ..search.filter() }, 0)
        }
    };
    // The tab's page, and the exact pending count under the search (the tab's and the title's), in one snapshot.
    let Counted { version, mut questions, pending } =
        state.questions.list_counting_pending(&tab, after, VIEW_LIMIT as i64 + 1, &search.filter()).await?;
    let has_more = questions.len() > VIEW_LIMIT;
    questions.truncate(VIEW_LIMIT);
    let next = has_more.then(|| questions.last()).flatten().map(|last| match view {
        View::Pending => last.sequence.to_string(),
        View::Closed => filters::closed_cursor_after(last.closed.unwrap_or(last.created), last.sequence),
    });
    let person = principal.as_ref().map(|Extension(principal)| principal.name());
    let listing = Listing {
        view,
        version,
        questions: &questions,
        pending,
        next,
        first_page: cursor.is_none_or(str::is_empty),
        search: &search,
        flash: flash.as_ref(),
        person,
    };
    Ok(page::render(&listing).into_response())
}

/// `GET /ui/questions/{id}/card`: one question's card as an HTML fragment, for the script to insert when a
/// question arrives or closes while the page is open. Rendering it here rather than in the script keeps one
/// renderer for cards (Markdown sanitised by ammonia, friendly names, outcome), and the watch's JSON carries
/// nothing page-specific. The fragment is built by maud (escaped) and ammonia (sanitised); inserting it cannot
/// run script, and the page's Content-Security-Policy forbids inline script besides.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn card(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
) -> Result<Response, ApiError> {
    reachable(&state)?;
    let question = state.questions.get(&id).await?.ok_or_else(|| ApiError::NotFound("Question not found".into()))?;
    let person = principal.as_ref().map(|Extension(principal)| principal.name());
    Ok(cards::card(&question, person).into_response())
}

/// `GET /ui/queries/{namespace}/{name}`: the Query's timeline as stored; the script keeps it live.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn query_page(
    State(state): State<AppState>,
    Path((namespace, name)): Path<(String, String)>,
    principal: Option<Extension<Principal>>,
    ApiQuery(params): ApiQuery<PageParams>,
) -> Result<Response, ApiError> {
    reachable(&state)?;
    validate::key("namespace", &namespace)?;
    validate::key("name", &name)?;
    // Not started yet (or not streamed): `unknown`, and the page waits for it.
    let phase = resume::phase(&state.query_state, &namespace, &name).await?;
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

/// `POST /ui/questions/{id}/answer`: answers, then redirects back to the page with the outcome. When the
/// answer cannot be stored (the database is down), the error page shows the form again with the text in it.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    ApiForm(form): ApiForm<AnswerForm>,
) -> Response {
    let principal = principal.map(|Extension(principal)| principal);
    let person = principal.as_ref().map(|principal| principal.name().to_owned());
    let named = Some(form.answered_by.trim()).filter(|by| !by.is_empty());
    let answerer = match &principal {
        Some(principal) => Answerer::Principal(principal),
        None => Answerer::Named(named),
    };
    let back = form.back.filter(|back| is_query_page(back));
    let given = Given::Text(&form.response);
    let stored = match reachable(&state) {
        Ok(()) => answering::answer(&state.questions, &state.answer_policy, &id, given, answerer, "page")
            .await
            .map_err(ApiError::from),
        Err(error) => Err(error),
    };
    let outcome = match stored {
        Ok(Outcome::Changed(change)) => match *change {
            Change::Made(_) => "answered",
            Change::Conflict(_) => "conflict",
            Change::NotFound => "missing",
        },
        Ok(Outcome::Refused(_)) => "invalid",
        Ok(Outcome::Forbidden(_)) => "forbidden",
        Err(error) => {
            let unsent = Unsent { id, response: form.response, answered_by: form.answered_by, back, person };
            return (Extension(unsent), error).into_response();
        }
    };
    let id: String = url_safe(&id);
    let back = back.unwrap_or_else(|| "/ui".to_owned());
    Redirect::to(&format!("{back}?{outcome}={id}")).into_response()
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
#[tracing::instrument(level = "debug", skip_all)]
pub async fn script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("assets/app.js"))
}

/// `GET /ui/assets/query.js`.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn query_script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("assets/query.js"))
}

/// `GET /ui/assets/app.css`.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn stylesheet() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("assets/app.css"))
}
