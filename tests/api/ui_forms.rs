//! The page's answer forms for typed questions (one input per field of the `responseSchema`, posted without
//! JavaScript into the object REST takes), its Decline button, the history on each card, and the answer
//! policy deciding who is offered a form; and a typed form filled in headless Chromium, on the questions page
//! and on a Query's page (tests/browser/questions-typed.mjs).

use ark_broker::config::{AnswerPolicy, AuthMode};
use serde_json::{Value, json};
use tempfile::NamedTempFile;

use crate::support::{Replica, TestApp, browser, fresh_database, json_of, temp_file};

fn form() -> Value {
    json!({
        "type": "object",
        "properties": {
            "decision": {"type": "string", "title": "Decision",
                         "oneOf": [{"const": "approve", "title": "Approve"}, {"const": "reject", "title": "Reject"}]},
            "region": {"type": "string", "enum": ["eu", "us", "ap", "sa", "af", "me"],
                       "enumNames": ["Europe", "Americas", "Asia-Pacific", "South America", "Africa", "Middle East"],
                       "default": "us"},
            "zones": {"type": "array", "title": "Zones", "minItems": 1,
                      "items": {"anyOf": [{"const": "a", "title": "Zone A"}, {"const": "b", "title": "Zone B"}]},
                      "default": ["b"]},
            "notify": {"type": "boolean", "title": "Notify the team", "default": true},
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1, "description": "Share of traffic"},
            "contact": {"type": "string", "format": "email"},
            "ticket": {"type": "string", "minLength": 3, "maxLength": 20},
            "on": {"type": "string", "format": "date"},
            "at": {"type": "string", "format": "date-time", "default": "2026-03-01T09:30:00Z"}
        },
        "required": ["decision", "replicas", "contact"]
    })
}

async fn ask(app: &TestApp, extra: Value) -> String {
    let mut body = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/bob", "content": "Deploy?",
                          "query": {"namespace": "team", "name": "release-9"}});
    body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    let (status, question) = json_of(app.post_json("/questions", &body).await).await;
    assert_eq!(status, 201, "{question}");
    question["id"].as_str().unwrap().to_owned()
}

/// The HTML of card `id` on `html` (and what follows it up to the next card).
fn card<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html.find(&format!(r#"id="question-{id}""#)).unwrap_or_else(|| panic!("card {id} in {html}"));
    // To the next card (a card holds lists of its own: its history).
    let end = html[start + 1..].find(r#"id="question-"#).map_or(html.len(), |end| start + 1 + end);
    &html[start..end]
}

fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

async fn question(app: &TestApp, id: &str) -> Value {
    json_of(app.get(&format!("/questions/{id}")).await).await.1
}

#[tokio::test]
async fn a_typed_question_gets_one_input_per_field_and_options_and_text_keep_their_own() {
    let app = TestApp::spawn().await;
    let typed = ask(&app, json!({"responseSchema": form()})).await;
    let options = ask(&app, json!({"options": ["Yes, proceed", "No"]})).await;
    let text = ask(&app, json!({})).await;
    let html = app.get("/ui").await.text().await.unwrap();
    let typed_card = card(&html, &typed);
    for expected in [
        // One choice of two: radio buttons with their titles, required.
        r#"<legend>Decision <span class="required" title="required">*</span></legend>"#,
        r#"<input type="radio" name="field.decision" value="approve" data-kind="choice" required> Approve"#,
        r#"<input type="radio" name="field.decision" value="reject" data-kind="choice" required> Reject"#,
        // One of six: a select, its default chosen.
        r#"<select name="field.region" data-kind="choice">"#,
        r#"<option value="us" selected>Americas</option>"#,
        // Several choices: checkboxes, the default ticked, the bound said.
        r#"<input type="checkbox" name="field.zones" value="a" data-kind="multi"> Zone A"#,
        r#"<input type="checkbox" name="field.zones" value="b" data-kind="multi" checked> Zone B"#,
        "Choose 1 to any number.",
        // Yes or no: one checkbox, ticked by its default.
        r#"<input type="checkbox" name="field.notify" value="true" data-kind="boolean" checked> Notify the team"#,
        // Numbers with their bounds and steps, the default filled in.
        r#"<input type="number" name="field.replicas" data-kind="integer" step="1" min="1" max="10" value="3" required>"#,
        r#"<input type="number" name="field.ratio" data-kind="number" step="any" min="0" max="1">"#,
        r#"<span class="hint">Share of traffic</span>"#,
        // Strings by format, with their lengths.
        r#"<input type="email" name="field.contact" data-kind="string" data-format="email" required>"#,
        r#"<input type="text" name="field.ticket" data-kind="string" minlength="3" maxlength="20">"#,
        r#"<input type="date" name="field.on" data-kind="string" data-format="date">"#,
        r#"<input type="datetime-local" name="field.at" data-kind="string" data-format="date-time" step="1" value="2026-03-01T09:30:00">"#,
        // The post says it is a typed form's, and the form can decline.
        r#"<input type="hidden" name="typed" value="1">"#,
        &format!(r#"formaction="/ui/questions/{typed}/decline" formnovalidate"#),
    ] {
        assert!(typed_card.contains(expected), "{expected} in {typed_card}");
    }
    assert!(!typed_card.contains(r#"name="response""#), "no text box for a typed question");
    let options_card = card(&html, &options);
    assert!(
        options_card.contains(r#"<input type="radio" name="response" value="Yes, proceed" required> Yes, proceed"#)
    );
    assert!(!options_card.contains("textarea"), "{options_card}");
    assert!(card(&html, &text).contains(r#"<textarea name="response" rows="2" required>"#), "text keeps its box");

    // A card that arrives live is the same server-rendered card, and the Query's page offers the same form.
    let live = app.get(&format!("/ui/questions/{typed}/card")).await.text().await.unwrap();
    assert!(live.contains(r#"name="field.decision""#) && live.contains(r#"<select name="field.region""#));
    let query = app.get("/ui/queries/team/release-9").await.text().await.unwrap();
    assert!(card(&query, &typed).contains(r#"name="field.zones""#), "the Query page's inline form is typed too");
}

#[tokio::test]
async fn the_typed_form_posted_without_javascript_is_stored_as_the_typed_answer() {
    let app = TestApp::spawn().await;
    let id = ask(&app, json!({"responseSchema": form()})).await;
    let posted = no_redirects()
        .post(app.url(&format!("/ui/questions/{id}/answer")))
        .form(&[
            ("typed", "1"),
            ("field.decision", "approve"),
            ("field.region", "eu"),
            ("field.zones", "a"),
            ("field.zones", "b"),
            // `notify` unticked: not posted at all.
            ("field.replicas", "4"),
            ("field.ratio", "0.25"),
            ("field.contact", "bob@example.com"),
            ("field.ticket", ""),
            ("field.on", "2026-02-01"),
            ("field.at", "2026-03-02T10:00"),
            ("answeredBy", "bob"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(posted.status(), 303);
    assert_eq!(posted.headers()["location"], format!("/ui?answered={id}"));
    let stored = question(&app, &id).await;
    assert_eq!((stored["status"].as_str(), stored["answeredBy"].as_str()), (Some("answered"), Some("bob")));
    assert_eq!(
        stored["response"],
        json!({"decision": "approve", "region": "eu", "zones": ["a", "b"], "notify": false, "replicas": 4,
               "ratio": 0.25, "contact": "bob@example.com", "on": "2026-02-01", "at": "2026-03-02T10:00:00Z"}),
        "numbers as numbers, the unticked box false, the choices a list, the empty field left out"
    );
    let closed = app.get("/ui?view=closed").await.text().await.unwrap();
    let closed = card(&closed, &id);
    assert!(closed.contains("&quot;decision&quot;:&quot;approve&quot;"), "the closed card shows the answer: {closed}");
}

#[tokio::test]
async fn a_bad_value_from_the_form_gets_the_error_page_naming_the_field_and_changes_nothing() {
    let app = TestApp::spawn().await;
    let id = ask(&app, json!({"responseSchema": form()})).await;
    let base =
        [("typed", "1"), ("field.decision", "approve"), ("field.zones", "a"), ("field.contact", "bob@example.com")];
    for (field, value, says) in [
        ("field.replicas", "0", "response.replicas: must be between 1 and 10, got 0"),
        ("field.replicas", "three", "response.replicas: expected an integer"),
        ("field.contact", "not-an-address", "response.contact: not a valid email address"),
        ("field.decision", "maybe", "response.decision: must be one of"),
        ("field.colour", "red", "response.colour: not a field of this question"),
    ] {
        let mut fields = base.to_vec();
        fields.retain(|(name, _)| *name != field);
        fields.push((field, value));
        let reply = no_redirects().post(app.url(&format!("/ui/questions/{id}/answer"))).form(&fields).send().await;
        let reply = reply.unwrap();
        assert_eq!(reply.status(), 400, "{field}={value}");
        assert!(reply.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
        let html = reply.text().await.unwrap();
        assert!(html.contains(says), "{says} in {html}");
    }
    // Nothing ticked for a field that needs one choice: refused by name too.
    let reply = no_redirects()
        .post(app.url(&format!("/ui/questions/{id}/answer")))
        .form(&[
            ("typed", "1"),
            ("field.decision", "approve"),
            ("field.contact", "b@example.com"),
            ("field.replicas", "2"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 400);
    assert!(reply.text().await.unwrap().contains("response.zones: choose 1 to any number, got 0"));
    let stored = question(&app, &id).await;
    assert_eq!(stored["status"], "pending", "a refused answer changes nothing");
    assert!(stored.get("response").is_none());
}

#[tokio::test]
async fn the_page_declines_and_each_card_shows_its_history() {
    let app = TestApp::spawn().await;
    let id = ask(&app, json!({"responseSchema": form()})).await;
    let pending = app.get("/ui").await.text().await.unwrap();
    let history = card(&pending, &id);
    assert!(history.contains(r#"<details class="history"><summary>History (1 step)</summary>"#), "{history}");
    assert!(history.contains(r#"<span class="what">asked</span> by <span class="actor">ark://agents/deployer</span>"#));
    assert!(history.contains(r#"<span class="detail">from Query team/release-9</span>"#), "{history}");

    let declined = no_redirects()
        .post(app.url(&format!("/ui/questions/{id}/decline")))
        // A decline posts the whole form (its button is the form's second submit); only the name and reason count.
        .form(&[("typed", "1"), ("field.replicas", "0"), ("answeredBy", "bob"), ("reason", "not my service")])
        .send()
        .await
        .unwrap();
    assert_eq!(declined.status(), 303);
    assert_eq!(declined.headers()["location"], format!("/ui?declined={id}"));
    let stored = question(&app, &id).await;
    assert_eq!(
        (stored["status"].as_str(), stored["answeredBy"].as_str(), stored["declineReason"].as_str()),
        (Some("declined"), Some("bob"), Some("not my service"))
    );
    let page = app.get(&format!("/ui?declined={id}")).await.text().await.unwrap();
    assert!(page.contains(&format!("Declined {id}.")), "the outcome is said");
    let closed = app.get("/ui?view=closed").await.text().await.unwrap();
    let closed_card = card(&closed, &id);
    assert!(closed_card.contains(r#"<span class="status declined">declined</span> by <span class="by">bob</span>"#));
    assert!(closed_card.contains(r#"<p class="reason">not my service</p>"#) && !closed_card.contains("<form"));
    assert!(closed_card.contains("History (2 steps)"), "{closed_card}");
    assert!(
        closed_card.contains(
            r#"<span class="what">declined</span> by <span class="actor">bob</span> via <span class="via">page</span>: <span class="detail">not my service</span>"#
        ),
        "{closed_card}"
    );
    let fragment = app.get(&format!("/ui/questions/{id}/card")).await.text().await.unwrap();
    assert!(fragment.contains("History (2 steps)"), "the card endpoint shows it too");
    // A second decline is too late, as an answer would be.
    let again = no_redirects().post(app.url(&format!("/ui/questions/{id}/decline"))).form(&[("reason", "")]).send();
    assert_eq!(again.await.unwrap().headers()["location"], format!("/ui?conflict={id}"));
}

/// The page's tokens file, removed when the test ends.
fn tokens_file() -> NamedTempFile {
    temp_file("ark-broker-page-tokens-", "alice-token alice\nbob-token bob\ncarol-token carol\n")
}

#[tokio::test]
async fn under_the_recipient_policy_only_who_may_answer_is_offered_the_form_and_a_forged_post_changes_nothing() {
    let tokens = tokens_file();
    let app = TestApp::spawn_with(|config| {
        config.access.auth = AuthMode::Token;
        config.access.auth_tokens_file = Some(tokens.path().to_path_buf());
        config.access.answer_policy = AnswerPolicy::Recipient;
        config.access.trusted_user_header = Some("x-auth-request-user".into());
    })
    .await;
    let as_who = |token: &str, path: &str| no_redirects().get(app.url(path)).bearer_auth(token).send();
    let body = json!({"sender": "ark://agents/deployer", "recipient": "ark://users/bob", "content": "Deploy?",
                      "responseSchema": form()});
    let asked = app.client.post(app.url("/questions")).bearer_auth("alice-token").json(&body).send().await.unwrap();
    let id = json_of(asked).await.1["id"].as_str().unwrap().to_owned();

    let bob = as_who("bob-token", "/ui").await.unwrap().text().await.unwrap();
    let bob_card = card(&bob, &id).to_owned();
    assert!(bob_card.contains(r#"name="field.decision""#) && bob_card.contains("Answering as <strong>bob</strong>"));
    assert!(!bob_card.contains("may-not-answer"));
    let carol = as_who("carol-token", "/ui").await.unwrap().text().await.unwrap();
    let carol_card = card(&carol, &id);
    assert!(!carol_card.contains("<form"), "no form for who may not answer: {carol_card}");
    assert!(
        carol_card
            .contains("You may not answer this question: carol is not a recipient of this question (ark://users/bob)."),
        "{carol_card}"
    );
    let alice = as_who("alice-token", &format!("/ui/questions/{id}/card")).await.unwrap().text().await.unwrap();
    assert!(alice.contains("alice asked this question and may not answer it") && !alice.contains("<form"));

    // carol posts the form anyway, and declines anyway: refused, recorded, nothing else changed.
    let post = |path: String| {
        no_redirects()
            .post(app.url(&path))
            .bearer_auth("carol-token")
            .form(&[
                ("typed", "1"),
                ("field.decision", "approve"),
                ("field.replicas", "2"),
                ("field.contact", "c@x.io"),
            ])
            .send()
    };
    for action in ["answer", "decline"] {
        let forged = post(format!("/ui/questions/{id}/{action}")).await.unwrap();
        assert_eq!(forged.status(), 303, "{action}");
        assert_eq!(forged.headers()["location"], format!("/ui?forbidden={id}"), "{action}");
    }
    let flash = as_who("carol-token", &format!("/ui?forbidden={id}")).await.unwrap().text().await.unwrap();
    assert!(flash.contains(&format!("You may not answer {id}; nothing was stored.")));
    let stored = app.client.get(app.url(&format!("/questions/{id}"))).bearer_auth("bob-token").send().await.unwrap();
    let stored = json_of(stored).await.1;
    assert_eq!(stored["status"], "pending", "{stored}");
    let bob = as_who("bob-token", "/ui").await.unwrap().text().await.unwrap();
    let history = card(&bob, &id);
    assert!(history.contains("History (3 steps)"), "{history}");
    assert!(history.contains(
        r#"<span class="what">refused an answer</span> by <span class="actor">carol</span> via <span class="via">page</span>: <span class="detail">carol is not a recipient"#
    ));
    assert!(history.contains(r#"<span class="what">asked</span> by <span class="actor">alice</span>"#));

    // bob answers from the page.
    let answered = no_redirects()
        .post(app.url(&format!("/ui/questions/{id}/answer")))
        .bearer_auth("bob-token")
        .form(&[
            ("typed", "1"),
            ("field.decision", "reject"),
            ("field.zones", "a"),
            ("field.replicas", "1"),
            ("field.contact", "b@x.io"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 303, "{:?}", answered.text().await);
    assert_eq!(answered.headers()["location"], format!("/ui?answered={id}"));
    let closed = as_who("carol-token", "/ui?view=closed").await.unwrap().text().await.unwrap();
    let closed_card = card(&closed, &id);
    assert!(!closed_card.contains("<form") && !closed_card.contains("may-not-answer"), "closed: no form, no refusal");
    assert!(closed_card.contains(r#"<span class="by">bob</span>"#));

    // bob, named by the proxy in front of the page (no token), declines another one there.
    let asked = app.client.post(app.url("/questions")).bearer_auth("alice-token").json(&body).send().await.unwrap();
    let other = json_of(asked).await.1["id"].as_str().unwrap().to_owned();
    let declined = no_redirects()
        .post(app.url(&format!("/ui/questions/{other}/decline")))
        .header("x-auth-request-user", "bob")
        .form(&[("reason", "wrong service"), ("answeredBy", "mallory")])
        .send()
        .await
        .unwrap();
    assert_eq!(declined.headers()["location"], format!("/ui?declined={other}"));
    let stored = app.client.get(app.url(&format!("/questions/{other}"))).bearer_auth("bob-token").send().await;
    let stored = json_of(stored.unwrap()).await.1;
    assert_eq!((stored["status"].as_str(), stored["answeredBy"].as_str()), (Some("declined"), Some("bob")));
}

#[tokio::test]
#[ignore = "needs Chromium and Node (tests/browser): ./scripts/test installs them and runs it"]
async fn a_typed_form_is_filled_declined_and_refused_by_name_in_headless_chromium_across_two_replicas() {
    let url = fresh_database().await;
    let (a, b) = tokio::join!(Replica::start(&url), Replica::start(&url));
    let stdout = browser::run_scenario("questions-typed.mjs", &a, &b).await;
    assert!(stdout.contains("5 passed, 0 failed"), "{stdout}");
}
