//! The web page: server-rendered HTML and the no-JavaScript form over HTTP, and the whole page driven in
//! headless Chromium across two replicas (tests/browser/questions-page.mjs).

use serde_json::{Value, json};

use crate::support::{
    Replica, TestApp, browser,
    fake_channels::{FakeApi, SLACK_TOKEN},
    fresh_database,
};

async fn ask(app: &TestApp, content: &str) -> Value {
    let body = json!({"sender": "ark://agents/reviewer", "recipient": "ark://users/dave", "content": content});
    let response = app.post_json("/questions", &body).await;
    assert_eq!(response.status(), 201);
    response.json().await.unwrap()
}

#[tokio::test]
async fn the_page_lists_pending_questions_escaped_with_an_answer_form_each() {
    let app = TestApp::spawn().await;
    let question = ask(&app, "Deploy <b>v2</b>?").await;
    let id = question["id"].as_str().unwrap();
    let response = app.get("/ui").await;
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = response.text().await.unwrap();
    assert!(html.contains("Deploy &lt;b&gt;v2&lt;/b&gt;?"), "content is escaped");
    assert!(html.contains(&format!(r#"action="/ui/questions/{id}/answer""#)));
    assert!(html.contains(&format!(r#"data-resource-version="{}""#, question["resourceVersion"].as_str().unwrap())));
    for asset in ["/ui/assets/app.js", "/ui/assets/app.css"] {
        let response = app.get(asset).await;
        assert_eq!(response.status(), 200, "{asset} is embedded");
        assert!(!response.text().await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn the_form_answers_and_redirects_back_and_a_second_answer_is_reported_as_a_conflict() {
    let app = TestApp::spawn().await;
    let id = ask(&app, "Merge?").await["id"].as_str().unwrap().to_owned();
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let post = |response: &str| {
        client
            .post(app.url(&format!("/ui/questions/{id}/answer")))
            .form(&[("response", response), ("answeredBy", "dave")])
            .send()
    };
    let first = post("yes").await.unwrap();
    assert_eq!(first.status(), 303);
    assert_eq!(first.headers()["location"], format!("/ui?answered={id}"));
    let stored: Value = app.get(&format!("/questions/{id}")).await.json().await.unwrap();
    assert_eq!((stored["status"].as_str(), stored["response"].as_str()), (Some("answered"), Some("yes")));
    let second = post("no").await.unwrap();
    assert_eq!(second.headers()["location"], format!("/ui?conflict={id}"));
    let page = app.get(&format!("/ui?conflict={id}")).await.text().await.unwrap();
    assert!(page.contains("already answered"), "the conflict is explained");
    let closed = app.get("/ui?view=closed").await.text().await.unwrap();
    assert!(closed.contains(&format!("question-{id}")) && closed.contains("yes"));
    let empty = post("  ").await.unwrap();
    assert_eq!(empty.status(), 303, "an empty answer is reported on the page, not stored");
}

#[tokio::test]
async fn the_page_works_in_headless_chromium_across_two_replicas() {
    // A fake Slack, so the page shows a delivery move on.
    let slack = FakeApi::slack().await;
    let url = fresh_database().await;
    let args = ["--slack-bot-token", SLACK_TOKEN, "--slack-api-url", &slack.url];
    let (a, b) = tokio::join!(Replica::start_with(&url, &args), Replica::start_with(&url, &args));
    let stdout = browser::run_scenario("questions-page.mjs", &a, &b).await;
    assert!(stdout.contains("7 passed, 0 failed"), "{stdout}");
}
