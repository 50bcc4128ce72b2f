//! `POST /channels/github/webhook`: GitHub's deliveries, verified (`X-Hub-Signature-256`) and deduplicated
//! (`X-GitHub-Delivery`). A `ping` is acknowledged; an `issue_comment` `created` whose first line is
//! `/answer [Q-XXXX] <text>` answers the question pending on that issue or pull request (the short id picks
//! one when several are), first answer wins, recorded as `github:<login>`. The outcome is replied as a
//! comment, after the 200: GitHub gives a webhook ten seconds.

use axum::{
    Json,
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use super::{
    Channel,
    answer::{self, Answered},
    short_id, signature,
};
use crate::{error::ApiError, state::AppState};

/// The handler.
pub async fn receive(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let Some(secret) = &state.config.github_webhook_secret else {
        return Err(ApiError::NotFound("GitHub webhooks are not configured (--github-webhook-secret)".into()));
    };
    signature::github(secret.expose(), &body, header("x-hub-signature-256"))
        .map_err(|refused| ApiError::Unauthorized { message: refused.to_string(), invalid_token: false })?;
    let delivery = header("x-github-delivery");
    if delivery.is_empty() {
        return Err(ApiError::BadRequest("X-GitHub-Delivery is required".into()));
    }
    if !state.channels.deliveries().first_sight("github", delivery).await? {
        return Ok(Json(json!({"ok": true, "duplicate": true})).into_response());
    }
    let event: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
    let outcome = match header("x-github-event") {
        "ping" => "pong".to_owned(),
        "issue_comment" if event["action"] == "created" => comment(&state, &event).await?,
        other => format!("ignored: {other} {}", event["action"].as_str().unwrap_or_default()),
    };
    Ok((StatusCode::OK, Json(json!({"ok": true, "outcome": outcome}))).into_response())
}

/// A new comment: an `/answer` answers; anything else (bots, the broker's own comments) is ignored.
async fn comment(state: &AppState, event: &Value) -> Result<String, ApiError> {
    let comment = &event["comment"];
    let login = comment["user"]["login"].as_str().unwrap_or_default();
    let text = comment["body"].as_str().unwrap_or_default();
    let by_bot = comment["user"]["type"] == "Bot" || !comment["performed_via_github_app"].is_null();
    if by_bot || text.contains("<!-- ark-broker:question:") || login.is_empty() {
        return Ok("ignored: a bot's comment".into());
    }
    let Some(command) = text.lines().next().and_then(|line| line.trim().strip_prefix("/answer")) else {
        return Ok("ignored: not an /answer".into());
    };
    let (Some(repository), Some(number)) =
        (event["repository"]["full_name"].as_str(), event["issue"]["number"].as_u64())
    else {
        return Err(ApiError::BadRequest("an issue_comment without repository.full_name or issue.number".into()));
    };
    let channel = format!("github:{repository}#{number}");
    let questions = state.channels.deliveries().questions_on(&channel).await?;
    let pending: Vec<&String> = questions.iter().filter(|(_, pending)| *pending).map(|(id, _)| id).collect();
    let command = command.trim();
    // A short id names any question delivered here (an answered one gets "already answered by …").
    let (chosen, answer) = match command.split_once(char::is_whitespace) {
        Some((first, rest)) if first.starts_with("Q-") => {
            (questions.iter().map(|(id, _)| id).rev().find(|id| short_id(id).eq_ignore_ascii_case(first)), rest.trim())
        }
        _ if pending.len() == 1 => (pending.first().copied(), command),
        _ => (None, command),
    };
    let reply = match (chosen, answer.is_empty()) {
        (_, true) => "Nothing to answer with: write `/answer <your answer>`.".to_owned(),
        (None, _) if pending.is_empty() => return Ok("ignored: no question pending here".into()),
        (None, _) => {
            let ids: Vec<String> = pending.iter().map(|id| format!("`{}`", short_id(id))).collect();
            format!(
                "Several questions are pending here: write `/answer <id> <your answer>` with one of {}.",
                ids.join(", ")
            )
        }
        (Some(id), false) => match answer::answer(state, id, answer, format!("github:{login}")).await? {
            Answered::Refused(why) => format!("{} was not answered: {why}.", short_id(id)),
            Answered::Made => format!("Answered {} — thank you, @{login}.", short_id(id)),
            Answered::Closed(question) => format!(
                "{} was already {} by {}.",
                short_id(id),
                question.status.as_str(),
                question.answered_by.as_deref().unwrap_or("someone else")
            ),
            Answered::NotFound => return Ok("ignored: the question is gone".into()),
        },
    };
    if let Ok(Channel::GitHub { owner, repo, number }) = Channel::parse(&channel) {
        state.channels.reply_on_github(owner, repo, number, reply.clone());
    }
    Ok(reply)
}
