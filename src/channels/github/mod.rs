//! GitHub, both ways. This file is the REST API client, outbound: a question as a comment on an issue or pull
//! request, saying how to answer (`/answer <text>`, or `/answer <short id> <text>` when several are pending
//! there; for a typed question its fields, and the answer as a fenced JSON block or `field: value` lines) and
//! carrying a hidden marker with the question's id. What GitHub sends back arrives at the [`webhook`]; nothing
//! here reaches Slack's side.

pub(super) mod webhook;

use std::time::Duration;

use serde_json::{Value, json};

use crate::{
    channels::{
        form::Form,
        send::{Message, SendError, Sent, retry_after},
    },
    config::Secret,
};

/// GitHub requires a `User-Agent` on every request.
const USER_AGENT: &str = concat!("ark-broker/", env!("CARGO_PKG_VERSION"));

/// The GitHub REST API with the broker's token.
#[derive(Debug, Clone)]
pub struct GitHub {
    http: reqwest::Client,
    base: String,
    token: Secret,
}

impl GitHub {
    /// A client of `base` (e.g. `https://api.github.com`).
    pub fn new(http: reqwest::Client, base: &str, token: Secret) -> Self {
        GitHub { http, base: base.trim_end_matches('/').to_owned(), token }
    }

    /// Comments `message` on issue or pull request `number` of `owner/repo`.
    pub async fn comment(
        &self,
        owner: &str,
        repo: &str,
        number: u64,
        message: &Message<'_>,
    ) -> Result<Sent, SendError> {
        self.create_comment(owner, repo, number, &body(message)).await
    }

    /// Comments `text` (Markdown) on issue or pull request `number` of `owner/repo`.
    pub async fn create_comment(&self, owner: &str, repo: &str, number: u64, text: &str) -> Result<Sent, SendError> {
        let response = self
            .http
            .post(format!("{}/repos/{owner}/{repo}/issues/{number}/comments", self.base))
            .bearer_auth(self.token.expose())
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", "2022-11-28")
            .header("user-agent", USER_AGENT)
            .json(&json!({"body": text}))
            .send()
            .await
            .map_err(|e| SendError::Transient(format!("creating the comment: {e}")))?;
        let status = response.status().as_u16();
        if let Some(wait) = rate_limited(status, response.headers()) {
            return Err(SendError::RateLimited(wait));
        }
        if status >= 500 {
            return Err(SendError::Transient(format!("creating the comment: HTTP {status}")));
        }
        if status != 201 {
            let detail = response.text().await.unwrap_or_default();
            return Err(SendError::Permanent(format!("creating the comment: HTTP {status} {detail}")));
        }
        let comment: Value =
            response.json().await.map_err(|e| SendError::Transient(format!("reading the comment: {e}")))?;
        Ok(Sent {
            url: comment["html_url"].as_str().map(str::to_owned),
            reference: json!({"commentId": comment["id"]}),
        })
    }
}

/// GitHub's rate limits, as its docs say to read them: a 403 or 429 with `Retry-After` (the secondary limits)
/// waits that long; one with `x-ratelimit-remaining: 0` waits until `x-ratelimit-reset` (Unix seconds); any
/// other 429, a minute.
fn rate_limited(status: u16, headers: &axum::http::HeaderMap) -> Option<Duration> {
    if status != 403 && status != 429 {
        return None;
    }
    if let Some(wait) = retry_after(headers) {
        return Some(wait);
    }
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if header("x-ratelimit-remaining") == Some("0") {
        let reset: i64 = header("x-ratelimit-reset").and_then(|v| v.trim().parse().ok()).unwrap_or(0);
        let seconds = (reset - chrono::Utc::now().timestamp()).clamp(1, 3600);
        return Some(Duration::from_secs(seconds as u64));
    }
    (status == 429).then_some(Duration::from_secs(60))
}

/// The short id people type in `/answer Q-7F3A …`: `Q-` and the first four hex digits of the question's id.
pub fn short_id(question_id: &str) -> String {
    let hex: String = question_id.trim_start_matches("q-").chars().filter(char::is_ascii_hexdigit).take(4).collect();
    format!("Q-{}", hex.to_ascii_uppercase())
}

/// The comment's Markdown.
fn body(message: &Message<'_>) -> String {
    let mut text = format!("**Question for {}** from {}", message.recipient, message.sender);
    if let Some(query) = message.query {
        text.push_str(&format!(" (Query `{query}`)"));
    }
    text.push_str("\n\n");
    for line in message.content.lines() {
        text.push_str(&format!("> {line}\n"));
    }
    if !message.options.is_empty() {
        let options: Vec<String> = message.options.iter().map(|o| format!("`{o}`")).collect();
        text.push_str(&format!("\nOptions: {}\n", options.join(" · ")));
    }
    let short = short_id(message.question_id);
    match Form::of(message.response_schema) {
        Some(form) => text.push_str(&typed_help(&form, &short)),
        None => text.push_str(&format!(
            "\nAnswer with a comment `/answer <your answer>` (or `/answer {short} <your answer>` when several \
             questions are pending here).\n"
        )),
    }
    text.push_str(&format!("<!-- ark-broker:question:{} -->\n", message.question_id));
    text
}

/// How to answer a typed question: its fields, then the two ways to write an answer, each with an example.
fn typed_help(form: &Form, short: &str) -> String {
    let mut text = String::from("\nThe answer is a form with these fields:\n\n");
    for field in &form.fields {
        let label = match field.label == field.name {
            true => String::new(),
            false => format!(" ({})", field.label.replace('\n', " ")),
        };
        text.push_str(&format!("- `{}`{label}: {}\n", field.name, field.summary()));
    }
    let example = form.example();
    let lines: Vec<String> = example
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, value)| match value {
            Value::String(text) => format!("{name}: {text}"),
            other => format!("{name}: {other}"),
        })
        .collect();
    // Four backticks around the example, so the three of the fenced block inside it show.
    text.push_str(&format!(
        "\nAnswer with a comment starting `/answer` (or `/answer {short}` when several questions are pending \
         here), followed by the fields as a JSON object in a fenced block:\n\n````\n/answer\n```json\n{}\n```\n````\n\n\
         or as one `field: value` line per field (a list as JSON, `[\"a\", \"b\"]`):\n\n```\n/answer\n{}\n```\n\n\
         A field left out takes its default. An answer that does not fit is answered with what is wrong, and the \
         question stays pending.\n",
        serde_json::to_string_pretty(&example).unwrap_or_default(),
        lines.join("\n")
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limits_are_read_as_github_documents_them() {
        let headers = |pairs: &[(&'static str, String)]| {
            let mut map = axum::http::HeaderMap::new();
            for (name, value) in pairs {
                map.insert(*name, value.parse().unwrap());
            }
            map
        };
        let secondary = headers(&[("retry-after", "2".into())]);
        assert_eq!(rate_limited(403, &secondary), Some(Duration::from_secs(2)));
        let reset = (chrono::Utc::now().timestamp() + 30).to_string();
        let primary = headers(&[("x-ratelimit-remaining", "0".into()), ("x-ratelimit-reset", reset)]);
        let wait = rate_limited(403, &primary).unwrap();
        assert!((29..=30).contains(&wait.as_secs()), "{wait:?}");
        assert_eq!(rate_limited(403, &headers(&[])), None, "a plain 403 is a refusal");
        assert_eq!(rate_limited(429, &headers(&[])), Some(Duration::from_secs(60)));
        assert_eq!(rate_limited(500, &secondary), None);
    }

    #[test]
    fn the_comment_quotes_the_question_offers_the_options_and_carries_the_marker() {
        let message = Message {
            question_id: "q-7f3a91c2-0000-4000-8000-000000000000",
            sender: "ark://agents/reviewer",
            recipient: "ark://users/dave",
            content: "Deploy to prod?\nIt is Friday.",
            options: &["Yes, proceed".into(), "No".into()],
            response_schema: None,
            query: Some("team-a/review-42"),
        };
        let text = body(&message);
        assert!(text.contains("> Deploy to prod?\n> It is Friday.\n"), "{text}");
        assert!(text.contains("Options: `Yes, proceed` · `No`"), "{text}");
        assert!(text.contains("`/answer Q-7F3A <your answer>`"), "{text}");
        assert!(text.ends_with("<!-- ark-broker:question:q-7f3a91c2-0000-4000-8000-000000000000 -->\n"), "{text}");
    }

    #[test]
    fn a_typed_question_lists_its_fields_and_shows_both_ways_to_answer() {
        let schema = json!({"type": "object", "required": ["decision"], "properties": {
            "decision": {"type": "string", "title": "Decision", "enum": ["approve", "reject"]},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
            "regions": {"type": "array", "items": {"type": "string", "enum": ["eu", "us"]}}}});
        let message = Message {
            question_id: "q-0a1b0000-0000-4000-8000-000000000000",
            sender: "ark://agents/deployer",
            recipient: "ark://users/dave",
            content: "Deploy?",
            options: &[],
            response_schema: Some(&schema),
            query: None,
        };
        let text = body(&message);
        assert!(text.contains("- `decision` (Decision): one of `approve`, `reject`, required\n"), "{text}");
        assert!(text.contains("- `replicas`: integer, 1 to 10, default `3`\n"), "{text}");
        assert!(text.contains("- `regions`: a list of `eu`, `us`\n"), "{text}");
        assert!(text.contains("(or `/answer Q-0A1B` when several"), "{text}");
        let json_block = "````\n/answer\n```json\n{\n  \"decision\": \"approve\",\n  \"replicas\": 3,\n  \"regions\": [\n    \"eu\"\n  ]\n}\n```\n````";
        assert!(text.contains(json_block), "{text}");
        assert!(text.contains("```\n/answer\ndecision: approve\nreplicas: 3\nregions: [\"eu\"]\n```"), "{text}");
        // Each example is an answer the broker takes.
        let schema = crate::questions::form::ResponseSchema::parse(&schema).unwrap();
        for example in [
            "```json\n{\"decision\": \"approve\", \"replicas\": 3, \"regions\": [\"eu\"]}\n```",
            "decision: approve\nreplicas: 3\nregions: [\"eu\"]",
        ] {
            let answer = crate::questions::answering::typed_from_text(example).unwrap();
            schema.check(&answer).unwrap();
        }
        assert!(!text.contains("Options:"), "{text}");
    }
}
