//! NUL bytes — which Postgres text cannot hold — in ids, query parameters and body fields: always a 400
//! naming the field, never a 500.

use serde_json::{Value, json};

use crate::support::{TestApp, json_of};

#[tokio::test]
async fn nul_in_any_id_parameter_or_field_is_a_400_naming_it() {
    let app = TestApp::spawn().await;
    let asked: Value = app
        .post_json("/questions", &json!({"sender":"ark://agents/a","recipient":"ark://users/d","content":"x"}))
        .await
        .json()
        .await
        .unwrap();
    let id = asked["id"].as_str().unwrap();
    let gets = [
        ("/questions/q-%00", "id"),
        ("/questions?recipient=a%00", "recipient"),
        ("/questions?sender=%00", "sender"),
        ("/messages?conversation_id=a%00", "conversation_id"),
        ("/messages?query_id=%00", "query_id"),
        ("/conversations/a%00", "id"),
        ("/events/a%00", "query_id"),
        ("/events?session_id=%00", "session_id"),
        ("/sessions/a%00", "id"),
        ("/sessions?search=%00", "search"),
        ("/traces/a%00", "id"),
        ("/traces?session_id=%00", "session_id"),
        ("/stream/a%00", "id"),
        ("/queries/a%00/b/state", "query_id"),
    ];
    for (path, field) in gets {
        let (status, body) = json_of(app.get(path).await).await;
        assert_eq!(status, 400, "{path}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(field) && message.contains("NUL"), "{path}: {message}");
    }
    // The page says it as HTML.
    let page = app.get("/ui/queries/a/b%00").await;
    assert_eq!(page.status(), 400);
    let html = page.text().await.unwrap();
    assert!(html.contains("name") && html.contains("NUL") && html.contains("<html"), "{html}");
    let (status, _) = json_of(app.delete("/events/a%00").await).await;
    assert_eq!(status, 400);
    let posts = [
        ("/questions", json!({"sender":"ark://agents/a\u{0}","recipient":"ark://users/d","content":"x"}), "sender"),
        (
            "/questions",
            json!({"sender":"ark://agents/a","recipient":"ark://users/d","content":"x","toolCallId":"c\u{0}"}),
            "toolCallId",
        ),
        (&format!("/questions/{id}/answer") as &str, json!({"response":"a\u{0}"}), "response"),
        (
            "/messages",
            json!({"conversation_id":"c\u{0}","query_id":"q","messages":[{"role":"user","content":"x"}]}),
            "conversation_id",
        ),
        ("/events", json!({"data":{"queryId":"q\u{0}"}}), "data.queryId"),
    ];
    for (path, body, field) in posts {
        let (status, reply) = json_of(app.post_json(path, &body).await).await;
        assert_eq!(status, 400, "{path} {body}: {reply}");
        assert!(reply["error"]["message"].as_str().unwrap().contains(field), "{path}: {reply}");
    }
}

#[tokio::test]
async fn a_typed_stream_event_holding_nul_is_refused_and_the_query_stays_readable() {
    let app = TestApp::spawn().await;
    let question = json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "x",
                          "query": {"namespace": "ns", "name": "nul-q"}, "toolCallId": "tc1"});
    assert_eq!(app.post_json("/questions", &question).await.status(), 201);
    let lines = concat!(
        r#"{"event":"phase_change","data":{"to":"running\u0000x"}}"#,
        "\n",
        r#"{"event":"phase_change","data":{"from":"pending","to":"running","reason":"started"}}"#,
        "\n",
    );
    let (status, body) = json_of(app.post_raw("/stream/nul-q", lines).await).await;
    assert_eq!((status, body["invalid_lines"].as_u64(), body["chunks_stored"].as_u64()), (200, Some(1), Some(1)));
    let (status, state) = json_of(app.get("/queries/ns/nul-q/state").await).await;
    assert_eq!(status, 200, "{state}");
    assert_eq!(app.get("/ui/queries/ns/nul-q").await.status(), 200);
}
