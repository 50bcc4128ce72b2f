//! Answers from Slack, across three broker processes and a strict fake of the Slack Web API, with requests
//! signed as Slack signs them: a button click on one replica racing a REST answer on another (one wins, the
//! message shows the winner, the loser is told); a reply in the question's thread (retries acted on once,
//! bots ignored, a late reply told who answered); the "Answer…" modal; clicks Slack sends again (acted on once,
//! no second call to Slack); a blocking `ask_question` hearing where
//! its question was delivered; and the signature checks (stale, wrong secret, unsigned).

use serde_json::{Value, json};

use crate::support::{
    fake_channels::{FakeApi, SLACK_TOKEN},
    json_of,
    mcp::Mcp,
    slack::{
        SECRET, ask_on_slack, click, event, from_slack, interaction, question, retried_interaction, sign,
        three_replicas, updated,
    },
    within,
};

#[tokio::test]
async fn a_button_on_one_replica_races_a_rest_answer_on_another_and_slack_shows_the_winner() {
    let slack = FakeApi::slack().await;
    let (a, b, c) = three_replicas(&slack).await;
    let mut slack_won = 0;
    for round in 0..4 {
        let (id, message) = ask_on_slack(&c, &slack, &format!("Deploy build {round}?")).await;
        let user = format!("U{round}");
        let clicked = click(&slack, &message, &user, "option:0", &format!("{id}|0"));
        let rest = reqwest::Client::new()
            .post(b.url(&format!("/questions/{id}/answer")))
            .json(&json!({"response": "No, wait", "answeredBy": "alice"}));
        // Round 0 clicks first and round 1 answers on REST first, so both outcomes are checked; the others race.
        let (button, rest) = match round {
            0 => {
                let button = interaction(&a, &clicked).await;
                (button, rest.send().await)
            }
            1 => {
                let rest = rest.send().await;
                (interaction(&a, &clicked).await, rest)
            }
            _ => tokio::join!(interaction(&a, &clicked), rest.send()),
        };
        assert_eq!(button.0, 200, "Slack gets its 200: {}", button.1);
        let rest_status = rest.unwrap().status().as_u16();
        let stored = question(&c, &id).await;
        let update = updated(&slack, &message).await;
        let shown = update["blocks"].to_string();
        assert!(!shown.contains("\"actions\""), "the buttons are gone: {shown}");
        if stored["answeredBy"] == format!("slack:{user}") {
            slack_won += 1;
            assert_eq!((rest_status, stored["response"].as_str()), (409, Some("Yes, proceed")), "{stored}");
            assert_eq!(button.1["outcome"], "answered");
            assert!(shown.contains(&format!("Answered* by <@{user}>: Yes, proceed")), "{shown}");
        } else {
            assert_eq!((rest_status, stored["answeredBy"].as_str()), (200, Some("alice")), "{stored}");
            assert_eq!(button.1["outcome"], "already closed");
            assert!(shown.contains("Answered* by alice: No, wait"), "{shown}");
            let told = slack.wait_for_calls("response_url", 1).await;
            let note =
                told.iter().find(|n| n["text"].as_str().unwrap().contains("No, wait")).expect("the loser is told");
            assert_eq!(
                (note["response_type"].as_str(), note["replace_original"].as_bool()),
                (Some("ephemeral"), Some(false))
            );
            assert!(note["text"].as_str().unwrap().starts_with("Already answered by alice"), "{note}");
        }
    }
    assert!((1..=3).contains(&slack_won), "both outcomes were seen: Slack won {slack_won} of 4");
    // Every question closed and every message updated once: nothing is left to update twice.
    assert_eq!(slack.calls("chat.update").len(), 4);
}

#[tokio::test]
async fn a_reply_in_the_thread_answers_once_and_a_late_reply_is_told_who_answered() {
    let slack = FakeApi::slack().await;
    let (a, b, c) = three_replicas(&slack).await;
    let (id, message) = ask_on_slack(&a, &slack, "Which region?").await;
    let reply = |user: &str, text: &str| {
        json!({"type": "message", "channel": message["channelId"], "user": user, "text": text,
               "ts": "1700000500.000100", "thread_ts": message["ts"], "channel_type": "channel"})
    };
    // A bot's message in the thread, and a message outside any thread, answer nothing.
    let mut bot = reply("U0BOT", "eu-west-1");
    bot["bot_id"] = json!("B01");
    bot["subtype"] = json!("bot_message");
    assert!(event(&b, "Ev-bot", bot, None).await.1["outcome"].as_str().unwrap().starts_with("ignored"));
    let mut top = reply("U7", "us-east-1");
    top.as_object_mut().unwrap().remove("thread_ts");
    assert!(event(&b, "Ev-top", top, None).await.1["outcome"].as_str().unwrap().starts_with("ignored"));
    assert_eq!(question(&c, &id).await["status"], "pending");

    // Slack escapes what people type; the answer is what they typed.
    let typed = "eu-west-1 &lt; us-east-1 &amp;&amp; fine";
    let (status, body) = event(&b, "Ev-1", reply("U7", typed), None).await;
    assert_eq!((status, body["outcome"].as_str()), (200, Some("answered")), "{body}");
    // Slack retries the same event (on another replica): acknowledged, not acted on.
    let (status, body) = event(&c, "Ev-1", reply("U7", typed), Some("1")).await;
    assert_eq!((status, body["outcome"].as_str()), (200, Some("duplicate")), "{body}");
    let stored = question(&a, &id).await;
    let answer = "eu-west-1 < us-east-1 && fine";
    assert_eq!((stored["response"].as_str(), stored["answeredBy"].as_str()), (Some(answer), Some("slack:U7")));
    let shown = updated(&slack, &message).await["blocks"].to_string();
    assert!(shown.contains("Answered* by <@U7>: eu-west-1 &lt; us-east-1 &amp;&amp; fine"), "escaped again: {shown}");

    let (_, body) = event(&a, "Ev-2", reply("U8", "us-east-1"), None).await;
    assert_eq!(body["outcome"], "already closed");
    let told = slack.wait_for_calls("chat.postEphemeral", 1).await;
    assert_eq!((told[0]["user"].as_str(), told[0]["thread_ts"].as_str()), (Some("U8"), message["ts"].as_str()));
    assert_eq!(told[0]["text"], "Already answered by <@U7>: eu-west-1 &lt; us-east-1 &amp;&amp; fine");
    assert_eq!(question(&c, &id).await["response"], answer, "the first answer stands");

    // The URL verification handshake, signed like every request.
    let challenge = json!({"token": "legacy", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"});
    let (status, body) = from_slack(&a, "/channels/slack/events", "application/json", challenge.to_string(), &[]).await;
    assert_eq!((status, body["challenge"].as_str()), (200, challenge["challenge"].as_str()));
}

#[tokio::test]
async fn the_answer_button_opens_a_modal_whose_submission_answers() {
    let slack = FakeApi::slack().await;
    let (a, b, c) = three_replicas(&slack).await;
    let (id, message) = ask_on_slack(&a, &slack, "Anything to add before the release?").await;
    let (status, body) = interaction(&b, &click(&slack, &message, "U3", "answer_modal", &id)).await;
    assert_eq!((status, body["outcome"].as_str()), (200, Some("modal")), "{body}");
    let opened = slack.wait_for_calls("views.open", 1).await;
    let view = &opened[0]["view"];
    assert_eq!((view["callback_id"].as_str(), view["private_metadata"].as_str()), (Some("answer"), Some(id.as_str())));
    assert!(view["blocks"].to_string().contains("Anything to add before the release?"));

    let submit = |user: &str, text: &str| {
        json!({"type": "view_submission", "user": {"id": user}, "team": {"id": "T1"},
               "view": {"id": "V0FAKE", "type": "modal", "callback_id": view["callback_id"],
                        "private_metadata": view["private_metadata"],
                        "state": {"values": {"answer": {"text": {"type": "plain_text_input", "value": text}}}}}})
    };
    // An empty answer keeps the modal open with the reason on the field.
    let (status, body) = interaction(&c, &submit("U3", "   ")).await;
    assert_eq!((status, body["response_action"].as_str()), (200, Some("errors")), "{body}");
    assert_eq!(question(&a, &id).await["status"], "pending");
    let (status, body) = interaction(&c, &submit("U3", "Bump the changelog first.")).await;
    assert_eq!((status, body), (200, Value::String(String::new())), "an empty 200 closes the modal");
    let stored = question(&a, &id).await;
    assert_eq!(
        (stored["response"].as_str(), stored["answeredBy"].as_str()),
        (Some("Bump the changelog first."), Some("slack:U3"))
    );
    // A second person's submission lost: the field says who answered.
    let (_, body) = interaction(&a, &submit("U4", "Ship it")).await;
    assert_eq!(body["errors"]["answer"], "Already answered by Slack user U3: Bump the changelog first.");
    assert!(updated(&slack, &message).await["blocks"].to_string().contains("Answered* by <@U3>"));
    // "Answer…" on a closed question says so instead of opening a modal.
    interaction(&b, &click(&slack, &message, "U5", "answer_modal", &id)).await;
    let told = slack.wait_for_calls("response_url", 1).await;
    assert!(told[0]["text"].as_str().unwrap().starts_with("Already answered by <@U3>"));
    assert_eq!(slack.calls("views.open").len(), 1);
}

#[tokio::test]
async fn a_click_slack_sends_again_after_it_was_acted_on_makes_no_second_slack_call() {
    let slack = FakeApi::slack().await;
    let (a, b, _c) = three_replicas(&slack).await;
    let retry = [("x-slack-retry-num", "1"), ("x-slack-retry-reason", "http_timeout")];
    // An option button: answered once; Slack's copy (on another replica) is acknowledged, and its clicker is
    // not told "already answered" about their own answer.
    let (id, message) = ask_on_slack(&a, &slack, "Promote to production?").await;
    let clicked = click(&slack, &message, "U1", "option:0", &format!("{id}|0"));
    assert_eq!(interaction(&a, &clicked).await.1["outcome"], "answered");
    updated(&slack, &message).await;
    let (status, body) = retried_interaction(&b, &clicked, &retry).await;
    assert_eq!((status, body["outcome"].as_str()), (200, Some("duplicate")), "{body}");
    // Another person's click on the same replica is told, and that is the only note sent.
    let late = click(&slack, &message, "U2", "option:1", &format!("{id}|1"));
    assert_eq!(interaction(&b, &late).await.1["outcome"], "already closed");
    slack.wait_for_calls("response_url U2", 1).await;
    assert_eq!(slack.calls("response_url U1"), Vec::<Value>::new(), "U1 is not told about their own answer");

    // "Answer…": one modal; the copy opens no second one.
    let (id, message) = ask_on_slack(&a, &slack, "Any last words?").await;
    let clicked = click(&slack, &message, "U3", "answer_modal", &id);
    assert_eq!(interaction(&a, &clicked).await.1["outcome"], "modal");
    slack.wait_for_calls("views.open", 1).await;
    assert_eq!(retried_interaction(&b, &clicked, &retry).await.1["outcome"], "duplicate");
    let rest = reqwest::Client::new().post(a.url(&format!("/questions/{id}/answer")));
    assert_eq!(rest.json(&json!({"response": "None"})).send().await.unwrap().status(), 200);
    interaction(&b, &click(&slack, &message, "U4", "answer_modal", &id)).await;
    slack.wait_for_calls("response_url", 2).await;
    assert_eq!(slack.calls("views.open").len(), 1, "one modal for one click");
}

#[tokio::test]
async fn a_blocking_ask_question_hears_where_its_question_was_delivered() {
    let slack = FakeApi::slack().await;
    let (a, b, _c) = three_replicas(&slack).await;
    let (observer, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let call = tokio::spawn({
        let mcp = Mcp::new(&a.mcp_url);
        async move {
            let params = json!({"name": "ask_question",
                                "arguments": {"recipient": "ark://teams/ops", "content": "Roll back?",
                                              "channels": ["slack:#ops", "slack:#missing"], "options": ["Yes", "No"]},
                                "_meta": {"progressToken": "p-1"}});
            mcp.legacy_observed("tools/call", params, Some(observer)).await
        }
    });
    let mut messages = Vec::new();
    while messages.len() < 2 {
        let note = within("a progress notification", seen.recv()).await.expect("progress while pending");
        messages.push(note["params"]["message"].as_str().unwrap().to_owned());
    }
    messages.sort();
    assert_eq!(messages[1], "Delivered to slack:#ops");
    assert!(
        messages[0].starts_with("Could not deliver to slack:#missing: ") && messages[0].contains("channel_not_found"),
        "{messages:?}"
    );
    // The page shows where each delivery stands, the delivered one linked to its message.
    let page = reqwest::get(b.url("/ui")).await.unwrap().text().await.unwrap();
    let permalink = format!("{}/archives/C0FAKECHAN/p1700000000000001", slack.url);
    assert!(
        page.contains(&format!(r#"<a class="channel delivered" href="{permalink}">slack:#ops · delivered</a>"#)),
        "{page}"
    );
    assert!(page.contains("slack:#missing · not delivered: chat.postMessage: channel_not_found"), "{page}");
    // Answered from Slack on another replica: the blocking call returns the answer.
    let message = slack.messages()[0].clone();
    let id = message["blocks"][2]["block_id"].as_str().unwrap().trim_start_matches("q:").to_owned();
    interaction(&b, &click(&slack, &message, "U9", "option:1", &format!("{id}|1"))).await;
    let reply = within("the blocking call", call).await.unwrap();
    assert_eq!(reply.result()["structuredContent"]["response"], "No");
}

#[tokio::test]
async fn unsigned_stale_or_forged_requests_are_refused() {
    let slack = FakeApi::slack().await;
    let (a, _b, _c) = three_replicas(&slack).await;
    let body = json!({"type": "url_verification", "challenge": "c"}).to_string();
    let url = a.url("/channels/slack/events");
    let client = reqwest::Client::new();
    let now = chrono::Utc::now().timestamp();
    let cases = [
        ("unsigned", None, None),
        ("stale", Some(now - 301), Some(sign(SECRET, now - 301, &body))),
        ("wrong secret", Some(now), Some(sign("not-the-secret", now, &body))),
        ("another body", Some(now), Some(sign(SECRET, now, "{}"))),
        ("the oldest timestamp there is", Some(i64::MIN), Some(sign(SECRET, i64::MIN, &body))),
    ];
    for (case, timestamp, signature) in cases {
        let mut request = client.post(&url).header("content-type", "application/json").body(body.clone());
        if let Some(timestamp) = timestamp {
            request = request.header("x-slack-request-timestamp", timestamp.to_string());
        }
        if let Some(signature) = signature {
            request = request.header("x-slack-signature", signature);
        }
        let (status, refused) = json_of(request.send().await.unwrap()).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (401, Some("UNAUTHORIZED")), "{case}: {refused}");
    }
    // Within the window, and signed: accepted.
    let (status, _) = from_slack(&a, "/channels/slack/events", "application/json", body, &[]).await;
    assert_eq!(status, 200);
    // Signed, but naming nothing Postgres can hold: 400 naming the field, never a 500.
    let message = json!({"ts": "1.1", "channelId": "C0FAKECHAN", "text": "x"});
    let nul = click(&slack, &message, "U1", "option:0", "q-\u{0}x|0");
    let (status, refused) = interaction(&a, &nul).await;
    assert_eq!((status, refused["error"]["code"].as_str()), (400, Some("VALIDATION_ERROR")), "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("NUL"), "{refused}");
    let long_id = "E".repeat(100_000);
    let (status, refused) = event(&a, &long_id, json!({"type": "message"}), None).await;
    assert_eq!((status, refused["error"]["message"].as_str().map(|m| m.starts_with("event_id"))), (400, Some(true)));
}

#[tokio::test]
async fn a_body_that_stalls_is_cut_off_on_the_open_inbound_routes() {
    let app = crate::support::TestApp::spawn_with(|config| {
        config.channels.slack_bot_token = Some(SLACK_TOKEN.parse().unwrap());
        config.channels.slack_signing_secret = Some(SECRET.parse().unwrap());
        config.channels.github_webhook_secret = Some(SECRET.parse().unwrap());
        config.body_read_timeout_seconds = 1;
    })
    .await;
    for path in ["/channels/slack/events", "/channels/slack/interactions", "/channels/github/webhook"] {
        let (sender, body) = crate::support::open_body();
        sender.send(Ok(bytes::Bytes::from_static(b"{\"type\":"))).await.unwrap();
        let request = app.client.post(app.url(path)).header("content-type", "application/json").body(body);
        let (status, refused) =
            within("the stalled body to be cut off", async { json_of(request.send().await.unwrap()).await }).await;
        assert_eq!((status, refused["error"]["code"].as_str()), (408, Some("REQUEST_TIMEOUT")), "{path}: {refused}");
        drop(sender);
    }
}
