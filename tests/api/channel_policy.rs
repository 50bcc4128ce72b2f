//! The answer policy in the channels (`--answer-policy recipient`, `--identities-file`): a Slack user or a
//! GitHub login answers as the principal it maps to; one that is not a recipient, or maps to no one, is told
//! — only them, in Slack; in a reply comment, on GitHub — that they may not answer, nothing changes but the
//! question's record, and the recipient's answer is taken.

use serde_json::{Value, json};
use tempfile::NamedTempFile;

use crate::support::{
    Replica,
    fake_channels::{FakeApi, GITHUB_TOKEN, SLACK_TOKEN},
    fresh_database,
    github::{deliver, issue_comment},
    json_of,
    slack::{self, ask_with, click, event, interaction},
    temp_file,
};

const WEBHOOK_SECRET: &str = "policy-webhook";

fn file(content: &str) -> NamedTempFile {
    temp_file("ark-broker-channel-policy-", content)
}

/// A broker with token auth and the recipient policy, delivering to and answering from both fakes; with its
/// tokens and identities files, removed when dropped (after the broker: keep them first in the `let`).
async fn replica(slack: &FakeApi, github: &FakeApi) -> ([NamedTempFile; 2], Replica) {
    let files = [
        file("alice-token alice\nbob-token bob\n"),
        file(
            "# who is who in the channels\nslack:UBOB bob\nslack:UCAROL carol\ngithub:bob-gh bob\ngithub:carol-gh carol\n",
        ),
    ];
    let [tokens, identities] = files.each_ref().map(|file| file.path().to_str().unwrap().to_owned());
    let args = [
        "--auth",
        "token",
        "--auth-tokens-file",
        &tokens,
        "--answer-policy",
        "recipient",
        "--identities-file",
        &identities,
        "--slack-bot-token",
        SLACK_TOKEN,
        "--slack-api-url",
        &slack.url,
        "--slack-signing-secret",
        slack::SECRET,
        "--github-token",
        GITHUB_TOKEN,
        "--github-api-url",
        &github.url,
        "--github-webhook-secret",
        WEBHOOK_SECRET,
    ];
    (files, Replica::start_with(&fresh_database().await, &args).await)
}

/// A client that calls as alice (the asker).
fn alice() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("authorization", "Bearer alice-token".parse().unwrap());
    reqwest::Client::builder().default_headers(headers).build().unwrap()
}

/// A question from alice to bob, delivered to `channel`.
fn to_bob(channel: &str) -> Value {
    json!({"sender": "ark://agents/deployer", "recipient": "ark://users/bob", "content": "Deploy to prod?",
           "channels": [channel], "options": ["Yes", "No"]})
}

async fn stored(replica: &Replica, id: &str) -> Value {
    json_of(alice().get(replica.url(&format!("/questions/{id}"))).send().await.unwrap()).await.1
}

/// The question's record: each step's name, actor and channel.
async fn steps(replica: &Replica, id: &str) -> Vec<(String, String, String)> {
    let (_, history) =
        json_of(alice().get(replica.url(&format!("/questions/{id}/history"))).send().await.unwrap()).await;
    let text = |step: &Value, name: &str| step[name].as_str().unwrap_or_default().to_owned();
    history["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (text(s, "step"), text(s, "actor"), text(s, "channel")))
        .collect()
}

#[tokio::test]
async fn slack_tells_a_person_the_policy_refuses_that_they_may_not_answer_and_takes_the_recipients_answer() {
    let (slack, github) = tokio::join!(FakeApi::slack(), FakeApi::github());
    let (_files, broker) = replica(&slack, &github).await;
    let (id, message) = ask_with(&broker, &slack, &alice(), to_bob("slack:#ops")).await;

    // Carol is someone, but not the recipient: her click is refused, and only she is told why.
    let (status, body) = interaction(&broker, &click(&slack, &message, "UCAROL", "option:0", &format!("{id}|0"))).await;
    assert_eq!((status, body["outcome"].as_str()), (200, Some("forbidden")), "{body}");
    let told = slack.wait_for_calls("response_url UCAROL", 1).await;
    let note = told[0]["text"].as_str().unwrap();
    assert!(note.starts_with("You may not answer this question: ") && note.contains("carol"), "{note}");
    assert_eq!(
        (told[0]["response_type"].as_str(), told[0]["replace_original"].as_bool()),
        (Some("ephemeral"), Some(false))
    );
    // Nor may she decline it.
    assert_eq!(
        interaction(&broker, &click(&slack, &message, "UCAROL", "decline", &id)).await.1["outcome"],
        "forbidden"
    );
    let told = slack.wait_for_calls("response_url UCAROL", 2).await;
    assert!(told[1]["text"].as_str().unwrap().starts_with("You may not decline this question: "), "{told:?}");
    // A user the identities file does not know replies in the thread: told in the thread, to them alone.
    let reply = json!({"type": "message", "channel": message["channelId"], "user": "UNOBODY", "text": "Yes",
                       "ts": "1700000700.000100", "thread_ts": message["ts"], "channel_type": "channel"});
    assert_eq!(event(&broker, "Ev-nobody", reply, None).await.1["outcome"], "forbidden");
    let told = slack.wait_for_calls("chat.postEphemeral", 1).await;
    assert_eq!((told[0]["user"].as_str(), told[0]["thread_ts"].as_str()), (Some("UNOBODY"), message["ts"].as_str()));
    let note = told[0]["text"].as_str().unwrap();
    assert!(note.starts_with("You may not answer this question: ") && note.contains("slack:UNOBODY"), "{note}");
    assert_eq!(stored(&broker, &id).await["status"], "pending", "nothing changed");

    // Bob, the recipient, answers.
    assert_eq!(
        interaction(&broker, &click(&slack, &message, "UBOB", "option:1", &format!("{id}|1"))).await.1["outcome"],
        "answered"
    );
    let question = stored(&broker, &id).await;
    assert_eq!((question["response"].as_str(), question["answeredBy"].as_str()), (Some("No"), Some("slack:UBOB")));
    let record = steps(&broker, &id).await;
    let refused: Vec<_> = record.iter().filter(|(step, ..)| step == "refused").collect();
    assert_eq!(refused.len(), 3, "{record:?}");
    assert!(refused.iter().all(|(_, _, channel)| channel == "slack"), "{record:?}");
    assert_eq!(refused[0].1, "slack:UCAROL");
    assert_eq!(record.last().unwrap(), &("answered".to_owned(), "slack:UBOB".to_owned(), "slack".to_owned()));
}

#[tokio::test]
async fn github_replies_to_a_person_the_policy_refuses_that_they_may_not_answer_and_takes_the_recipients_answer() {
    let (slack, github) = tokio::join!(FakeApi::slack(), FakeApi::github());
    let (_files, broker) = replica(&slack, &github).await;
    let (status, question) =
        json_of(alice().post(broker.url("/questions")).json(&to_bob("github:acme/app#7")).send().await.unwrap()).await;
    assert_eq!(status, 201, "{question}");
    let id = question["id"].as_str().unwrap().to_owned();
    github.wait_for(1, false).await;
    let webhook = broker.url("/channels/github/webhook");
    let short = ark_broker::channels::short_id(&id);

    let (status, body) = deliver(
        &webhook,
        "issue_comment",
        "d-carol",
        &issue_comment("/answer Yes", "carol-gh", "User"),
        WEBHOOK_SECRET,
    )
    .await;
    let outcome = body["outcome"].as_str().unwrap_or_default();
    assert_eq!(status, 200, "{body}");
    assert!(
        outcome.starts_with(&format!("@carol-gh, you may not answer {short}: ")) && outcome.contains("carol"),
        "{outcome}"
    );
    github.wait_for(2, false).await;
    assert_eq!(github.messages()[1], json!({"target": "acme/app#7", "body": outcome}), "replied on the issue");
    let (_, body) = deliver(
        &webhook,
        "issue_comment",
        "d-mallory",
        &issue_comment("/answer Yes", "mallory", "User"),
        WEBHOOK_SECRET,
    )
    .await;
    assert!(body["outcome"].as_str().unwrap().contains("github:mallory"), "an unmapped login is told too: {body}");
    github.wait_for(3, false).await;
    assert_eq!(stored(&broker, &id).await["status"], "pending", "nothing changed");

    let (_, body) =
        deliver(&webhook, "issue_comment", "d-bob", &issue_comment("/answer No", "bob-gh", "User"), WEBHOOK_SECRET)
            .await;
    assert_eq!(body["outcome"], format!("Answered {short} — thank you, @bob-gh."));
    let question = stored(&broker, &id).await;
    assert_eq!((question["response"].as_str(), question["answeredBy"].as_str()), (Some("No"), Some("github:bob-gh")));
    let record = steps(&broker, &id).await;
    let refused: Vec<_> = record
        .iter()
        .filter(|(step, ..)| step == "refused")
        .map(|(_, actor, channel)| (actor.as_str(), channel.as_str()))
        .collect();
    assert_eq!(refused, [("github:carol-gh", "github"), ("github:mallory", "github")], "{record:?}");
}
