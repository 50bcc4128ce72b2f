//! Reminders (`remindEverySeconds`): each delivered channel is re-notified — Slack in the message's thread,
//! GitHub with a new comment — a period after the delivery and after each reminder, until the question
//! closes; each reminder sent once while three replicas race for it, and recorded in the history.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::support::{
    Replica,
    fake_channels::{FakeApi, channel_args},
    fresh_database, json_of, settled,
};

/// The reminder numbers of `messages` ("Reminder 3: …"), counted.
fn reminder_numbers<'a>(texts: impl Iterator<Item = &'a str>) -> BTreeMap<u32, usize> {
    let mut numbers = BTreeMap::new();
    for text in texts {
        if let Some(rest) = text.strip_prefix("Reminder ") {
            let number: u32 = rest.split(':').next().unwrap().parse().unwrap();
            *numbers.entry(number).or_default() += 1;
        }
    }
    numbers
}

#[tokio::test]
async fn each_channel_is_reminded_once_per_period_across_replicas_until_the_question_closes() {
    let (slack, github) = tokio::join!(FakeApi::slack(), FakeApi::github());
    let url = fresh_database().await;
    let (a, b, c) = Replica::three(&url, &channel_args(&slack, &github)).await;
    let client = reqwest::Client::new();
    let ask = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Deploy to prod?",
                     "channels": ["slack:#ops", "github:acme/app#7"], "remindEverySeconds": 1});
    let (status, asked) = json_of(client.post(a.url("/questions")).json(&ask).send().await.unwrap()).await;
    assert_eq!(status, 201, "{asked}");
    assert_eq!(asked["remindEverySeconds"], 1);
    let id = asked["id"].as_str().unwrap().to_owned();
    settled(&client, &b.url(&format!("/questions/{id}"))).await;

    // Three reminders each: the question's message and two more.
    slack.wait_for(4, false).await;
    github.wait_for(4, false).await;
    let (status, answered) = json_of(
        client.post(c.url(&format!("/questions/{id}/answer"))).json(&json!({"response": "yes"})).send().await.unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{answered}");
    let question_message = &slack.messages()[0];
    let replies: Vec<Value> = slack.messages().into_iter().skip(1).collect();
    for reply in &replies {
        assert_eq!(reply["thread_ts"], question_message["ts"], "in the question's thread: {reply}");
        assert_eq!(reply["channelId"], question_message["channelId"]);
        assert!(reply["text"].as_str().unwrap().contains("Deploy to prod?"), "{reply}");
    }
    let comments: Vec<Value> = github.messages().into_iter().skip(1).collect();
    assert!(comments.iter().all(|c| c["target"] == "acme/app#7"), "{comments:?}");

    // The Slack message shows the answer once the question closed; a period and a half later, at most the
    // one reminder that was already on its way when the answer came has joined them.
    slack.wait_for_calls("chat.update", 1).await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let (slack_after, github_after) = (slack.messages().len() - 1, github.messages().len() - 1);
    assert!(slack_after <= replies.len() + 1 && github_after <= comments.len() + 1, "reminders stop at the answer");

    let slack_numbers = reminder_numbers(slack.messages().iter().skip(1).map(|m| m["text"].as_str().unwrap()));
    let github_numbers = reminder_numbers(github.messages().iter().skip(1).map(|m| m["body"].as_str().unwrap()));
    for numbers in [&slack_numbers, &github_numbers] {
        assert!(numbers.values().all(|n| *n == 1), "each reminder once, though three replicas race: {numbers:?}");
        assert_eq!(numbers.keys().copied().collect::<Vec<_>>(), (1..=numbers.len() as u32).collect::<Vec<_>>());
        assert!(numbers.len() >= 3, "{numbers:?}");
    }
    let (_, history) = json_of(client.get(a.url(&format!("/questions/{id}/history"))).send().await.unwrap()).await;
    let reminded: Vec<&Value> =
        history["items"].as_array().unwrap().iter().filter(|s| s["step"] == "reminded").collect();
    assert_eq!(reminded.len(), slack_numbers.len() + github_numbers.len(), "each reminder recorded: {history}");
    assert!(reminded.iter().all(|s| s["actor"] == "system:reminder"), "{reminded:?}");
    let on_slack = reminded.iter().filter(|s| s["channel"] == "slack:#ops").count();
    assert_eq!(on_slack, slack_numbers.len());
}

#[tokio::test]
async fn remind_every_seconds_is_checked() {
    let app = crate::support::TestApp::spawn().await;
    for bad in [json!(0), json!(-5), json!(31_536_001), json!("soon")] {
        let ask = json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "?", "remindEverySeconds": bad});
        let (status, body) = json_of(app.post_json("/questions", &ask).await).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(body["error"]["message"].as_str().unwrap().contains("remindEverySeconds"), "{body}");
    }
}
