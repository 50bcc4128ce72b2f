//! `POST /channels/github/webhook`: GitHub's deliveries, verified (`X-Hub-Signature-256`) and deduplicated
//! (`X-GitHub-Delivery`). A `ping` is acknowledged; an `issue_comment` `created` whose first line is
//! `/answer [Q-XXXX] <text>` answers the question pending on that issue or pull request (the short id picks
//! one when several are), first answer wins, recorded as `github:<login>`; a typed question's answer is a
//! fenced JSON object or `field: value` lines. The outcome is replied as a comment, after the 200 (GitHub
//! gives a webhook ten seconds): answered, already answered, an answer that does not fit (the error quoted,
//! naming the field; the question stays pending), or that the person may not answer it.

use axum::{
    Json,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use serde_json::Value;

use super::short_id;
use crate::{
    channels::{
        RouteState,
        answer::{self, Answered},
        inbound_schema::GitHubEvent,
        receipt::Receipt,
        signature,
    },
    error::{ApiError, ErrorBody},
    http::extract::WholeBody,
    questions::{answering::Given, channel::Channel},
};

/// The handler.
#[utoipa::path(
    post,
    path = "/channels/github/webhook",
    tag = "channels",
    operation_id = "github_webhook",
    params(
        ("X-Hub-Signature-256" = String, Header, description = "`sha256=<hex>`: HMAC-SHA256 of the body with the webhook secret"),
        ("X-GitHub-Delivery" = String, Header, description = "The delivery's id: each is acted on once"),
        ("X-GitHub-Event" = String, Header, description = "`ping`, `issue_comment`, …", example = "issue_comment"),
    ),
    request_body(content = GitHubEvent, content_type = "application/json"),
    responses(
        (status = 200, description = "Taken: what was done, or that the delivery was acted on before", body = Receipt),
        (status = 400, description = "Not JSON, a bad `X-GitHub-Delivery`, or an `issue_comment` without its repository or issue", body = ErrorBody),
        (status = 401, description = "The signature is missing or wrong", body = ErrorBody),
        (status = 404, description = "GitHub webhooks are not configured (`--github-webhook-secret`)", body = ErrorBody),
    )
)]
#[tracing::instrument(level = "debug", skip_all)]
pub async fn receive(
    State(state): State<RouteState>,
    headers: HeaderMap,
    WholeBody(body): WholeBody,
) -> Result<Response, ApiError> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let Some(secret) = &state.config.channels.github_webhook_secret else {
        return Err(ApiError::NotFound("GitHub webhooks are not configured (--github-webhook-secret)".into()));
    };
    signature::github(secret.expose(), &body, header("x-hub-signature-256"))
        .map_err(|refused| ApiError::Unauthorized { message: refused.to_string(), invalid_token: false })?;
    let delivery = header("x-github-delivery");
    crate::validate::key("X-GitHub-Delivery", delivery)?;
    let event: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::BadRequest(format!("invalid JSON body: {e}")))?;
    let act = async {
        match header("x-github-event") {
            "ping" => Ok("pong".to_owned()),
            "issue_comment" if event["action"] == "created" => comment(&state, &event).await,
            other => Ok(format!("ignored: {other} {}", event["action"].as_str().unwrap_or_default())),
        }
    };
    match state.channels.deliveries().once("github", delivery, act).await? {
        Some(outcome) => Ok((StatusCode::OK, Json(Receipt::outcome(outcome))).into_response()),
        None => Ok(Json(Receipt::duplicate()).into_response()),
    }
}

/// A new comment: an `/answer` answers; anything else (bots, the broker's own comments) is ignored.
#[tracing::instrument(level = "debug", skip_all)]
async fn comment(state: &RouteState, event: &Value) -> Result<String, ApiError> {
    let comment = &event["comment"];
    let login = comment["user"]["login"].as_str().unwrap_or_default();
    let text = comment["body"].as_str().unwrap_or_default();
    let by_bot = comment["user"]["type"] == "Bot" || !comment["performed_via_github_app"].is_null();
    if by_bot || text.contains("<!-- ark-broker:question:") || login.is_empty() {
        return Ok("ignored: a bot's comment".into());
    }
    let Some(command) = Command::parse(text) else {
        return Ok("ignored: not an /answer".into());
    };
    crate::validate::key("comment.user.login", login)?;
    let (Some(repository), Some(number)) =
        (event["repository"]["full_name"].as_str(), event["issue"]["number"].as_u64())
    else {
        return Err(ApiError::BadRequest("an issue_comment without repository.full_name or issue.number".into()));
    };
    let channel = match Channel::parse(&format!("github:{repository}#{number}")) {
        Ok(channel) => channel.to_string(),
        Err(_) => return Err(ApiError::BadRequest(format!("repository.full_name: '{repository}' is not owner/repo"))),
    };
    let here = state.channels.deliveries().questions_on(&channel).await?;
    let open = state.questions.pending_among(&here).await?;
    let questions: Vec<(String, bool)> = here
        .into_iter()
        .map(|id| {
            let pending = open.contains(&id);
            (id, pending)
        })
        .collect();
    let pending: Vec<&String> = questions.iter().filter(|(_, pending)| *pending).map(|(id, _)| id).collect();
    let ids = |of: &[&String]| of.iter().map(|id| format!("`{}`", short_id(id))).collect::<Vec<_>>().join(", ");
    let chosen = match &command.short_id {
        // A short id names any question delivered here (an answered one gets "already answered by …").
        Some(wanted) => match questions.iter().rev().find(|(id, _)| short_id(id).eq_ignore_ascii_case(wanted)) {
            Some((id, _)) => Ok(id),
            None if pending.is_empty() => Err(format!("There is no question {wanted} here.")),
            None => Err(format!("There is no question {wanted} here; pending here: {}.", ids(&pending))),
        },
        None if pending.len() == 1 => Ok(pending[0]),
        None if pending.len() > 1 => Err(format!(
            "Several questions are pending here: write `/answer <id> <your answer>` with one of {}.",
            ids(&pending)
        )),
        // Nothing pending: a late answer hears about the latest question delivered here.
        None => match questions.last() {
            Some((id, _)) => Ok(id),
            None => return Ok("ignored: no question was asked here".into()),
        },
    };
    let id = match chosen {
        Ok(id) => id,
        Err(why) => return Ok(reply(state, &channel, why)),
    };
    let typed = state.questions.get(id).await?.is_some_and(|question| question.response_schema.is_some());
    let text = command.answer(typed);
    if text.is_empty() {
        return Ok(reply(state, &channel, "Nothing to answer with: write `/answer <your answer>`.".to_owned()));
    }
    let short = short_id(id);
    let reply_text = match answer::answer(state, id, Given::Text(&text), format!("github:{login}")).await? {
        Answered::Refused(why) if typed => format!(
            "{short} was not answered, and is still pending:\n\n> {why}\n\nAnswer with `/answer` and the form's \
             fields: a JSON object in a fenced ```` ```json ```` block, or one `field: value` line per field (the \
             question lists them)."
        ),
        Answered::Refused(why) => format!("{short} was not answered, and is still pending:\n\n> {why}"),
        Answered::Forbidden(why) => format!("@{login}, you may not answer {short}: {why}."),
        Answered::Made => format!("Answered {short} — thank you, @{login}."),
        Answered::Closed(question) => format!(
            "{short} was already {} by {}.",
            question.status.as_str(),
            question.answered_by.as_deref().unwrap_or("someone else")
        ),
        Answered::NotFound => return Ok("ignored: the question is gone".into()),
    };
    Ok(reply(state, &channel, reply_text))
}

/// Replies `text` on the issue or pull request `channel` (after the webhook's 200); returns it, the outcome.
fn reply(state: &RouteState, channel: &str, text: String) -> String {
    if let Ok(Channel::GitHub { owner, repo, number }) = Channel::parse(channel) {
        state.channels.reply_on_github(owner, repo, number, text.clone());
    }
    text
}

/// An `/answer` comment: `/answer [Q-XXXX] <text>`, and the lines after it.
#[derive(Debug, PartialEq, Eq)]
struct Command {
    short_id: Option<String>,
    /// The rest of the first line.
    first: String,
    /// The lines after the first.
    after: String,
}

impl Command {
    fn parse(comment: &str) -> Option<Command> {
        let comment = comment.trim_start();
        let (first, rest) = comment.split_once('\n').unwrap_or((comment, ""));
        let after = first.trim_end().strip_prefix("/answer")?;
        // `/answer` is a word of its own: `/answers …` or `/answerme` is not the command.
        if !(after.is_empty() || after.starts_with(char::is_whitespace)) {
            return None;
        }
        let after = after.trim();
        let (short_id, text) = match after.split_once(char::is_whitespace) {
            Some((first, text)) if looks_like_short_id(first) => (Some(first.to_ascii_uppercase()), text.trim()),
            None if looks_like_short_id(after) => (Some(after.to_ascii_uppercase()), ""),
            _ => (None, after),
        };
        Some(Command { short_id, first: text.to_owned(), after: rest.trim().to_owned() })
    }

    /// The answer: for a text question the rest of the first line, or when that is empty the lines after it
    /// (so a signature below a one-line answer is not part of it); for a typed question all of it (a fenced
    /// JSON block, or `field: value` lines, may start on the first line).
    fn answer(&self, typed: bool) -> String {
        match (typed, self.first.is_empty(), self.after.is_empty()) {
            (_, true, _) => self.after.clone(),
            (true, false, false) => format!("{}\n{}", self.first, self.after),
            _ => self.first.clone(),
        }
    }
}

/// `Q-` (or `q-`) and four hex digits, as [`short_id`] writes them: "Q-tips" is an answer, not an id.
fn looks_like_short_id(word: &str) -> bool {
    word.len() == 6 && word[..2].eq_ignore_ascii_case("q-") && word[2..].bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::Command;
    use crate::{
        channels::router,
        http::documented::{assert_documented, document_of, request_body},
    };

    /// Every field of a delivery [`super::receive`] and [`super::comment`] read, as they read it. A field read
    /// there is added here, and to `GitHubEvent` (`channels/inbound_schema.rs`), which the document shows.
    const READS: &[(&str, &str)] = &[
        ("action", "string"),
        ("comment.body", "string"),
        ("comment.user.login", "string"),
        ("comment.user.type", "string"),
        ("comment.performed_via_github_app", "object"),
        ("issue.number", "integer"),
        ("repository.full_name", "string"),
    ];

    #[test]
    fn every_field_the_webhook_reads_is_documented_alike() {
        let document = document_of(router());
        let body = request_body(&document, "post", "/channels/github/webhook", "application/json");
        assert_documented(&document, body, READS);
    }

    fn command(short_id: Option<&str>, first: &str, after: &str) -> Option<Command> {
        Some(Command { short_id: short_id.map(str::to_owned), first: first.to_owned(), after: after.to_owned() })
    }

    #[test]
    fn answer_commands_are_read_as_people_write_them() {
        assert_eq!(Command::parse("/answer yes please"), command(None, "yes please", ""));
        assert_eq!(Command::parse("/answer q-6c72 yes"), command(Some("Q-6C72"), "yes", ""));
        assert_eq!(Command::parse("/answer Q-tips are fine"), command(None, "Q-tips are fine", ""));
        assert_eq!(Command::parse("/answer\nYes, go ahead\n"), command(None, "", "Yes, go ahead"));
        assert_eq!(Command::parse("/answer Q-0A1B\nship it"), command(Some("Q-0A1B"), "", "ship it"));
        assert_eq!(Command::parse("/answer"), command(None, "", ""));
        let signed = Command::parse("/answer yes\n-- dave").unwrap();
        assert_eq!((signed.answer(false).as_str(), signed.answer(true).as_str()), ("yes", "yes\n-- dave"));
        let lines = Command::parse("/answer decision: approve\nreplicas: 2").unwrap();
        assert_eq!(lines.answer(true), "decision: approve\nreplicas: 2", "a typed answer is every line");
        let fenced = Command::parse("/answer\n```json\n{\"a\": 1}\n```").unwrap();
        assert_eq!(fenced.answer(true), "```json\n{\"a\": 1}\n```");
        assert_eq!(Command::parse("/answeryes please"), None);
        assert_eq!(Command::parse("/answers are below"), None);
        assert_eq!(Command::parse("I think /answer yes"), None);
    }
}
