//! Who may answer, with authentication on (`--answer-policy`): under `recipient` only the user a question is
//! addressed to, or a member of its team (the teams file), and after an escalation those it went to; in every
//! policy never the principal that asked. A refusal is a 403 that changes nothing but the record. Two broker
//! processes with token auth.

use serde_json::{Value, json};
use tempfile::NamedTempFile;

use crate::support::{Replica, cluster::fresh_database, json_of, temp_file};

/// A file of `content`, removed when the test ends.
fn file(content: &str) -> NamedTempFile {
    temp_file("ark-broker-policy-", content)
}

async fn replica(url: &str, policy: &str, tokens: &NamedTempFile, teams: &NamedTempFile) -> Replica {
    let (tokens, teams) = (tokens.path().to_str().unwrap(), teams.path().to_str().unwrap());
    let args = ["--auth", "token", "--auth-tokens-file", tokens, "--answer-policy", policy, "--teams-file", teams];
    Replica::start_with(url, &args).await
}

/// `who` (a token) asks `body`; the question's id.
async fn ask(replica: &Replica, who: &str, recipient: &str) -> String {
    let body = json!({"sender": "ark://agents/deployer", "recipient": recipient, "content": "Deploy?"});
    let reply = reqwest::Client::new().post(replica.url("/questions")).bearer_auth(who).json(&body).send().await;
    let (status, question) = json_of(reply.unwrap()).await;
    assert_eq!(status, 201, "{question}");
    question["id"].as_str().unwrap().to_owned()
}

async fn answer(replica: &Replica, who: &str, id: &str) -> (u16, Value) {
    let url = replica.url(&format!("/questions/{id}/answer"));
    json_of(reqwest::Client::new().post(url).bearer_auth(who).json(&json!({"response": "yes"})).send().await.unwrap())
        .await
}

async fn history(replica: &Replica, id: &str) -> Vec<Value> {
    let url = replica.url(&format!("/questions/{id}/history"));
    let (_, body) = json_of(reqwest::Client::new().get(url).bearer_auth("alice-token").send().await.unwrap()).await;
    body["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn under_the_recipient_policy_only_the_user_or_a_team_member_answers_and_never_the_asker() {
    let url = fresh_database().await;
    let tokens = file("alice-token alice\nbob-token bob\ncarol-token carol\ndave-token dave\n");
    let teams = file("# on call\nops carol dave\n");
    let (a, b) = tokio::join!(replica(&url, "recipient", &tokens, &teams), replica(&url, "recipient", &tokens, &teams));

    let to_bob = ask(&a, "alice-token", "ark://users/bob").await;
    let (status, refused) = answer(&b, "carol-token", &to_bob).await;
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "FORBIDDEN");
    assert!(refused["error"]["message"].as_str().unwrap().contains("carol is not a recipient"), "{refused}");
    let (status, _) = answer(&b, "bob-token", &to_bob).await;
    assert_eq!(status, 200, "the user it is addressed to answers");

    // The asker may not answer its own question, whoever it is addressed to.
    let own = ask(&a, "alice-token", "ark://users/alice").await;
    let (status, refused) = answer(&a, "alice-token", &own).await;
    assert_eq!(status, 403);
    assert!(refused["error"]["message"].as_str().unwrap().contains("alice asked this question"), "{refused}");

    // A team question: its members answer, others may not (nor decline).
    let to_ops = ask(&a, "alice-token", "ark://teams/ops").await;
    let (status, _) = answer(&a, "bob-token", &to_ops).await;
    assert_eq!(status, 403, "bob is not in ops");
    let decline = reqwest::Client::new().post(a.url(&format!("/questions/{to_ops}/decline"))).bearer_auth("bob-token");
    assert_eq!(decline.send().await.unwrap().status(), 403, "declining is answering too");
    let (status, answered) = answer(&b, "dave-token", &to_ops).await;
    assert_eq!((status, answered["answeredBy"].as_str()), (200, Some("dave")), "{answered}");

    // Refusals are in the record, with who, via what and why; they changed nothing else.
    let steps = history(&a, &to_ops).await;
    let names: Vec<&str> = steps.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(names, ["created", "refused", "refused", "answered"]);
    assert_eq!((steps[1]["actor"].as_str(), steps[1]["channel"].as_str()), (Some("bob"), Some("api")));
    assert!(steps[1]["detail"]["reason"].as_str().unwrap().contains("not a recipient"), "{}", steps[1]);
}

#[tokio::test]
async fn under_the_any_policy_everyone_but_the_asker_answers() {
    let url = fresh_database().await;
    let tokens = file("alice-token alice\nbob-token bob\n");
    let teams = file("");
    let a = replica(&url, "any", &tokens, &teams).await;
    let id = ask(&a, "alice-token", "ark://users/dave").await;
    assert_eq!(answer(&a, "alice-token", &id).await.0, 403, "not its own question");
    let (status, answered) = answer(&a, "bob-token", &id).await;
    assert_eq!((status, answered["answeredBy"].as_str()), (200, Some("bob")), "anyone else, recipient or not");
}

#[tokio::test]
async fn the_recipient_policy_without_authentication_refuses_to_start() {
    let url = fresh_database().await;
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_ark-broker"))
        .args(["--port", "0", "--mcp-port", "0", "--answer-policy", "recipient"])
        .env("DATABASE_URL", &url)
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let said = String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("--answer-policy recipient and kubernetes need authentication"), "{said}");
}
