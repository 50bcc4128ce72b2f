//! A typed question on GitHub: its comment lists the fields and shows how to answer (a fenced JSON block, or
//! `field: value` lines); a reply that does not parse or fit gets a comment quoting the error, naming the
//! field, and the question stays pending; the documented example, pasted, answers it.

use serde_json::{Value, json};

use crate::support::{
    TestApp,
    fake_channels::{FakeApi, GITHUB_TOKEN},
    github::{deliver, issue_comment},
    json_of,
};

const SECRET: &str = "typed-on-github";

#[tokio::test]
async fn a_typed_question_on_github_documents_its_syntax_quotes_a_bad_replys_error_and_takes_a_good_one() {
    let github = FakeApi::github().await;
    let app = TestApp::spawn_with(|config| {
        config.channels.github_token = Some(GITHUB_TOKEN.parse().unwrap());
        config.channels.github_api_url = github.url.clone();
        config.channels.github_webhook_secret = Some(SECRET.parse().unwrap());
    })
    .await;
    let schema = json!({"type": "object", "required": ["decision", "replicas"], "properties": {
        "decision": {"type": "string", "title": "Decision", "enum": ["approve", "reject"]},
        "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
        "regions": {"type": "array", "items": {"type": "string", "enum": ["eu", "us"]}}}});
    let asked = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Deploy 5?",
                       "channels": ["github:acme/app#7"], "responseSchema": schema});
    let (status, question) = json_of(app.post_json("/questions", &asked).await).await;
    assert_eq!(status, 201, "{question}");
    let id = question["id"].as_str().unwrap().to_owned();
    let short = ark_broker::channels::short_id(&id);
    github.wait_for(1, false).await;
    let comment = github.messages()[0]["body"].as_str().unwrap().to_owned();
    for line in [
        "- `decision` (Decision): one of `approve`, `reject`, required\n",
        "- `regions`: a list of `eu`, `us`\n",
        "- `replicas`: integer, 1 to 10, default `3`\n",
        "```\n/answer\ndecision: approve\nreplicas: 3\nregions: [\"eu\"]\n```",
    ] {
        assert!(comment.contains(line), "the comment documents {line:?}: {comment}");
    }

    let webhook = app.url("/channels/github/webhook");
    let pending = || async { json_of(app.get(&format!("/questions/{id}")).await).await.1["status"].clone() };
    // Each bad reply is answered with its error quoted, naming the field; the question stays pending.
    let bad = [
        ("/answer decision: approve\nreplicas: 0", "> response.replicas: must be between 1 and 10, got 0"),
        ("/answer\ndecision: maybe", "> response.decision: must be one of 'approve', 'reject', got \"maybe\""),
        ("/answer\n```json\n{\"decision\": \"approve\",\n```", "> response: not a valid JSON object"),
        ("/answer ship it", "> response: expected `field: value` lines or a JSON object, got 'ship it'"),
    ];
    for (n, (reply, quoted)) in bad.iter().enumerate() {
        let (status, body) =
            deliver(&webhook, "issue_comment", &format!("d-bad-{n}"), &issue_comment(reply, "octocat", "User"), SECRET)
                .await;
        assert_eq!(status, 200, "{body}");
        github.wait_for(n + 2, false).await;
        let answer = github.messages()[n + 1]["body"].as_str().unwrap().to_owned();
        assert!(answer.starts_with(&format!("{short} was not answered, and is still pending:")), "{answer}");
        assert!(answer.contains(&format!("\n{quoted}\n")), "{reply:?} is answered with {quoted:?}: {answer}");
        assert_eq!(body["outcome"], Value::String(answer), "the outcome is the reply");
        assert_eq!(pending().await, "pending");
    }

    // The comment's fenced example, pasted as it is, answers.
    let example = comment.split("````\n").nth(1).unwrap().trim_end();
    assert!(example.starts_with("/answer\n```json\n{"), "{example}");
    let (_, body) =
        deliver(&webhook, "issue_comment", "d-good", &issue_comment(example, "octocat", "User"), SECRET).await;
    assert_eq!(body["outcome"], format!("Answered {short} — thank you, @octocat."), "{body}");
    let (_, answered) = json_of(app.get(&format!("/questions/{id}")).await).await;
    assert_eq!(answered["response"], json!({"decision": "approve", "regions": ["eu"], "replicas": 3}), "{answered}");
    assert_eq!(answered["answeredBy"], "github:octocat");
    github.wait_for(6, false).await;
    assert_eq!(github.messages().len(), 6, "the question, four errors and the thanks");
}
