//! A Query resumed after a tool approval writes its stream again after `/complete` (Ark 0.1.70's executor:
//! the approval frame, `/complete`, then after the approval the Query runs again and streams to the same
//! name, one POST it never reopens, and `/complete` again). On three replica processes, every reader sees
//! what upstream's does, and more where upstream loses the second run: a reader from before the first run
//! ends with it; a live reader that joined between the runs gets the second and ends at its `/complete`,
//! which writes its own `[DONE]` and answers `completed`; a replay from the beginning, on any replica and
//! in either format, tells both runs in order and ends once; the Query's state waits for the approval
//! between the runs and runs again after.

use serde_json::{Value, json};

use crate::{
    end_of_query::{BodyEnd, assert_ends_after, end_of_query, query_lines, three_replicas},
    support::{Replica, SseReader},
};

async fn state(replica: &Replica, name: &str) -> Value {
    let response = reqwest::get(replica.url(&format!("/queries/default/{name}/state"))).await.unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// Every frame of a reader up to and including its `[DONE]`, then checks the response ends there.
async fn until_done(reader: &mut SseReader) -> Vec<String> {
    let mut read = Vec::new();
    while let Some(data) = reader.next_data().await {
        let done = data == "[DONE]";
        read.push(data);
        if done {
            reader.expect_end().await;
            return read;
        }
    }
    panic!("the reader ended without [DONE] after {read:?}");
}

#[tokio::test]
async fn a_query_resumed_after_its_approval_streams_again_and_every_reader_sees_both_runs() {
    let [a, b, c] = three_replicas().await;
    let client = reqwest::Client::new();
    let stream = "resumed";
    let mut before_first = SseReader::open(&client, &c.url("/stream/resumed")).await;

    // The first run: an answer's start, then the approval request, then `/complete` (the executor pauses).
    let mut first = query_lines(1, 3);
    first.truncate(2);
    first.push(
        json!({"type": "tool_approval_request", "taskId": "task-1", "agentName": "agent",
               "toolCalls": [{"id": "call-1", "name": "delete_files"}]})
        .to_string(),
    );
    let (status, body) = end_of_query(&a, &b, stream, &first, BodyEnd::Closed).await;
    assert_eq!((status, body), (200, json!({"status": "completed", "query": stream})));
    assert_eq!(until_done(&mut before_first).await, [first.clone(), vec!["[DONE]".into()]].concat());
    let waiting = state(&c, stream).await;
    assert_eq!(waiting["phase"], "waiting", "{waiting}");
    assert_eq!(waiting["pendingToolApproval"]["taskId"], "task-1", "{waiting}");

    // Between the runs: a replay ends with the first run; a live reader waits for what comes next.
    assert_ends_after(&a, stream, &first, "between the runs").await;
    let mut live = SseReader::open(&client, &b.url("/stream/resumed")).await;
    let mut live_unified = SseReader::open(&client, &a.url("/stream/resumed?format=unified")).await;

    // The second run, after the approval: another single POST, on another replica, `/complete` on a third.
    let second = query_lines(2, 4);
    let (status, body) = end_of_query(&b, &c, stream, &second, BodyEnd::Closed).await;
    assert_eq!((status, body), (200, json!({"status": "completed", "query": stream})), "its own end");
    assert_eq!(until_done(&mut live).await, [second.clone(), vec!["[DONE]".into()]].concat());
    let unified_live = until_done(&mut live_unified).await;
    assert!(unified_live.iter().any(|frame| frame.contains("part 0 of run 2")), "{unified_live:?}");
    assert!(!unified_live.iter().any(|frame| frame.contains("of run 1")), "only what came after it joined");

    // Afterwards every replica replays both runs in order, ending once, and says the Query is done.
    let both = [first.clone(), second.clone()].concat();
    for replica in [&a, &b, &c] {
        assert_ends_after(replica, stream, &both, "after the second run").await;
        let done = state(replica, stream).await;
        assert_eq!(done["phase"], "completed", "{done}");
        assert!(done["pendingToolApproval"].is_null(), "the approval was given: {done}");
    }
    let mut unified = SseReader::open(&client, &c.url("/stream/resumed?from-beginning=true&format=unified")).await;
    let story = until_done(&mut unified).await;
    let at = |needle: &str| story.iter().position(|frame| frame.contains(needle)).unwrap_or_else(|| panic!("{needle}"));
    assert!(at("part 0 of run 1") < at("tool_approval_request"), "{story:?}");
    assert!(at("tool_approval_request") < at("part 0 of run 2"), "{story:?}");
    assert_eq!(story.iter().filter(|frame| *frame == "[DONE]").count(), 1, "one end: {story:?}");

    // Nothing more was written: a third `/complete` is the already-completed answer.
    let third: Value =
        client.post(a.url("/stream/resumed/complete")).json(&json!({})).send().await.unwrap().json().await.unwrap();
    assert_eq!(third, json!({"status": "already_completed", "query": stream}));
}
