//! The page's form posts, which work without JavaScript: an answer (a text box's text, an option, or a typed
//! form's fields made into the object REST takes) and a decline, each through `questions::answering` as REST
//! does, then a redirect back to the page with the outcome. An answer that does not fit the question's form
//! gets the error page naming the field; one that cannot be stored (the database stays down beyond the
//! ride-through window, `--db-ride-through-ms`, as for a REST answer) the error page with the form again.

use axum::{
    Extension,
    extract::{Path, State},
    response::{IntoResponse, Redirect, Response},
};

use super::{
    error_page::{Unsent, reachable_for_a_write},
    typed_answer::{self, Pairs},
};
use crate::{
    auth::Principal,
    db::StoreResult,
    error::ApiError,
    http::extract::ApiForm,
    questions::{
        Change,
        answering::{self, Given, Outcome},
        form::ResponseSchema,
        policy::Answerer,
    },
    state::AppState,
};

/// The value of the form's field `name` (the last, when it repeats).
fn value<'a>(pairs: &'a Pairs, name: &str) -> Option<&'a str> {
    pairs.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// Who answers: the person authentication names, else whoever the form says (maybe nobody).
fn answerer<'a>(principal: Option<&'a Principal>, pairs: &'a Pairs) -> Answerer<'a> {
    match principal {
        Some(principal) => Answerer::Principal(principal),
        None => Answerer::Named(value(pairs, "answeredBy").map(str::trim).filter(|by| !by.is_empty())),
    }
}

/// The page to go back to: a Query's page the form names, else `/ui`.
fn back(pairs: &Pairs) -> Option<String> {
    value(pairs, "back").filter(|back| is_query_page(back)).map(str::to_owned)
}

/// `POST /ui/questions/{id}/answer`: answers, then redirects back to the page with the outcome. When the
/// answer cannot be stored (the database is down), the error page shows the form again with the answer in it.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    ApiForm(pairs): ApiForm<Vec<(String, String)>>,
) -> Response {
    let principal = principal.map(|Extension(principal)| principal);
    let person = principal.as_ref().map(|principal| principal.name().to_owned());
    let typed = typed_answer::is_typed(&pairs);
    let stored = match reachable_for_a_write(&state).await {
        Ok(()) => store_answer(&state, &id, &pairs, answerer(principal.as_ref(), &pairs)).await.map_err(ApiError::from),
        Err(error) => Err(error),
    };
    let outcome = match stored {
        Ok(outcome) => outcome,
        Err(error) => {
            let response = match typed {
                true => typed_answer::as_lines(&pairs),
                false => value(&pairs, "response").unwrap_or_default().to_owned(),
            };
            let answered_by = value(&pairs, "answeredBy").unwrap_or_default().to_owned();
            let unsent = Unsent { id, response, answered_by, back: back(&pairs), person };
            return (Extension(unsent), error).into_response();
        }
    };
    match outcome {
        // A typed answer that does not fit says which field and why; an empty text answer is reported on the
        // page, as before.
        Outcome::Refused(invalid) if typed => ApiError::from(invalid).into_response(),
        outcome => redirect(&pairs, &id, flash(outcome, "answered")),
    }
}

/// Answers with the form's fields made into the typed answer when the form is the question's typed form,
/// else with the text it posted.
async fn store_answer(state: &AppState, id: &str, pairs: &Pairs, answerer: Answerer<'_>) -> StoreResult<Outcome> {
    let (questions, policy) = (&state.questions, &state.answer_policy);
    if typed_answer::is_typed(pairs)
        && let Some(question) = questions.get(id).await?
        && let Some(Ok(schema)) = question.response_schema.as_ref().map(ResponseSchema::parse)
    {
        let response = typed_answer::answer(&schema, pairs);
        return answering::answer(questions, policy, id, Given::Json(&response), answerer, "page").await;
    }
    let text = value(pairs, "response").unwrap_or_default();
    answering::answer(questions, policy, id, Given::Text(text), answerer, "page").await
}

/// `POST /ui/questions/{id}/decline` (the answer form's Decline button): declines with the reason given,
/// then redirects back to the page with the outcome.
#[tracing::instrument(level = "debug", skip_all)]
pub async fn decline(
    State(state): State<AppState>,
    Path(id): Path<String>,
    principal: Option<Extension<Principal>>,
    ApiForm(pairs): ApiForm<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    reachable_for_a_write(&state).await?;
    let principal = principal.map(|Extension(principal)| principal);
    let reason = value(&pairs, "reason").map(str::trim).filter(|reason| !reason.is_empty());
    let answerer = answerer(principal.as_ref(), &pairs);
    let outcome = answering::decline(&state.questions, &state.answer_policy, &id, reason, answerer, "page").await?;
    Ok(match outcome {
        Outcome::Refused(invalid) => return Err(invalid.into()),
        outcome => redirect(&pairs, &id, flash(outcome, "declined")),
    })
}

/// The outcome's name in the redirect (`done` when the change was made).
fn flash(outcome: Outcome, done: &'static str) -> &'static str {
    match outcome {
        Outcome::Changed(change) => match *change {
            Change::Made(_) => done,
            Change::Conflict(_) => "conflict",
            Change::NotFound => "missing",
        },
        Outcome::Refused(_) => "invalid",
        Outcome::Forbidden(_) => "forbidden",
    }
}

/// Back to the page the form came from, saying what happened to question `id`.
fn redirect(pairs: &Pairs, id: &str, outcome: &str) -> Response {
    let back = back(pairs).unwrap_or_else(|| "/ui".to_owned());
    Redirect::to(&format!("{back}?{outcome}={}", url_safe(id))).into_response()
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
