//! The web page: server-rendered HTML (Markdown, friendly names, search, filters, paging, HTML error pages)
//! and the no-JavaScript form over HTTP, and the whole page driven in headless Chromium across two replicas:
//! live behaviour (tests/browser/questions-page.mjs), search and paging (questions-search.mjs), and real
//! outages — the database stopped, the page's replica killed (questions-outage.mjs).

use std::{path::Path, process::Stdio, time::Duration};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::support::{
    OwnServer, Replica, TestApp,
    fake_channels::{FakeApi, SLACK_TOKEN},
    fresh_database, within,
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
async fn content_is_markdown_rendered_safely_and_addresses_get_friendly_names() {
    let app = TestApp::spawn().await;
    ask(&app, "**Ship** it? See https://example.com/x\n\n<script>alert(1)</script>").await;
    let html = app.get("/ui").await.text().await.unwrap();
    assert!(html.contains("<strong>Ship</strong>"), "{html}");
    assert!(html.contains(r#"<a href="https://example.com/x" rel="noopener nofollow">https://example.com/x</a>"#));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;") && !html.contains("<script>alert"));
    assert!(html.contains(r#"title="ark://agents/reviewer">reviewer (agent)</a>"#), "the full address on hover");
    assert!(html.contains(r#"title="ark://users/dave">dave (user)</a>"#));
    assert!(html.contains("<title>(1) Questions · Ark Broker</title>"), "the pending count in the title");
    assert!(html.contains(r#"aria-live="polite""#));
}

#[tokio::test]
async fn a_card_renders_alone_for_the_script_and_the_pages_errors_are_html_while_the_api_keeps_json() {
    let app = TestApp::spawn().await;
    let id = ask(&app, "Merge?").await["id"].as_str().unwrap().to_owned();
    let card = app.get(&format!("/ui/questions/{id}/card")).await.text().await.unwrap();
    assert!(
        card.starts_with(&format!(r#"<li class="question" id="question-{id}""#)) && card.contains("<form"),
        "{card}"
    );
    let answer = json!({"response": "yes", "answeredBy": "erin"});
    assert_eq!(app.post_json(&format!("/questions/{id}/answer"), &answer).await.status(), 200);
    let card = app.get(&format!("/ui/questions/{id}/card")).await.text().await.unwrap();
    assert!(card.contains(r#"data-status="answered""#) && card.contains(r#"<span class="by">erin</span>"#), "{card}");
    assert!(card.contains("just now") && !card.contains("<form"), "{card}");

    for (path, status, says) in [
        ("/ui/questions/q-none/card", 404, "<h1>Not found</h1>"),
        ("/ui?cursor=zzz", 400, "cursor: not one this page made"),
        // Refused by the layers in front of the page's routes: still an HTML page.
        ("/ui/nothing-here", 404, "<h1>Not found</h1>"),
        ("/ui?q=%00", 400, "NUL"),
    ] {
        let response = app.get(path).await;
        assert_eq!(response.status(), status, "{path}");
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/html"), "{path}");
        let html = response.text().await.unwrap();
        assert!(html.contains(says) && html.contains("Request ID: <code>"), "{path}: {html}");
    }
    let cross_site = app
        .client
        .post(app.url(&format!("/ui/questions/{id}/answer")))
        .header("origin", "http://evil.example")
        .form(&[("response", "no")])
        .send()
        .await
        .unwrap();
    assert_eq!(cross_site.status(), 403);
    assert!(cross_site.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    assert!(cross_site.headers().contains_key("content-security-policy"), "the page's headers on its error page");
    let api = app.get("/questions/q-none").await;
    assert_eq!(api.headers()["content-type"], "application/json; charset=utf-8", "the API keeps its JSON errors");
}

#[tokio::test]
async fn search_and_filters_narrow_both_tabs() {
    let app = TestApp::spawn().await;
    let mut ids = Vec::new();
    for (content, sender, recipient, query) in [
        (
            "Rotate the TLS certificates?",
            "security",
            "ark://users/erin",
            json!({"namespace": "team-b", "name": "certs"}),
        ),
        ("Renew the tls wildcard?", "security", "ark://teams/sre", Value::Null),
        ("Scale the workers?", "scaler", "ark://users/erin", json!({"namespace": "team-b", "name": "scale"})),
    ] {
        let body = json!({"sender": format!("ark://agents/{sender}"), "recipient": recipient, "content": content, "query": query});
        let response: Value = app.post_json("/questions", &body).await.json().await.unwrap();
        ids.push(response["id"].as_str().unwrap().to_owned());
    }
    let answer = json!({"response": "done"});
    assert_eq!(app.post_json(&format!("/questions/{}/answer", ids[2]), &answer).await.status(), 200);
    for (path, expected) in [
        ("/ui?q=TLS", vec![0, 1]),
        ("/ui?q=tls&sender=ark://agents/security&recipient=&query=", vec![0, 1]),
        ("/ui?recipient=ark://users/erin", vec![0]),
        ("/ui?view=closed&recipient=ark://users/erin", vec![2]),
        ("/ui?query=team-b/certs", vec![0]),
        ("/ui?view=closed&query=scale", vec![2]),
        ("/ui?view=closed&query=other/scale", vec![]),
        ("/ui?sender=ark://agents/security&q=wildcard", vec![1]),
    ] {
        let html = app.get(path).await.text().await.unwrap();
        assert_eq!(listed(&html), expected.iter().map(|&i| ids[i].clone()).collect::<Vec<_>>(), "{path}");
    }
}

#[tokio::test]
async fn both_tabs_page_on_past_500_questions() {
    let app = &TestApp::spawn().await;
    let numbers: Vec<usize> = (0..505).collect();
    let mut ids = Vec::new();
    for chunk in numbers.chunks(25) {
        let asked =
            futures::future::join_all(chunk.iter().map(|n| async move { ask(app, &format!("Question {n}?")).await }))
                .await;
        ids.extend(asked.iter().map(|q| q["id"].as_str().unwrap().to_owned()));
    }
    let first = app.get("/ui").await.text().await.unwrap();
    assert!(first.contains("<title>(505) Questions · Ark Broker</title>"), "past one page the count is still exact");
    let pending = pages(app, "/ui").await;
    assert_eq!(pending.iter().map(Vec::len).collect::<Vec<_>>(), [500, 5]);
    let (mut listed, mut asked) = (pending.concat(), ids.clone());
    listed.sort();
    asked.sort();
    assert!(listed == asked, "every pending question once");
    for chunk in ids.chunks(25) {
        futures::future::join_all(chunk.iter().map(|id| async move { app.delete(&format!("/questions/{id}")).await }))
            .await;
    }
    let closed = pages(app, "/ui?view=closed").await;
    assert_eq!(closed.iter().map(Vec::len).collect::<Vec<_>>(), [500, 5]);
    let mut all = closed.concat();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), 505, "every closed question once");
}

#[tokio::test]
async fn the_page_shows_the_exact_pending_count_at_600_pending_questions_on_every_page_tab_and_search() {
    let app = &TestApp::spawn().await;
    // Written straight into the table, in one statement: the page reads the table, and 600 asks would be slow.
    // Half are for erin, one in ten mentions TLS, and 50 more are answered (not pending, so never counted).
    sqlx::query(
        "insert into questions (id, sender, recipient, content, status, response, answered_at, closed_at,
                                resource_version)
         select 'q-' || gen_random_uuid(), 'ark://agents/bulk', 'ark://users/' || (array['dave', 'erin'])[i % 2 + 1],
                case when i % 10 = 0 then 'Rotate the TLS certificates ' || i || '?' else 'Question ' || i || '?' end,
                case when i > 600 then 'answered' else 'pending' end,
                case when i > 600 then 'done' end,
                case when i > 600 then now() end,
                case when i > 600 then now() end,
                nextval('question_versions')
         from generate_series(1, 650) as i",
    )
    .execute(&app.pool())
    .await
    .unwrap();
    let count = |html: &str| {
        let title = html.split("<title>(").nth(1).and_then(|rest| rest.split(')').next()).unwrap().to_owned();
        let tab = html.split(r#"id="pending-count""#).nth(1).unwrap();
        let shown = tab[tab.find('>').unwrap() + 1..tab.find('<').unwrap()].to_owned();
        assert_eq!(title, shown, "the title and the tab say the same");
        shown
    };
    // Both pages of the Pending tab, and the Closed tab, count every pending question.
    for (path, sizes) in [("/ui", vec![500, 100]), ("/ui?view=closed", vec![50])] {
        let pages = page_htmls(app, path).await;
        assert_eq!(pages.iter().map(|html| listed(html).len()).collect::<Vec<_>>(), sizes, "{path}");
        assert!(pages.iter().all(|html| count(html) == "600"), "{path}");
    }
    for (path, expected) in [
        ("/ui?recipient=ark://users/erin", "300"),
        ("/ui?q=tls", "60"),
        ("/ui?view=closed&q=tls&recipient=ark://users/dave", "60"),
        ("/ui?q=nothing+like+this", "0"),
    ] {
        assert_eq!(count(&app.get(path).await.text().await.unwrap()), expected, "{path}");
    }
}

/// The ids of the cards a page lists, in order.
fn listed(html: &str) -> Vec<String> {
    html.split(r#"data-id=""#).skip(1).map(|rest| rest[..rest.find('"').unwrap()].to_owned()).collect()
}

/// The cards of every page from `path` on, following the pager's Next links.
async fn pages(app: &TestApp, path: &str) -> Vec<Vec<String>> {
    page_htmls(app, path).await.iter().map(|html| listed(html)).collect()
}

/// The HTML of every page from `path` on, following the pager's Next links.
async fn page_htmls(app: &TestApp, path: &str) -> Vec<String> {
    let mut pages = Vec::new();
    let mut next = Some(path.to_owned());
    while let Some(path) = next {
        let html = app.get(&path).await.text().await.unwrap();
        next =
            html.split(r#"rel="next" href=""#).nth(1).map(|rest| rest[..rest.find('"').unwrap()].replace("&amp;", "&"));
        pages.push(html);
    }
    pages
}

#[tokio::test]
#[ignore = "needs Chromium and Node (tests/browser): ./scripts/test installs them and runs it"]
async fn the_page_works_in_headless_chromium_across_two_replicas() {
    // A fake Slack, so the page shows a delivery move on.
    let slack = FakeApi::slack().await;
    let url = fresh_database().await;
    let args = ["--slack-bot-token", SLACK_TOKEN, "--slack-api-url", &slack.url];
    let (a, mut b) = tokio::join!(Replica::start_with(&url, &args), Replica::start_with(&url, &args));
    let stdout = run_long("questions-page.mjs", &a, &mut b, None).await;
    assert!(stdout.contains("13 passed, 0 failed"), "{stdout}");
}

#[tokio::test]
#[ignore = "needs Chromium and Node (tests/browser): ./scripts/test installs them and runs it"]
async fn the_pages_search_filters_and_paging_work_in_headless_chromium_across_two_replicas() {
    let url = fresh_database().await;
    let (a, mut b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let stdout = run_long("questions-search.mjs", &a, &mut b, None).await;
    assert!(stdout.contains("5 passed, 0 failed"), "{stdout}");
}

#[tokio::test]
#[ignore = "needs Chromium and Node (tests/browser): ./scripts/test installs them and runs it"]
async fn the_page_rides_out_a_database_outage_and_shows_when_its_replica_is_gone_in_headless_chromium() {
    let (server, url) = OwnServer::start().await;
    // The answers sent while the database is down (REST's from the page's script, the plain form post) wait
    // out the ride-through window before their 503: a short one keeps the scenario short.
    let start = || Replica::start_with(&url, &["--db-ride-through-ms", "2000"]);
    let (a, mut b) = tokio::join!(start(), start());
    let stdout = run_long("questions-outage.mjs", &a, &mut b, Some(&server)).await;
    assert!(stdout.contains("4 passed, 0 failed"), "{stdout}");
}

/// Runs `tests/browser/<script>` as [`crate::support::browser::run_scenario`] does, with two minutes for the whole scenario
/// rather than one [`crate::support::PATIENCE`] (these scenarios create hundreds of questions, or wait out
/// outages, on a shared machine), and does what it asks for in between (`@@ stop-database`, `@@
/// start-database` on `server`, the replicas' PostgreSQL; `@@ kill-b`), answering `done` on its stdin once the
/// replicas have seen the change.
async fn run_long(script: &str, a: &Replica, b: &mut Replica, server: Option<&OwnServer>) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(
        Path::new(&chromium).exists() && root.join("tests/browser/node_modules/playwright-core").exists(),
        "this test needs Chromium ({chromium}) and tests/browser's npm packages; ./scripts/test installs both"
    );
    let mut node = tokio::process::Command::new("node")
        .arg(root.join("tests/browser").join(script))
        .env("BROKER_A", &a.base)
        .env("BROKER_B", &b.base)
        .env("CHROMIUM", &chromium)
        .envs(std::env::var("SCREENSHOT_DIR").ok().map(|dir| ("SCREENSHOT_DIR", dir)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run node");
    let mut stdin = node.stdin.take().expect("piped stdin");
    let mut lines = BufReader::new(node.stdout.take().expect("piped stdout")).lines();
    let mut stderr = node.stderr.take().expect("piped stderr");
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text).await;
        text
    });
    let client = reqwest::Client::new();
    let mut printed = String::new();
    let run = async {
        while let Some(line) = lines.next_line().await.expect("read the scenario's output") {
            let Some(request) = line.strip_prefix("@@ ") else {
                printed.push_str(&line);
                printed.push('\n');
                continue;
            };
            match request {
                "stop-database" => {
                    server.expect("a PostgreSQL of the test's own to stop").stop().await;
                    // Each replica knows once its LISTEN connection fails to connect again (it logs that).
                    for replica in [a, &*b] {
                        within("a replica to notice the outage", async {
                            while !replica.log().contains("LISTEN connection failed") {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        })
                        .await;
                    }
                }
                "start-database" => {
                    server.expect("a PostgreSQL of the test's own to start").start_again().await;
                    for replica in [a, &*b] {
                        within("a replica to recover", async {
                            let ok =
                                || async { client.get(replica.url("/questions")).send().await.map(|r| r.status()) };
                            while ok().await.ok() != Some(reqwest::StatusCode::OK) {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                            }
                        })
                        .await;
                    }
                }
                "kill-b" => b.kill().await,
                other => panic!("the scenario asked for {other}, which this test does not do"),
            }
            stdin.write_all(b"done\n").await.expect("answer the scenario");
        }
        node.wait().await.expect("wait for node")
    };
    let finished = tokio::time::timeout(Duration::from_secs(120), run).await;
    if finished.is_err() {
        let _ = node.start_kill();
    }
    let errors = errors.await.unwrap_or_default();
    let failed = match finished {
        Ok(status) if status.success() => None,
        Ok(status) => Some(format!("the browser scenario failed ({status})")),
        Err(_) => Some("the browser scenario did not finish in two minutes".to_owned()),
    };
    if let Some(failed) = failed {
        panic!("{failed}:\n{printed}\n{errors}\nreplica B:\n{}", b.log());
    }
    printed
}
