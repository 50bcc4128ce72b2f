//! Questions delivered to Slack and GitHub through the outbox, against strict fakes of both APIs: exactly one
//! message per channel per question while three replicas race for the deliveries; retries while a channel is
//! down or rate limited, never a second message; refusals recorded; channel entries checked when asked.

use serde_json::{Value, json};

use crate::support::{
    Replica, TestApp,
    fake_channels::{FakeApi, GITHUB_TOKEN, SLACK_TOKEN, channel_args},
    fresh_database,
    github::{deliver, issue_comment},
    json_of,
    mcp::Mcp,
    settled,
};

fn ask(content: &str, channels: &[&str]) -> Value {
    json!({"sender": "ark://agents/reviewer", "recipient": "ark://users/dave", "content": content,
           "channels": channels, "options": ["Yes, proceed", "No, cancel"],
           "query": {"namespace": "team-a", "name": "review-42"}})
}

#[tokio::test]
async fn each_question_reaches_each_channel_exactly_once_while_three_replicas_race() {
    let (slack, github) = tokio::join!(FakeApi::slack(), FakeApi::github());
    let url = fresh_database().await;
    let (a, b, c) = Replica::three(&url, &channel_args(&slack, &github)).await;
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    for n in 0..6 {
        let replica = [&a, &b, &c][n % 3];
        let asked = client
            .post(replica.url("/questions"))
            .json(&ask(&format!("Deploy {n}?"), &["slack:#ops", "github:acme/app#7"]));
        let (status, question) = json_of(asked.send().await.unwrap()).await;
        assert_eq!(status, 201, "{question}");
        assert_eq!(question["options"], json!(["Yes, proceed", "No, cancel"]));
        assert_eq!(question["deliveries"][0]["status"], "pending", "queued with the question: {question}");
        ids.push(question["id"].as_str().unwrap().to_owned());
    }
    for id in &ids {
        let deliveries = settled(&client, &c.url(&format!("/questions/{id}"))).await;
        assert_eq!(deliveries.len(), 2);
        for delivery in &deliveries {
            assert_eq!(delivery["status"], "delivered", "{delivery}");
            assert!(delivery["url"].as_str().is_some_and(|u| u.starts_with("http")), "{delivery}");
        }
    }
    // Every delivery is settled, so no replica sends any again: the counts are final.
    assert_eq!(slack.messages().len(), 6, "one Slack message per question");
    assert_eq!(github.messages().len(), 6, "one GitHub comment per question");
    let message = slack.messages().into_iter().find(|m| m["text"].as_str().unwrap().contains("Deploy 0?")).unwrap();
    assert_eq!(message["channel"], "#ops");
    let buttons = message["blocks"].as_array().unwrap().iter().find(|b| b["type"] == "actions").unwrap()["elements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["text"]["text"].as_str().unwrap().to_owned())
        .collect::<Vec<_>>();
    assert_eq!(buttons, ["Yes, proceed", "No, cancel", "Answer…", "Decline"]);
    let text = message["blocks"].to_string();
    assert!(text.contains("ark://agents/reviewer") && text.contains("team-a/review-42"), "who asks, which Query");
    let comment = github.messages().into_iter().find(|m| m["body"].as_str().unwrap().contains("Deploy 0?")).unwrap();
    assert_eq!(comment["target"], "acme/app#7");
    let body = comment["body"].as_str().unwrap();
    assert!(body.contains(&format!("<!-- ark-broker:question:{} -->", ids[0])), "{body}");
    assert!(body.contains("/answer Q-") && body.contains("`Yes, proceed`"), "{body}");
    // The same in SQL, for reports.
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    let delivered: i64 = sqlx::query_scalar(
        "select count(*) from question_deliveries where status = 'delivered' and query_name = 'review-42'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(delivered, 12);
}

#[tokio::test]
async fn a_channel_down_or_rate_limiting_gets_the_question_after_retries_and_never_twice() {
    let (slack, github) = tokio::join!(FakeApi::slack(), FakeApi::github());
    let app = TestApp::spawn_with(|config| {
        config.channels.slack_bot_token = Some(SLACK_TOKEN.parse().unwrap());
        config.channels.slack_api_url = slack.url.clone();
        config.channels.github_token = Some(GITHUB_TOKEN.parse().unwrap());
        config.channels.github_api_url = github.url.clone();
    })
    .await;
    slack.set_down(true);
    github.rate_limit(1);
    let (_, question) =
        json_of(app.post_json("/questions", &ask("Retry?", &["slack:C0123ABCD", "github:acme/app#8"])).await).await;
    let id = question["id"].as_str().unwrap().to_owned();
    slack.wait_for(2, true).await;
    let (_, seen) = json_of(app.get(&format!("/questions/{id}")).await).await;
    let on_slack =
        seen["deliveries"].as_array().unwrap().iter().find(|d| d["channel"] == "slack:C0123ABCD").unwrap().clone();
    assert_eq!(on_slack["status"], "pending", "{on_slack}");
    assert!(on_slack["error"].as_str().is_some_and(|e| e.contains("503")), "the last error is shown: {on_slack}");
    slack.set_down(false);
    let deliveries = settled(&app.client, &app.url(&format!("/questions/{id}"))).await;
    assert!(deliveries.iter().all(|d| d["status"] == "delivered"), "{deliveries:?}");
    let on_github = deliveries.iter().find(|d| d["channel"] == "github:acme/app#8").unwrap();
    assert!(on_github["attempts"].as_i64().unwrap() >= 2, "the 429 was retried: {on_github}");
    assert_eq!((slack.messages().len(), github.messages().len()), (1, 1), "never twice");
}

#[tokio::test]
async fn refused_deliveries_are_given_up_and_channel_entries_are_checked_when_asked() {
    let slack = FakeApi::slack().await;
    let app = TestApp::spawn_with(|config| {
        config.channels.slack_bot_token = Some(SLACK_TOKEN.parse().unwrap());
        config.channels.slack_api_url = slack.url.clone();
    })
    .await;
    let (_, question) = json_of(app.post_json("/questions", &ask("Where?", &["slack:#missing"])).await).await;
    let deliveries = settled(&app.client, &app.url(&format!("/questions/{}", question["id"].as_str().unwrap()))).await;
    assert_eq!(deliveries[0]["status"], "failed");
    assert!(deliveries[0]["error"].as_str().unwrap().contains("channel_not_found"), "{deliveries:?}");

    for (entry, says) in [
        ("github:acme/app#9", "--github-token"),
        ("email:dave@example.com", "not a channel"),
        ("slack", "not a channel"),
        ("slack:#Not Valid", "slack:#<name>"),
    ] {
        let (status, body) = json_of(app.post_json("/questions", &ask("?", &[entry])).await).await;
        assert_eq!((status, body["error"]["code"].as_str()), (400, Some("VALIDATION_ERROR")), "{entry}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(entry) && message.contains(says), "{entry}: {message}");
    }
    let (status, body) = json_of(
        app.post_json(
            "/questions",
            &json!({"sender": "ark://agents/a", "recipient": "ark://users/b",
        "content": "?", "options": [""]}),
        )
        .await,
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let mcp = Mcp::new(&app.mcp_url);
    let args = json!({"recipient": "ark://users/dave", "content": "?", "channels": ["github:acme/app#9"]});
    let refused = mcp.legacy("tools/call", json!({"name": "ask_question", "arguments": args, "task": {}})).await;
    assert_eq!(refused.error_code(), -32602, "{:?}", refused.message);
    assert!(refused.message["error"]["message"].as_str().unwrap().contains("github:acme/app#9"));
}

/// A GitHub webhook delivery to `app`, as GitHub signs it.
async fn github_delivery(app: &TestApp, event: &str, delivery: &str, payload: &Value, secret: &str) -> (u16, Value) {
    deliver(&app.url("/channels/github/webhook"), event, delivery, payload, secret).await
}

#[tokio::test]
async fn an_answer_comment_on_github_answers_the_question_pending_there_once() {
    const SECRET: &str = "It's a Secret to Everybody";
    let github = FakeApi::github().await;
    let app = TestApp::spawn_with(|config| {
        config.channels.github_token = Some(GITHUB_TOKEN.parse().unwrap());
        config.channels.github_api_url = github.url.clone();
        config.channels.github_webhook_secret = Some(SECRET.parse().unwrap());
    })
    .await;
    let mut ids = Vec::new();
    // GitHub's names are case-insensitive: the webhook's `acme/app` is the question's `Acme/App`.
    for content in ["Ship it?", "Tag it?"] {
        let asked = app.post_json("/questions", &ask(content, &["github:Acme/App#07", "github:acme/app#7"])).await;
        let (_, question) = json_of(asked).await;
        assert_eq!(question["channels"], json!(["github:acme/app#7"]), "one spelling, once");
        ids.push(question["id"].as_str().unwrap().to_owned());
    }
    github.wait_for(2, false).await;

    assert_eq!(
        github_delivery(&app, "ping", "d-0", &json!({"zen": "Keep it logically awesome."}), SECRET).await.0,
        200
    );
    let forged =
        github_delivery(&app, "issue_comment", "d-1", &issue_comment("/answer yes", "mallory", "User"), "guess").await;
    assert_eq!((forged.0, forged.1["error"]["code"].as_str()), (401, Some("UNAUTHORIZED")), "{}", forged.1);
    // Two pending on the issue: a bare /answer is ambiguous, and the reply says which ids to use.
    let (status, body) =
        github_delivery(&app, "issue_comment", "d-2", &issue_comment("/answer yes", "octocat", "User"), SECRET).await;
    assert_eq!(status, 200, "{body}");
    github.wait_for(3, false).await;
    assert!(github.messages()[2]["body"].as_str().unwrap().starts_with("Several questions are pending here"));

    let short = ark_broker::channels::short_id(&ids[0]);
    let answer = issue_comment(&format!("/answer {short} yes, ship it\nthanks"), "octocat", "User");
    let (status, body) = github_delivery(&app, "issue_comment", "d-3", &answer, SECRET).await;
    assert_eq!((status, body["outcome"].as_str().unwrap().starts_with("Answered")), (200, true), "{body}");
    let (_, question) = json_of(app.get(&format!("/questions/{}", ids[0])).await).await;
    assert_eq!((question["status"].as_str(), question["response"].as_str()), (Some("answered"), Some("yes, ship it")));
    assert_eq!(question["answeredBy"], "github:octocat");
    github.wait_for(4, false).await;
    // The same delivery again (GitHub retries) is acknowledged, not acted on.
    let (_, again) = github_delivery(&app, "issue_comment", "d-3", &answer, SECRET).await;
    assert_eq!(again["duplicate"], true);
    // A bot's comment, or the broker's own, never answers.
    let bot = issue_comment("/answer no", "ark-broker[bot]", "Bot");
    assert!(
        github_delivery(&app, "issue_comment", "d-4", &bot, SECRET).await.1["outcome"]
            .as_str()
            .unwrap()
            .starts_with("ignored")
    );
    // Now one is pending: a bare /answer answers it; a late answer to the first says who answered first.
    let (_, body) =
        github_delivery(&app, "issue_comment", "d-5", &issue_comment("/answer tag v2", "hubot", "User"), SECRET).await;
    assert!(body["outcome"].as_str().unwrap().starts_with("Answered"), "{body}");
    let late = issue_comment(&format!("/answer {short} no"), "hubot", "User");
    let (_, body) = github_delivery(&app, "issue_comment", "d-6", &late, SECRET).await;
    assert_eq!(body["outcome"], format!("{short} was already answered by github:octocat."), "{body}");
    github.wait_for(6, false).await;
    assert_eq!(github.messages().len(), 6, "two questions, four replies; nothing twice");
}

#[tokio::test]
async fn a_webhook_that_failed_is_acted_on_when_github_delivers_it_again() {
    const SECRET: &str = "redeliver";
    let github = FakeApi::github().await;
    let app = TestApp::spawn_with(|config| {
        config.channels.github_token = Some(GITHUB_TOKEN.parse().unwrap());
        config.channels.github_api_url = github.url.clone();
        config.channels.github_webhook_secret = Some(SECRET.parse().unwrap());
        config.db_lock_timeout_ms = 200;
    })
    .await;
    let (_, question) = json_of(app.post_json("/questions", &ask("Merge?", &["github:acme/app#7"])).await).await;
    let id = question["id"].as_str().unwrap();
    github.wait_for(1, false).await;
    // Another transaction holds the question: the answer cannot be stored, and the webhook fails.
    let pool = app.pool();
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("select 1 from questions where id = $1 for update").bind(id).execute(&mut *holder).await.unwrap();
    let comment = issue_comment("/answer merge it", "octocat", "User");
    let (status, body) = github_delivery(&app, "issue_comment", "d-again", &comment, SECRET).await;
    assert!(status >= 500, "{status}: {body}");
    holder.rollback().await.unwrap();
    // GitHub's "Redeliver" sends the same delivery id: acted on now, not taken for a duplicate.
    let (status, body) = github_delivery(&app, "issue_comment", "d-again", &comment, SECRET).await;
    assert_eq!((status, body["outcome"].as_str().map(|o| o.starts_with("Answered"))), (200, Some(true)), "{body}");
    let (_, stored) = json_of(app.get(&format!("/questions/{id}")).await).await;
    assert_eq!(
        (stored["response"].as_str(), stored["answeredBy"].as_str()),
        (Some("merge it"), Some("github:octocat"))
    );
}

#[tokio::test]
async fn a_send_that_outlived_its_claim_records_nothing_over_the_replica_that_took_over() {
    // No channel configured, so no worker of the broker's claims the delivery: both claims below are ours.
    let app = TestApp::spawn().await;
    let (_, question) = json_of(app.post_json("/questions", &ask("Claimed?", &[])).await).await;
    let id = question["id"].as_str().unwrap();
    let pool = app.pool();
    sqlx::query("insert into channel_deliveries (question_id, channel) values ($1, 'slack:#ops')")
        .bind(id)
        .execute(&pool)
        .await
        .unwrap();
    let store = app.state.channels.deliveries().clone();
    let first = store.claim_due(1, 30).await.unwrap().pop().expect("due");
    // Its lease runs out (as a slow send's would), and another replica claims the delivery.
    let due = "update channel_deliveries set next_attempt_at = now() - interval '1 second' where question_id = $1";
    sqlx::query(due).bind(id).execute(&pool).await.unwrap();
    let second = store.claim_due(1, 30).await.unwrap().pop().expect("due again");
    assert_eq!(second.attempts, first.attempts + 1);
    let reference = json!({"channel": "C1", "ts": "1.1"});
    assert!(!store.delivered(&first, Some("https://first"), &reference).await.unwrap(), "the first claim is stale");
    assert!(!store.failed(&first, "late").await.unwrap());
    assert!(store.delivered(&second, Some("https://second"), &reference).await.unwrap());
    let (_, stored) = json_of(app.get(&format!("/questions/{id}")).await).await;
    assert_eq!(stored["deliveries"][0]["url"], "https://second", "{stored}");
    let delivered_at = stored["deliveries"][0]["deliveredAt"].as_str().unwrap();
    assert!(delivered_at.ends_with('Z') && delivered_at.len() == 24, "the API's timestamp format: {delivered_at}");
}
