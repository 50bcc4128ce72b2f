//! Browser safety against real broker processes: a form on another site cannot answer a question or delete
//! anything through a visitor's browser (cross-site `Origin` or `Referer` → 403), a JSON route refuses a
//! body not declared JSON (415, so a `text/plain` "simple" request cannot carry one), and the page sends a
//! strict Content-Security-Policy and the other protective headers.

use serde_json::{Value, json};

use crate::support::{Replica, fresh_database};

async fn ask(client: &reqwest::Client, replica: &Replica) -> String {
    let question = json!({"sender":"ark://agents/a","recipient":"ark://users/dave","content":"Deploy?"});
    let asked: Value =
        client.post(replica.url("/questions")).json(&question).send().await.unwrap().json().await.unwrap();
    asked["id"].as_str().unwrap().to_owned()
}

async fn status_of(client: &reqwest::Client, replica: &Replica, id: &str) -> String {
    let question: Value =
        client.get(replica.url(&format!("/questions/{id}"))).send().await.unwrap().json().await.unwrap();
    question["status"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn cross_site_forms_and_undeclared_json_bodies_change_nothing() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let id = ask(&client, &a).await;

    // A form on evil.example posting to the page's answer route (what a browser sends).
    let form = client
        .post(b.url(&format!("/ui/questions/{id}/answer")))
        .header("origin", "https://evil.example")
        .form(&[("response", "yes, from a forged form")]);
    let refused = form.send().await.unwrap();
    assert_eq!(refused.status(), 403);
    // The page's route answers a person's browser with an HTML page; the API's routes with the error body.
    assert!(refused.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    // Without Origin a browser still sends Referer; another site's is refused too.
    let by_referer = client
        .post(b.url(&format!("/questions/{id}/answer")))
        .header("referer", "https://evil.example/page.html")
        .json(&json!({"response": "yes"}));
    assert_eq!(by_referer.send().await.unwrap().status(), 403);
    let cancel = client.delete(b.url(&format!("/questions/{id}"))).header("origin", "https://evil.example");
    assert_eq!(cancel.send().await.unwrap().status(), 403);
    // JSON smuggled as text/plain (a "simple" cross-site request) is refused whatever its origin.
    let smuggled = client
        .post(b.url(&format!("/questions/{id}/answer")))
        .header("content-type", "text/plain")
        .body(r#"{"response":"yes"}"#);
    let refused = smuggled.send().await.unwrap();
    assert_eq!(refused.status(), 415);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "UNSUPPORTED_MEDIA_TYPE");
    // DNS rebinding: evil.example re-pointed at the broker makes its page same-origin in the browser's eyes
    // (Host and Origin agree); the name is not one the broker's pages are served under.
    let port = b.base.rsplit(':').next().unwrap().to_owned();
    let rebound = client
        .post(b.url(&format!("/ui/questions/{id}/answer")))
        .header("host", format!("evil.example:{port}"))
        .header("origin", format!("http://evil.example:{port}"))
        .form(&[("response", "yes, through a rebound name")]);
    let refused = rebound.send().await.unwrap();
    assert_eq!(refused.status(), 403);
    let page = refused.text().await.unwrap();
    assert!(page.contains("--allowed-hosts"), "{page}");
    assert_eq!(status_of(&client, &a, &id).await, "pending", "nothing was answered or cancelled");

    // The page's own form (same origin) still answers.
    let own = b.base.clone();
    let answered = client
        .post(b.url(&format!("/ui/questions/{id}/answer")))
        .header("origin", own)
        .form(&[("response", "yes")])
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 303);
    assert_eq!(status_of(&client, &a, &id).await, "answered");
}

#[tokio::test]
async fn the_pages_forbid_inline_script_framing_and_sniffing() {
    let url = fresh_database().await;
    let a = Replica::start(&url).await;
    let client = reqwest::Client::new();
    for path in ["/ui", "/ui/queries/ns/q", "/ui/assets/app.js"] {
        let response = client.get(a.url(path)).send().await.unwrap();
        let headers = response.headers();
        let policy = headers["content-security-policy"].to_str().unwrap();
        assert!(policy.contains("script-src 'self'") && !policy.contains("unsafe-inline"), "{path}: {policy}");
        assert!(policy.contains("frame-ancestors 'none'"), "{path}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "{path}");
        assert_eq!(headers["referrer-policy"], "same-origin", "{path}");
    }
    let page = client.get(a.url("/ui")).send().await.unwrap().text().await.unwrap();
    assert!(!page.contains("<script>") && !page.contains(" onclick="), "no inline script on the page");
}
