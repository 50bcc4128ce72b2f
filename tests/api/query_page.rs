//! The Query page: the stored unified stream rendered without JavaScript (text, tool calls, questions with
//! an answer form that comes back to the page), and the live page in headless Chromium across two replicas
//! (tests/browser/query-page.mjs).

use serde_json::{Value, json};

use crate::support::{Replica, TestApp, browser, fresh_database};

fn lines(values: &[Value]) -> String {
    values.iter().map(|v| format!("{v}\n")).collect()
}

#[tokio::test]
async fn the_query_page_renders_the_stored_stream_and_its_form_answers_and_comes_back() {
    let app = TestApp::spawn().await;
    let chunk = |delta: Value, finish: Value| json!({"choices":[{"index":0,"delta":delta,"finish_reason":finish}]});
    app.post_raw(
        "/stream/review-42",
        lines(&[
            chunk(json!({"content":"Looking <b>up</b> "}), Value::Null),
            chunk(json!({"content":"the docs."}), Value::Null),
            chunk(json!({"tool_calls":[{"index":0,"id":"call_s","function":{"name":"web_search","arguments":"{\"q\":\"ark\"}"}}]}), json!("tool_calls")),
            json!({"event":"tool_call_result","data":{"tool_call_id":"call_s","success":true,"result":"15 results","duration_ms":2300}}),
        ]),
    )
    .await;
    let question = json!({"sender":"ark://agents/reviewer","recipient":"ark://users/dave","content":"Ship it?",
                          "query":{"namespace":"team-a","name":"review-42"}});
    let asked: Value = app.post_json("/questions", &question).await.json().await.unwrap();
    let id = asked["id"].as_str().unwrap();

    let response = app.get("/ui/queries/team-a/review-42").await;
    assert_eq!(response.status(), 200);
    let html = response.text().await.unwrap();
    assert!(html.contains("Looking &lt;b&gt;up&lt;/b&gt; the docs."), "text joined and escaped");
    assert!(html.contains(r#"id="tool-call_s""#) && html.contains("web_search") && html.contains("2.3 s"));
    assert!(html.contains("succeeded") && html.contains("15 results"));
    assert!(html.contains(r#"class="phase phase-waiting" id="phase""#), "the Query waits on its question");
    assert!(html.contains(&format!(r#"action="/ui/questions/{id}/answer""#)));
    let questions = app.get("/ui").await.text().await.unwrap();
    assert!(questions.contains(r#"href="/ui/queries/team-a/review-42""#), "cards link to their Query's page");

    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let answered = client
        .post(app.url(&format!("/ui/questions/{id}/answer")))
        .form(&[("response", "yes"), ("answeredBy", "dave"), ("back", "/ui/queries/team-a/review-42")])
        .send()
        .await
        .unwrap();
    assert_eq!(answered.headers()["location"], format!("/ui/queries/team-a/review-42?answered={id}"));
    let html = app.get(&format!("/ui/queries/team-a/review-42?answered={id}")).await.text().await.unwrap();
    assert!(html.contains("status answered") && html.contains(">yes<") && html.contains(">dave<"));
    assert!(html.contains(r#"class="phase phase-running""#), "answered: running again");
    assert!(!html.contains(&format!(r#"action="/ui/questions/{id}/answer""#)), "no form once answered");

    let elsewhere = client
        .post(app.url(&format!("/ui/questions/{id}/answer")))
        .form(&[("response", "no"), ("back", "https://evil.example/")])
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.headers()["location"], format!("/ui?conflict={id}"), "never redirected off the broker");
}

#[tokio::test]
async fn a_form_post_without_an_answer_is_reported_on_the_page_not_refused() {
    let app = TestApp::spawn().await;
    let question = json!({"sender":"ark://agents/a","recipient":"ark://users/dave","content":"Go?"});
    let asked: Value = app.post_json("/questions", &question).await.json().await.unwrap();
    let id = asked["id"].as_str().unwrap();
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let posted = client.post(app.url(&format!("/ui/questions/{id}/answer"))).form(&[("answeredBy", "dave")]).send();
    assert_eq!(posted.await.unwrap().headers()["location"], format!("/ui?invalid={id}"));
}

#[tokio::test]
async fn the_page_of_a_query_not_seen_yet_waits_for_it() {
    let app = TestApp::spawn().await;
    let html = app.get("/ui/queries/ns/later").await.text().await.unwrap();
    assert!(html.contains("Nothing streamed yet") && html.contains("phase-unknown"));
    assert_eq!(app.get("/ui/assets/query.js").await.status(), 200);
}

#[tokio::test]
#[ignore = "needs Chromium and Node (tests/browser): ./scripts/test installs them and runs it"]
async fn the_query_page_is_live_in_headless_chromium_across_two_replicas() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let stdout = browser::run_scenario("query-page.mjs", &a, &b).await;
    assert!(stdout.contains("5 passed, 0 failed"), "{stdout}");
}
