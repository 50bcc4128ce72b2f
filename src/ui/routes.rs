//! Handlers of the web page: render it (a page of a tab, searched and filtered), render one card for the
//! script, serve the embedded assets. The form posts are [`super::form_post`]'s.

use std::collections::HashMap;

use axum::{
    Extension,
    extract::{Path, State},
    http::header,
    response::{IntoResponse, Response},
};
use serde::Deserialize;

use super::{
    answer_form::Shape,
    cards::{self, Extras},
    error_page::reachable,
    filters::{self, Search},
    page::{self, Flash, Listing, View},
    query_page::{self, Around, Offer},
    question_page,
};
use crate::{
    auth::Principal,
    error::ApiError,
    http::extract::ApiQuery,
    queries::resume,
    questions::{
        model::{Question, QuestionStatus},
        policy::{AnswerPolicy, Answerer},
        store::QuestionFilter,
        store::list::Counted,
    },
    state::AppState,
    streams::unified,
    validate,
};

/// Most questions one page of a tab shows; the pager goes on from there.
const VIEW_LIMIT: usize = 500;
/// Most pending questions of one Query whose forms its page shapes (any beyond get a text box).
const QUERY_PAGE_QUESTIONS: i64 = 100;

/// Query parameters of `/ui`: which tab, which page, the search, and the outcome of a form post to report.
#[derive(Debug, Default, Deserialize)]
pub struct PageParams {
    view: Option<String>,
    cursor: Option<String>,
    #[serde(flatten)]
    search: Search,
    answered: Option<String>,
    declined: Option<String>,
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
            .or_else(|| flash(Flash::Declined, &self.declined))
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
    let ids: Vec<String> = questions.iter().map(|question| question.id.clone()).collect();
    let histories = state.questions.histories(&ids).await?;
    let principal = principal.as_ref().map(|Extension(principal)| principal);
    let refusals = refusals(&state.answer_policy, &questions, principal).await;
    let listing = Listing {
        view,
        version,
        questions: &questions,
        histories: &histories,
        refusals: &refusals,
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
#[tracing::instrument(level = "debug", skip_all, fields(question.id = %id))]
pub async fn card(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
) -> Result<Response, ApiError> {
    one_question(&state, &id, principal, cards::card).await
}

/// `GET /ui/questions/{id}`: the question on a page of its own (a link to it, e.g. from an MCP client).
#[tracing::instrument(level = "debug", skip_all, fields(question.id = %id))]
pub async fn question_page(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
) -> Result<Response, ApiError> {
    one_question(&state, &id, principal, question_page::render).await
}

/// Question `id` rendered by `render` with what its card shows for this person: its record, and why they may
/// not answer it (then no form).
async fn one_question(
    state: &AppState,
    id: &str,
    principal: Option<Extension<Principal>>,
    render: fn(&Question, Extras<'_>) -> maud::Markup,
) -> Result<Response, ApiError> {
    reachable(state)?;
    let question = state.questions.get(id).await?.ok_or_else(|| ApiError::NotFound("Question not found".into()))?;
    let person = principal.as_ref().map(|Extension(principal)| principal.name());
    let history = state.questions.history(id).await?;
    let principal = principal.as_ref().map(|Extension(principal)| principal);
    let refusals = refusals(&state.answer_policy, std::slice::from_ref(&question), principal).await;
    let refused = refusals.get(&question.id).map(String::as_str);
    Ok(render(&question, Extras { person, refused, history: &history }).into_response())
}

/// Why `person` may not answer each of the pending `questions` they may not (the answer policy's words), so
/// their cards offer no form. Without a person, the policy is asked about an unnamed answerer, as a post of
/// the form would be.
async fn refusals(
    policy: &AnswerPolicy,
    questions: &[Question],
    principal: Option<&Principal>,
) -> HashMap<String, String> {
    let answerer = match principal {
        Some(principal) => Answerer::Principal(principal),
        None => Answerer::Named(None),
    };
    let mut refusals = HashMap::new();
    for question in questions.iter().filter(|question| question.status == QuestionStatus::Pending) {
        if let Err(why) = policy.check(question, answerer).await {
            refusals.insert(question.id.clone(), why);
        }
    }
    refusals
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
    // Its pending questions, for the form each takes (or why this person may not answer it).
    let filter = QuestionFilter {
        status: Some(QuestionStatus::Pending),
        query_name: Some(name.clone()),
        query_namespace: Some(namespace.clone()),
        ..QuestionFilter::default()
    };
    let (_, pending) = state.questions.list(&filter, 0, QUERY_PAGE_QUESTIONS).await?;
    let principal = principal.as_ref().map(|Extension(principal)| principal);
    let mut refusals = refusals(&state.answer_policy, &pending, principal).await;
    let offers = pending
        .iter()
        .map(|question| {
            let offer = match refusals.remove(&question.id) {
                Some(why) => Offer::Refused(why),
                None => Offer::Form(Shape::of(question)),
            };
            (question.id.clone(), offer)
        })
        .collect();
    let flash = params.flash();
    let around = Around { offers: &offers, flash: flash.as_ref(), person };
    Ok(query_page::render(&namespace, &name, &phase, &items, &around).into_response())
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

/// `GET /ui/assets/form.js`.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn form_script() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/javascript; charset=utf-8")], include_str!("assets/form.js"))
}

/// `GET /ui/assets/app.css`.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn stylesheet() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], include_str!("assets/app.css"))
}
