//! What a trace of a slow request says: at debug, the spans of the hot paths name the stream, conversation,
//! question or task they serve, so sqlx's statements inside them can be told apart.

use serde_json::{Value, json};

use crate::support::{Replica, fresh_database, json_of, within};

#[tokio::test]
async fn at_debug_the_hot_paths_spans_name_their_stream_question_and_conversation() {
    let url = fresh_database().await;
    let replica = Replica::start_with(&url, &["--log-level", "info,ark_broker=debug,sqlx=debug"]).await;
    let client = reqwest::Client::new();
    let chunk = r#"{"choices":[{"delta":{"content":"hi"}}]}"#;
    let posted = client.post(replica.url("/stream/span-stream")).body(format!("{chunk}\n")).send().await.unwrap();
    assert!(posted.status().is_success());
    let message = json!({"conversation_id": "span-conversation", "query_id": "span-query",
                         "messages": [{"role": "user", "content": "hello"}]});
    assert!(client.post(replica.url("/messages")).json(&message).send().await.unwrap().status().is_success());
    let question = json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "Spans?"});
    let (_, question) = json_of(client.post(replica.url("/questions")).json(&question).send().await.unwrap()).await;
    let id = question["id"].as_str().unwrap().to_owned();
    let answer = client.post(replica.url(&format!("/questions/{id}/answer"))).json(&json!({"response": "yes"}));
    assert_eq!(answer.send().await.unwrap().status(), 200);
    // sqlx's statements run inside the handler's span, which names what the request was about.
    for (field, value) in
        [("stream.id", "span-stream"), ("conversation.id", "span-conversation"), ("question.id", id.as_str())]
    {
        within("a statement inside a span naming what it serves", async {
            loop {
                let named =
                    replica.log().lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).any(|line| {
                        line["target"] == "sqlx::query"
                            && line["spans"].as_array().is_some_and(|spans| spans.iter().any(|s| s[field] == value))
                    });
                if named {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
    }
}
