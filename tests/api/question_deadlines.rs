//! Deadlines: what a question's timeout does (`onTimeout`: expire, answer with the form's defaults, or
//! escalate once with a second timeout), acted on exactly once however many passes race, and recorded.

use serde_json::{Value, json};

use crate::support::{
    Replica, TestApp,
    fake_channels::{FakeApi, SLACK_TOKEN},
    fresh_database, json_of, within,
};

async fn ask(app: &TestApp, extra: Value) -> (u16, Value) {
    let mut body = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Deploy?"});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    json_of(app.post_json("/questions", &body).await).await
}

/// Moves `id` back in time until its deadline has just passed, instead of waiting for it (its timeout's
/// length stays as it was).
async fn pass_deadline(app: &TestApp, id: &str) {
    sqlx::query(
        "update questions set created_at = created_at - (expires_at - now() + interval '1 second'),
                              expires_at = now() - interval '1 second'
         where id = $1",
    )
    .bind(id)
    .execute(&app.pool())
    .await
    .unwrap();
}

async fn question(app: &TestApp, id: &str) -> Value {
    json_of(app.get(&format!("/questions/{id}")).await).await.1
}

async fn steps(app: &TestApp, id: &str) -> Vec<Value> {
    json_of(app.get(&format!("/questions/{id}/history")).await).await.1["items"].as_array().unwrap().clone()
}

#[tokio::test]
async fn on_timeout_default_answers_with_the_forms_defaults_once_as_system_timeout() {
    let app = TestApp::spawn().await;
    let form = json!({"type": "object", "properties": {
        "approve": {"type": "boolean", "default": false}, "note": {"type": "string"}}, "required": ["approve"]});
    let (status, asked) =
        ask(&app, json!({"responseSchema": form, "timeoutSeconds": 600, "onTimeout": "default"})).await;
    assert_eq!(status, 201, "{asked}");
    assert_eq!(asked["onTimeout"], "default");
    let id = asked["id"].as_str().unwrap().to_owned();
    pass_deadline(&app, &id).await;
    let reaper = crate::memory::reaper(&app);
    tokio::join!(reaper.pass(), reaper.pass());
    let answered = question(&app, &id).await;
    assert_eq!(answered["status"], "answered", "{answered}");
    assert_eq!(answered["response"], json!({"approve": false}));
    assert_eq!(answered["answeredBy"], "system:timeout");
    let history = steps(&app, &id).await;
    let recorded: Vec<&str> = history.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(recorded, ["created", "answered"], "exactly once, however many passes raced");
    assert_eq!(
        (history[1]["actor"].as_str(), history[1]["channel"].as_str()),
        (Some("system:timeout"), Some("timeout"))
    );
    let late = app.post_json(&format!("/questions/{id}/answer"), &json!({"response": {"approve": true}})).await;
    assert_eq!(late.status(), 409, "the timeout's answer was the first");
}

#[tokio::test]
async fn a_late_answer_finds_the_deadline_acted_on_even_before_the_reaper_gets_there() {
    let app = TestApp::spawn().await;
    let form = json!({"type": "object", "properties": {"approve": {"type": "boolean", "default": true}}});
    let (_, asked) = ask(&app, json!({"responseSchema": form, "timeoutSeconds": 600, "onTimeout": "default"})).await;
    let id = asked["id"].as_str().unwrap().to_owned();
    pass_deadline(&app, &id).await;
    let (status, conflict) =
        json_of(app.post_json(&format!("/questions/{id}/answer"), &json!({"response": {"approve": false}})).await)
            .await;
    assert_eq!(status, 409, "{conflict}");
    assert_eq!(conflict["question"]["response"], json!({"approve": true}));
}

#[tokio::test]
async fn on_timeout_escalate_notifies_once_restarts_the_timeout_and_then_expires() {
    let app = TestApp::spawn().await;
    let to = json!({"recipients": ["ark://users/boss"]});
    let (status, asked) = ask(&app, json!({"timeoutSeconds": 600, "onTimeout": "escalate", "escalateTo": to})).await;
    assert_eq!(status, 201, "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();
    pass_deadline(&app, &id).await;
    let reaper = crate::memory::reaper(&app);
    tokio::join!(reaper.pass(), reaper.pass());
    let escalated = question(&app, &id).await;
    assert_eq!(escalated["status"], "pending", "an escalated question can still be answered");
    assert!(escalated["escalatedAt"].is_string(), "{escalated}");
    assert_eq!(escalated["escalateTo"], json!({"recipients": ["ark://users/boss"], "channels": []}));
    let expires = chrono::DateTime::parse_from_rfc3339(escalated["expiresAt"].as_str().unwrap()).unwrap();
    let left = expires.signed_duration_since(chrono::Utc::now()).num_seconds();
    assert!((590..=601).contains(&left), "a second timeout as long as the first: {left} s left");
    let history = steps(&app, &id).await;
    let recorded: Vec<&str> = history.iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(recorded, ["created", "escalated"], "escalated exactly once");
    assert_eq!(history[1]["detail"]["recipients"], json!(["ark://users/boss"]));

    // The second timeout expires it; it does not escalate again.
    pass_deadline(&app, &id).await;
    reaper.pass().await;
    assert_eq!(question(&app, &id).await["status"], "expired");
    let recorded: Vec<String> = steps(&app, &id).await.iter().map(|s| s["step"].as_str().unwrap().to_owned()).collect();
    assert_eq!(recorded, ["created", "escalated", "expired"]);
}

#[tokio::test]
async fn a_deadline_that_cannot_be_kept_is_refused_when_asked() {
    let app = TestApp::spawn().await;
    let no_default = json!({"type": "object", "properties": {"approve": {"type": "boolean"}}, "required": ["approve"]});
    let past = (chrono::Utc::now() - chrono::Duration::seconds(5)).to_rfc3339();
    for (extra, message) in [
        (json!({"onTimeout": "default", "timeoutSeconds": 60}), "onTimeout: default needs a responseSchema"),
        (
            json!({"onTimeout": "default", "timeoutSeconds": 60, "responseSchema": no_default}),
            "onTimeout: default needs",
        ),
        (json!({"onTimeout": "escalate", "timeoutSeconds": 60}), "escalateTo: required"),
        (json!({"onTimeout": "escalate"}), "onTimeout: escalate needs timeoutSeconds"),
        (json!({"escalateTo": {"recipients": ["ark://users/boss"]}}), "escalateTo: only with onTimeout: escalate"),
        (json!({"onTimeout": "escalate", "timeoutSeconds": 60, "escalateTo": {}}), "escalateTo: name at least one"),
        (
            json!({"onTimeout": "escalate", "timeoutSeconds": 60, "escalateTo": {"recipients": ["boss"]}}),
            "escalateTo.recipients",
        ),
        (json!({"ttlSeconds": 60, "timeoutSeconds": 60}), "timeoutSeconds: give one of"),
        (json!({"expiresAt": past}), "expiresAt: must be in the future"),
        (json!({"onTimeout": "later", "timeoutSeconds": 60}), "onTimeout"),
    ] {
        let (status, reply) = ask(&app, extra.clone()).await;
        assert_eq!(status, 400, "{extra}: {reply}");
        let said = reply["error"]["message"].as_str().unwrap();
        assert!(said.starts_with(message), "{extra}: {said}");
    }
    let future = (chrono::Utc::now() + chrono::Duration::seconds(3600)).to_rfc3339();
    let (status, asked) = ask(&app, json!({"expiresAt": future})).await;
    assert_eq!(status, 201, "{asked}");
    assert!(asked.get("onTimeout").is_none(), "expire, the default, is not spelled out");
}

#[tokio::test]
async fn an_mcp_task_lives_at_least_as_long_as_its_questions_timeout() {
    let app = TestApp::spawn().await;
    let mcp = crate::support::mcp::Mcp::new(&app.mcp_url);
    let arguments = json!({"recipient": "ark://users/dave", "content": "Wait for me?", "timeoutSeconds": 600,
                           "onTimeout": "expire"});
    let created =
        mcp.legacy("tools/call", json!({"name": "ask_question", "arguments": arguments, "task": {"ttl": 2000}})).await;
    let ttl = created.result()["task"]["ttl"].as_u64().expect("a granted ttl");
    assert!(ttl > 600_000, "the task outlives the question's timeout: {ttl} ms granted");
    let (_, list) = json_of(app.get("/questions?status=pending").await).await;
    let expires = list["items"][0]["expiresAt"].as_str().unwrap();
    let left = chrono::DateTime::parse_from_rfc3339(expires).unwrap().signed_duration_since(chrono::Utc::now());
    assert!(left.num_seconds() > 590, "the question's own timeout stands: {left}");
}

/// Waits until question `id`, read from `replica`, satisfies `done`; returns it.
async fn until_question(replica: &Replica, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let client = reqwest::Client::new();
    within("the question's deadline to be acted on", async {
        loop {
            let question: Value =
                client.get(replica.url(&format!("/questions/{id}"))).send().await.unwrap().json().await.unwrap();
            if done(&question) {
                return question;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
}

#[tokio::test]
async fn three_replicas_apply_a_default_and_escalate_to_a_channel_each_exactly_once() {
    let slack = FakeApi::slack().await;
    let url = fresh_database().await;
    let args = ["--slack-bot-token", SLACK_TOKEN, "--slack-api-url", &slack.url, "--reap-interval-seconds", "1"];
    let (a, b, c) = Replica::three(&url, &args).await;
    let client = reqwest::Client::new();
    let post = |replica: &Replica, body: Value| client.post(replica.url("/questions")).json(&body).send();
    let form = json!({"type": "object", "properties": {"approve": {"type": "boolean", "default": false}}});
    let defaulted = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Deploy?",
                           "responseSchema": form, "timeoutSeconds": 2, "onTimeout": "default"});
    let escalating = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/dave", "content": "Rollback?",
                            "channels": ["slack:#ops"], "timeoutSeconds": 2, "onTimeout": "escalate",
                            "escalateTo": {"recipients": ["ark://users/boss"], "channels": ["slack:#oncall"]}});
    let (status, first) = json_of(post(&a, defaulted).await.unwrap()).await;
    assert_eq!(status, 201, "{first}");
    let (status, second) = json_of(post(&b, escalating).await.unwrap()).await;
    assert_eq!(status, 201, "{second}");
    let (first, second) = (first["id"].as_str().unwrap().to_owned(), second["id"].as_str().unwrap().to_owned());

    let answered = until_question(&c, &first, |q| q["status"] != "pending").await;
    assert_eq!(
        (answered["status"].as_str(), answered["answeredBy"].as_str()),
        (Some("answered"), Some("system:timeout"))
    );
    assert_eq!(answered["response"], json!({"approve": false}));

    // Escalated: #oncall gets the question, and it stays open for a second timeout; then it expires.
    let escalated = until_question(&c, &second, |q| q["escalatedAt"].is_string()).await;
    assert_eq!(escalated["status"], "pending", "{escalated}");
    let expired = until_question(&a, &second, |q| q["status"] != "pending").await;
    assert_eq!(expired["status"], "expired", "{expired}");
    let on = |channel: &str| slack.messages().iter().filter(|m| m["channel"] == channel).count();
    assert_eq!((on("#ops"), on("#oncall")), (1, 1), "each channel got the question once: {:?}", slack.messages());

    for (id, expected) in [
        (&first, vec!["created", "answered"]),
        (&second, vec!["created", "delivered", "escalated", "delivered", "expired"]),
    ] {
        let history: Value =
            client.get(b.url(&format!("/questions/{id}/history"))).send().await.unwrap().json().await.unwrap();
        let steps: Vec<&str> =
            history["items"].as_array().unwrap().iter().map(|s| s["step"].as_str().unwrap()).collect();
        assert_eq!(steps, expected, "each step once, though three replicas' reapers and waiters raced: {history}");
    }
}
