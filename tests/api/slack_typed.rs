//! Typed questions in Slack, across three broker processes and the strict fake Slack (Block Kit and
//! `views.open` checked as Slack checks them): one choice field is a button per choice; a few choice fields
//! are selects and checkboxes in the message, answered by Submit from `state.values`, two people racing on two
//! replicas; anything else is a modal of inputs whose field errors name the field and whose answer closes it,
//! over the interactivity route and over Socket Mode; "Decline" declines.

use serde_json::{Value, json};

use crate::support::{
    Replica,
    fake_channels::{FakeApi, SLACK_TOKEN},
    fake_socket::{APP_TOKEN, FakeSocket},
    fresh_database,
    slack::{
        ask_typed_on_slack, block_of, click, interaction, option_of, question, submission, submit, three_replicas,
        updated,
    },
};

/// The message's buttons, by their text.
fn buttons(message: &Value) -> Vec<String> {
    let actions = message["blocks"].as_array().unwrap().iter().rfind(|b| b["type"] == "actions").unwrap();
    actions["elements"].as_array().unwrap().iter().map(|b| b["text"]["text"].as_str().unwrap().to_owned()).collect()
}

/// A form the modal takes: a choice, a bounded integer with a default, free text and a boolean.
fn release_form() -> Value {
    json!({"type": "object", "required": ["decision", "replicas"], "properties": {
        "decision": {"type": "string", "title": "Decision",
                     "oneOf": [{"const": "approve", "title": "Approve"}, {"const": "reject", "title": "Reject"}]},
        "replicas": {"type": "integer", "title": "Replicas", "minimum": 1, "maximum": 10, "default": 3},
        "note": {"type": "string", "title": "Note", "maxLength": 200},
        "notify": {"type": "boolean", "title": "Notify the team"}}})
}

#[tokio::test]
async fn one_choice_field_is_a_button_per_choice_and_decline_declines() {
    let slack = FakeApi::slack().await;
    let (a, b, c) = three_replicas(&slack).await;
    let form = json!({"type": "object", "required": ["decision"], "properties": {"decision": {"type": "string",
        "oneOf": [{"const": "approve", "title": "Approve it"}, {"const": "reject", "title": "Reject it"}]}}});
    let (id, message) = ask_typed_on_slack(&a, &slack, "Release 2.0?", form.clone()).await;
    assert_eq!(buttons(&message), ["Approve it", "Reject it", "Decline"], "each choice by its title");
    let (status, body) = interaction(&b, &click(&slack, &message, "U1", "option:1", &format!("{id}|1"))).await;
    assert_eq!((status, body["outcome"].as_str()), (200, Some("answered")), "{body}");
    let stored = question(&c, &id).await;
    assert_eq!(
        (&stored["response"], stored["answeredBy"].as_str()),
        (&json!({"decision": "reject"}), Some("slack:U1"))
    );
    assert!(updated(&slack, &message).await["blocks"].to_string().contains("Answered* by <@U1>"));

    let (id, message) = ask_typed_on_slack(&a, &slack, "Release 2.1?", form).await;
    let (_, body) = interaction(&c, &click(&slack, &message, "U5", "decline", &id)).await;
    assert_eq!(body["outcome"], "declined", "{body}");
    let stored = question(&a, &id).await;
    assert_eq!((stored["status"].as_str(), stored["answeredBy"].as_str()), (Some("declined"), Some("slack:U5")));
    let shown = updated(&slack, &message).await["blocks"].to_string();
    assert!(shown.contains("Declined* by <@U5>") && !shown.contains("\"actions\""), "{shown}");
    // A click after it was declined is told so, only to the one who clicked.
    let (_, body) = interaction(&b, &click(&slack, &message, "U6", "option:0", &format!("{id}|0"))).await;
    assert_eq!(body["outcome"], "already closed");
    let told = slack.wait_for_calls("response_url U6", 1).await;
    assert!(told[0]["text"].as_str().unwrap().contains("Declined* by <@U5>"), "{told:?}");
    assert_eq!(slack.calls("refused"), Vec::<Value>::new(), "Slack took every message as sent");
}

#[tokio::test]
async fn a_form_of_choices_is_answered_in_the_message_by_submit_and_the_first_of_two_submits_wins() {
    let slack = FakeApi::slack().await;
    let (a, b, c) = three_replicas(&slack).await;
    let form = json!({"type": "object", "required": ["env"], "properties": {
        "env": {"type": "string", "title": "Environment", "enum": ["dev", "staging", "prod"]},
        "regions": {"type": "array", "title": "Regions", "items": {"type": "string", "enum": ["eu", "us", "ap"]}}}});
    let (id, message) = ask_typed_on_slack(&a, &slack, "Where to?", form).await;
    let blocks = &message["blocks"];
    let (env, regions) = (block_of(blocks, "Environment"), block_of(blocks, "Regions"));
    let accessory =
        |block: &str| blocks.as_array().unwrap().iter().find(|b| b["block_id"] == block).unwrap()["accessory"].clone();
    assert_eq!(
        (accessory(&env)["type"].as_str(), accessory(&regions)["type"].as_str()),
        (Some("static_select"), Some("checkboxes"))
    );
    assert_eq!(buttons(&message), ["Submit", "Decline"]);

    // Picking in a select sends its own block_actions: acknowledged, nothing answered.
    let mut picked = click(&slack, &message, "U1", "field", "");
    picked["actions"] = json!([{"type": "static_select", "action_id": "field", "block_id": env,
                                "selected_option": option_of(blocks, &env, "prod"), "action_ts": "1700000001.1"}]);
    assert_eq!(interaction(&b, &picked).await.1["outcome"], "ignored");

    // Submit without the required field: the clicker is told which field, and nothing is stored.
    let values = |environment: Value| {
        json!({env.clone(): {"field": {"type": "static_select", "selected_option": environment}},
               regions.clone(): {"field": {"type": "checkboxes", "selected_options": [option_of(blocks, &regions, "eu"), option_of(blocks, &regions, "ap")]}}})
    };
    let (_, body) = interaction(&b, &submit(&slack, &message, "U1", &id, values(Value::Null))).await;
    assert_eq!(body["outcome"], "refused", "{body}");
    let told = slack.wait_for_calls("response_url U1", 1).await;
    assert_eq!(told[0]["text"], "Not taken as an answer: response.env: required");
    assert_eq!(question(&c, &id).await["status"], "pending");

    // Two people submit on two replicas at once: one answer is stored, the other person is told whose.
    let by_u2 = submit(&slack, &message, "U2", &id, values(option_of(blocks, &env, "prod")));
    let by_u3 = submit(&slack, &message, "U3", &id, values(option_of(blocks, &env, "staging")));
    let (first, second) = tokio::join!(interaction(&a, &by_u2), interaction(&b, &by_u3));
    let outcomes = [first.1["outcome"].as_str().unwrap(), second.1["outcome"].as_str().unwrap()];
    let stored = question(&c, &id).await;
    let (winner, loser, env_won) = match outcomes {
        ["answered", "already closed"] => ("U2", "U3", "prod"),
        ["already closed", "answered"] => ("U3", "U2", "staging"),
        other => panic!("one answers, one is too late: {other:?}"),
    };
    assert_eq!(stored["response"], json!({"env": env_won, "regions": ["eu", "ap"]}), "{stored}");
    assert_eq!(stored["answeredBy"], format!("slack:{winner}"));
    let told = slack.wait_for_calls(&format!("response_url {loser}"), 1).await;
    assert!(told[0]["text"].as_str().unwrap().starts_with(&format!("Already answered by <@{winner}>")), "{told:?}");
    let shown = updated(&slack, &message).await["blocks"].to_string();
    assert!(shown.contains(&format!("Answered* by <@{winner}>")) && !shown.contains("static_select"), "{shown}");
    assert_eq!(slack.calls("chat.update").len(), 1, "updated once");
    assert_eq!(slack.calls("refused"), Vec::<Value>::new());
}

/// The inputs of the release form's modal, at the values given (`None`: left empty).
fn release_values(view: &Value, decision: Option<&str>, replicas: Option<&str>, notify: bool) -> Value {
    let blocks = &view["blocks"];
    let decision = decision.map_or(Value::Null, |title| option_of(blocks, &block_of(blocks, "Decision"), title));
    let ticked = match notify {
        true => vec![option_of(blocks, &block_of(blocks, "Notify the team"), "Yes")],
        false => Vec::new(),
    };
    json!({
        block_of(blocks, "Decision"): {"field": {"type": "static_select", "selected_option": decision}},
        block_of(blocks, "Replicas"): {"field": {"type": "number_input", "value": replicas}},
        block_of(blocks, "Note"): {"field": {"type": "plain_text_input", "value": null}},
        block_of(blocks, "Notify the team"): {"field": {"type": "checkboxes", "selected_options": ticked}},
    })
}

#[tokio::test]
async fn a_free_form_opens_a_modal_whose_errors_name_the_field_and_whose_answer_closes_it() {
    let slack = FakeApi::slack().await;
    let (a, b, c) = three_replicas(&slack).await;
    let (id, message) = ask_typed_on_slack(&a, &slack, "Ship release 3?", release_form()).await;
    assert_eq!(buttons(&message), ["Answer…", "Decline"], "a form with free fields is answered in a modal");
    let (_, body) = interaction(&b, &click(&slack, &message, "U1", "answer_modal", &id)).await;
    assert_eq!(body["outcome"], "modal");
    let view = slack.wait_for_calls("views.open", 1).await[0]["view"].clone();
    let blocks = &view["blocks"];
    let input = |label: &str| blocks.as_array().unwrap().iter().find(|b| b["label"]["text"] == label).unwrap().clone();
    assert_eq!(input("Replicas")["element"]["type"], "number_input");
    assert_eq!(
        (input("Replicas")["element"]["min_value"].as_str(), input("Replicas")["element"]["max_value"].as_str()),
        (Some("1"), Some("10"))
    );
    assert_eq!(input("Note")["element"]["max_length"], 200);
    assert_eq!(input("Notify the team")["element"]["type"], "checkboxes");
    assert_eq!(input("Decision")["optional"], false);

    // Each refusal is on the field it names, and stores nothing.
    let (status, body) =
        interaction(&c, &submission(&slack, &view, "U1", release_values(&view, None, Some("2"), false))).await;
    assert_eq!(status, 200);
    assert_eq!(
        body,
        json!({"response_action": "errors", "errors": {block_of(blocks, "Decision"): "decision: required"}})
    );
    let bad = submission(&slack, &view, "U1", release_values(&view, Some("Approve"), Some("0"), false));
    let (_, body) = interaction(&a, &bad).await;
    assert_eq!(body["errors"], json!({block_of(blocks, "Replicas"): "replicas: must be between 1 and 10, got 0"}));
    assert_eq!(question(&b, &id).await["status"], "pending");

    // A good one: an empty 200 closes the modal; the note left empty is left out, the box ticked is true.
    let good = submission(&slack, &view, "U1", release_values(&view, Some("Approve"), Some("4"), true));
    assert_eq!(interaction(&b, &good).await, (200, Value::String(String::new())));
    let stored = question(&c, &id).await;
    assert_eq!(stored["response"], json!({"decision": "approve", "replicas": 4, "notify": true}), "{stored}");
    assert_eq!(stored["answeredBy"], "slack:U1");
    assert!(updated(&slack, &message).await["blocks"].to_string().contains("Answered* by <@U1>"));
    // Someone else's submission, later: the modal says who answered.
    let late = submission(&slack, &view, "U2", release_values(&view, Some("Reject"), None, false));
    let (_, body) = interaction(&a, &late).await;
    let error = body["errors"][block_of(blocks, "Decision")].as_str().unwrap();
    assert!(error.starts_with("Already answered by Slack user U1: "), "{body}");
    assert_eq!(slack.calls("refused"), Vec::<Value>::new(), "Slack took the modal as sent");
}

#[tokio::test]
async fn the_typed_modal_works_the_same_over_socket_mode() {
    let (slack, socket) = FakeSocket::start().await;
    let args = ["--slack-bot-token", SLACK_TOKEN, "--slack-app-token", APP_TOKEN, "--slack-api-url", &slack.url];
    let broker = Replica::start_with(&fresh_database().await, &args).await;
    socket.greeted(0).await;
    let (id, message) = ask_typed_on_slack(&broker, &slack, "Ship release 4?", release_form()).await;
    let envelope = socket.send(0, "interactive", click(&slack, &message, "U7", "answer_modal", &id));
    socket.ack(0, &envelope).await;
    let view = slack.wait_for_calls("views.open", 1).await[0]["view"].clone();

    let bad = submission(&slack, &view, "U7", release_values(&view, Some("Reject"), Some("11"), false));
    let envelope = socket.send(0, "interactive", bad);
    let refused = socket.ack(0, &envelope).await.payload.expect("the field error rides on the acknowledgement");
    let replicas = block_of(&view["blocks"], "Replicas");
    assert_eq!(
        refused,
        json!({"response_action": "errors", "errors": {replicas: "replicas: must be between 1 and 10, got 11"}})
    );
    assert_eq!(question(&broker, &id).await["status"], "pending");

    let good = submission(&slack, &view, "U7", release_values(&view, Some("Reject"), None, false));
    let envelope = socket.send(0, "interactive", good);
    assert_eq!(socket.ack(0, &envelope).await.payload, None, "no payload: the modal closes");
    let stored = question(&broker, &id).await;
    assert_eq!(
        stored["response"],
        json!({"decision": "reject", "replicas": 3, "notify": false}),
        "the default applies"
    );
    updated(&slack, &message).await;
    assert_eq!(socket.failures(), Vec::<String>::new());
    assert_eq!(slack.calls("refused"), Vec::<Value>::new());
}
