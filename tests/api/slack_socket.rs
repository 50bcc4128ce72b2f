//! Slack over Socket Mode (`--slack-app-token`), against a strict fake of it: clicks, the modal and thread
//! replies arrive as envelopes and answer through the same code as the HTTP routes, each acknowledged within
//! three seconds; a `refresh_requested` disconnect and a dropped connection are made again (the latter with
//! backoff); and one envelope handed to two replicas' connections acts once, the first answer winning.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{
    Replica,
    fake_channels::{FakeApi, SLACK_TOKEN},
    fake_socket::{ACK_DEADLINE, APP_TOKEN, FakeSocket},
    fresh_database,
    slack::{ask_on_slack, click, event_callback, question, updated},
};

/// A replica on `database` taking Slack over Socket Mode: no signing secret, no route Slack calls.
async fn socket_replica(database: &str, slack: &FakeApi) -> Replica {
    let args = ["--slack-bot-token", SLACK_TOKEN, "--slack-app-token", APP_TOKEN, "--slack-api-url", &slack.url];
    Replica::start_with(database, &args).await
}

/// A person's reply `text` in the thread of `message`.
fn reply(message: &Value, user: &str, text: &str) -> Value {
    json!({"type": "message", "channel": message["channelId"], "user": user, "text": text,
           "ts": "1700000600.000100", "thread_ts": message["ts"], "channel_type": "channel"})
}

/// A metric's value in `replica`'s scrape.
async fn metric(replica: &Replica, series: &str) -> Option<f64> {
    let scrape = reqwest::get(replica.url("/metrics")).await.unwrap().text().await.unwrap();
    scrape.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn a_click_the_modal_and_a_thread_reply_over_socket_mode_answer_and_each_envelope_is_acked_in_time() {
    let (slack, socket) = FakeSocket::start().await;
    let broker = socket_replica(&fresh_database().await, &slack).await;
    socket.greeted(0).await;

    // A button: the question is answered, its message updated.
    let (id, message) = ask_on_slack(&broker, &slack, "Deploy 1.4 to prod?").await;
    let envelope = socket.send(0, "interactive", click(&slack, &message, "U1", "option:0", &format!("{id}|0")));
    let ack = socket.ack(0, &envelope).await;
    assert!(ack.after < ACK_DEADLINE && ack.payload.is_none(), "in time, and a click's carries nothing: {ack:?}");
    let stored = question(&broker, &id).await;
    assert_eq!((stored["response"].as_str(), stored["answeredBy"].as_str()), (Some("Yes, proceed"), Some("slack:U1")));
    let shown = updated(&slack, &message).await["blocks"].to_string();
    assert!(shown.contains("Answered* by <@U1>: Yes, proceed"), "{shown}");

    // "Answer…" opens the modal (its trigger taken within Slack's three seconds); an empty submission gets
    // its field error on the acknowledgement, a real one closes it and answers.
    let (id, message) = ask_on_slack(&broker, &slack, "Anything to add?").await;
    let envelope = socket.send(0, "interactive", click(&slack, &message, "U2", "answer_modal", &id));
    socket.ack(0, &envelope).await;
    let view = slack.wait_for_calls("views.open", 1).await[0]["view"].clone();
    let submit = |text: &str| {
        json!({"type": "view_submission", "user": {"id": "U2"}, "team": {"id": "T1"}, "trigger_id": slack.trigger(),
               "view": {"id": "V0FAKE", "type": "modal", "callback_id": view["callback_id"],
                        "private_metadata": view["private_metadata"],
                        "state": {"values": {"answer": {"text": {"type": "plain_text_input", "value": text}}}}}})
    };
    let envelope = socket.send(0, "interactive", submit("   "));
    let refused = socket.ack(0, &envelope).await.payload.expect("the field error rides on the acknowledgement");
    assert_eq!(refused["response_action"], "errors", "{refused}");
    assert_eq!(question(&broker, &id).await["status"], "pending");
    let envelope = socket.send(0, "interactive", submit("Bump the changelog first."));
    assert_eq!(socket.ack(0, &envelope).await.payload, None, "no payload: the modal closes");
    assert_eq!(question(&broker, &id).await["response"], "Bump the changelog first.");

    // A reply in a question's thread, as an Events API envelope.
    let (id, message) = ask_on_slack(&broker, &slack, "Which region?").await;
    let callback = event_callback("Ev-socket-1", reply(&message, "U3", "eu-west-1"));
    let envelope = socket.send(0, "events_api", callback);
    socket.ack(0, &envelope).await;
    let stored = question(&broker, &id).await;
    assert_eq!((stored["response"].as_str(), stored["answeredBy"].as_str()), (Some("eu-west-1"), Some("slack:U3")));
    updated(&slack, &message).await;

    assert_eq!(slack.calls("chat.update").len(), 3, "each message updated once");
    assert_eq!(socket.failures(), Vec::<String>::new());
    assert_eq!(metric(&broker, "ark_broker_slack_socket_connected").await, Some(1.0));
}

#[tokio::test]
async fn a_refresh_requested_disconnect_is_followed_by_a_new_connection_that_answers() {
    let (slack, socket) = FakeSocket::start().await;
    let broker = socket_replica(&fresh_database().await, &slack).await;
    socket.greeted(0).await;
    let (id, message) = ask_on_slack(&broker, &slack, "Roll back?").await;

    socket.disconnect(0, "refresh_requested");
    socket.greeted(1).await;
    assert!(socket.closed(0).await, "the broker closes the old connection with a close frame");
    let envelope = socket.send(1, "interactive", click(&slack, &message, "U1", "option:1", &format!("{id}|1")));
    socket.ack(1, &envelope).await;
    assert_eq!(question(&broker, &id).await["response"], "No, cancel");
    updated(&slack, &message).await;

    assert_eq!(socket.opens().len(), 2, "one new connection, at once");
    assert_eq!(metric(&broker, "ark_broker_slack_socket_reconnects_total").await, Some(1.0));
    assert!(broker.log().contains("Slack asked for a new Socket Mode connection"), "{}", broker.log());
    assert_eq!(socket.failures(), Vec::<String>::new());
}

#[tokio::test]
async fn a_dropped_connection_is_made_again_with_a_growing_backoff_and_then_answers() {
    let (slack, socket) = FakeSocket::start().await;
    let broker = socket_replica(&fresh_database().await, &slack).await;
    socket.greeted(0).await;
    let (id, message) = ask_on_slack(&broker, &slack, "Scale up?").await;

    // Dropped without a word, and Slack failing the next two opens: waits of at least 0.25 s, 0.5 s, 1 s.
    socket.refuse_opens(2);
    let dropped = Instant::now();
    socket.drop_connection(0);
    socket.greeted(1).await;
    assert!(!socket.closed(0).await, "the fake dropped it");
    let opens = socket.opens();
    assert_eq!(opens.len(), 4, "the first open, two refused, the one that worked");
    let waits = [opens[1] - dropped, opens[2] - opens[1], opens[3] - opens[2]];
    for (wait, least) in waits.iter().zip([250, 500, 1000]) {
        assert!(*wait >= Duration::from_millis(least), "backoff: {waits:?}");
    }

    let envelope = socket.send(1, "interactive", click(&slack, &message, "U1", "option:0", &format!("{id}|0")));
    socket.ack(1, &envelope).await;
    assert_eq!(question(&broker, &id).await["answeredBy"], "slack:U1");
    assert!(broker.log().contains("Slack Socket Mode connection lost"), "{}", broker.log());
    assert_eq!(socket.failures(), Vec::<String>::new());
}

#[tokio::test]
async fn an_envelope_handed_to_two_replicas_connections_acts_once_and_the_first_answer_wins() {
    let (slack, socket) = FakeSocket::start().await;
    let database = fresh_database().await;
    let (a, b, _c) = tokio::join!(
        socket_replica(&database, &slack),
        socket_replica(&database, &slack),
        socket_replica(&database, &slack)
    );
    let live = socket.live(3).await;
    assert_eq!(live.len(), 3, "one connection per replica");

    // One click, handed to two connections at once (as after a refresh): answered once, no one told.
    let (id, message) = ask_on_slack(&a, &slack, "Deploy 2.0?").await;
    let clicked = click(&slack, &message, "U1", "option:0", &format!("{id}|0"));
    socket.send_as(live[0], "envelope-twice", "interactive", clicked.clone());
    socket.send_as(live[1], "envelope-twice", "interactive", clicked);
    tokio::join!(socket.ack(live[0], "envelope-twice"), socket.ack(live[1], "envelope-twice"));
    assert_eq!(question(&b, &id).await["answeredBy"], "slack:U1");
    updated(&slack, &message).await;

    // Two people click on two replicas at once: one wins, the other is told who did.
    let (id, message) = ask_on_slack(&b, &slack, "Which build?").await;
    let first = socket.send(live[1], "interactive", click(&slack, &message, "U2", "option:0", &format!("{id}|0")));
    let second = socket.send(live[2], "interactive", click(&slack, &message, "U3", "option:1", &format!("{id}|1")));
    tokio::join!(socket.ack(live[1], &first), socket.ack(live[2], &second));
    let stored = question(&a, &id).await;
    let (winner, loser) = if stored["answeredBy"] == "slack:U2" { ("U2", "U3") } else { ("U3", "U2") };
    assert_eq!(stored["answeredBy"], format!("slack:{winner}"), "{stored}");
    let told = slack.wait_for_calls(&format!("response_url {loser}"), 1).await;
    assert!(told[0]["text"].as_str().unwrap().starts_with(&format!("Already answered by <@{winner}>")), "{told:?}");
    updated(&slack, &message).await;

    // One thread reply, handed to two connections: acted on once (a second act would tell U4 it came late).
    let (id, message) = ask_on_slack(&a, &slack, "Which region?").await;
    let callback = event_callback("Ev-twice", reply(&message, "U4", "us-east-1"));
    socket.send_as(live[0], "event-twice", "events_api", callback.clone());
    socket.send_as(live[2], "event-twice", "events_api", callback);
    tokio::join!(socket.ack(live[0], "event-twice"), socket.ack(live[2], "event-twice"));
    assert_eq!(question(&b, &id).await["response"], "us-east-1");
    updated(&slack, &message).await;

    assert_eq!(slack.calls("chat.update").len(), 3, "each message updated once");
    assert_eq!(slack.calls("response_url").len(), 1, "only the second clicker was told");
    assert!(slack.calls("chat.postEphemeral").is_empty(), "the reply acted on once");
    assert_eq!(socket.opens().len(), 3, "no replica opened a second connection");
    assert_eq!(socket.failures(), Vec::<String>::new());
}
