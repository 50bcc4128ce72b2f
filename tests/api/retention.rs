//! Bounded tables: the reaper drops finished streams' chunks with their bucket after the stream retention, the question watch
//! log after its window, done (or day-old undone) Query status patches and old inbound delivery ids, and keeps
//! everything younger or still in use; one replica at a time makes a pass.

use serde_json::json;

use crate::{
    memory::reaper,
    support::{SseReader, TestApp, json_of},
};

async fn count(app: &TestApp, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(&app.pool()).await.unwrap()
}

#[tokio::test]
async fn old_log_and_outbox_rows_are_deleted_and_the_rest_kept() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let (_, asked) = json_of(
        app.post_json(
            "/questions",
            &json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "ok?",
                    "query": {"namespace": "ns", "name": "q"}}),
        )
        .await,
    )
    .await;
    let id = asked["id"].as_str().unwrap();
    app.post_json(&format!("/questions/{id}/answer"), &json!({"response": "yes"})).await;
    sqlx::query("update question_events set created_at = now() - interval '2 hours' where kind = 'question_created'")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("update query_status_patches set done_at = now() - interval '2 days', outcome = 'patched' where action = 'wait'")
        .execute(&pool)
        .await
        .unwrap();
    // A patch no replica made for two days (status patching off everywhere): stale, and deleted too.
    let stale = json!({"sender": "ark://agents/a", "recipient": "ark://users/b", "content": "still?",
                       "query": {"namespace": "ns", "name": "q-stale"}});
    app.post_json("/questions", &stale).await;
    sqlx::query("update query_status_patches set created_at = now() - interval '2 days' where query_name = 'q-stale'")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("insert into inbound_deliveries (source, delivery_id, received_at) values ('github', 'old', now() - interval '2 days'), ('github', 'new', now())")
        .execute(&pool)
        .await
        .unwrap();

    let report = reaper(&app).pass().await;
    let deleted = |kind: &str| report.iter().find(|(k, _)| *k == kind).map(|(_, n)| *n).unwrap();
    assert_eq!(deleted("question_events"), 1);
    assert_eq!(
        (deleted("status_patches"), deleted("inbound_deliveries")),
        (1 + 1, 1),
        "the done one and the stale one"
    );

    assert_eq!(
        count(&app, "select count(*) from question_events").await,
        2,
        "the answer's change and the later ask are kept"
    );
    assert_eq!(count(&app, "select count(*) from query_status_patches").await, 1, "the recent resume is kept");
    assert_eq!(count(&app, "select count(*) from inbound_deliveries").await, 1);
    // Nothing left to delete: a second pass deletes nothing.
    assert!(reaper(&app).pass().await.iter().all(|(_, n)| *n == 0));
}

#[tokio::test]
async fn a_finished_stream_goes_with_its_bucket_and_an_open_one_is_read_whole_after_its_rows_are_carried() {
    let app = TestApp::spawn().await;
    for stream in ["done", "recent", "open"] {
        let (status, _) = json_of(app.post_raw(&format!("/stream/{stream}"), "{\"n\":1}\n{\"n\":2}\n").await).await;
        assert_eq!(status, 200);
    }
    for stream in ["done", "recent"] {
        app.post_json(&format!("/stream/{stream}/complete"), &json!({})).await;
    }
    assert_eq!(reaper(&app).pass().await.iter().find(|(k, _)| *k == "streams").unwrap().1, 0, "nothing due yet");
    // As if the retention (an hour) and the grace had passed since the end of the bucket the chunks are in;
    // `recent` finished just then.
    let seconds: i64 = sqlx::query_scalar(
        "select (extract(epoch from b.upper_bound - now()))::bigint + 3600 + 300 + 5
         from chunks c join partition_buckets b on b.partition = c.tableoid::regclass::text
         where c.stream_id = 'done' limit 1",
    )
    .fetch_one(&app.pool())
    .await
    .unwrap();
    sqlx::query("update streams set completed_at = now() + make_interval(secs => $1) where stream_id = 'recent'")
        .bind(seconds as f64)
        .execute(&app.pool())
        .await
        .unwrap();
    let report = crate::memory::reaper_as_if_later(&app, seconds).pass().await;
    let deleted = report.iter().find(|(k, _)| *k == "streams").map(|(_, n)| *n).unwrap();
    assert_eq!(deleted, 3 + 1, "the finished stream's two chunks and its completion marker, whole, and the stream");
    assert_eq!(count(&app, "select count(*) from chunks where stream_id = 'done'").await, 0);
    assert_eq!(count(&app, "select count(*) from streams where stream_id = 'done'").await, 0);
    assert_eq!(
        count(&app, "select count(*) from chunks where stream_id in ('recent', 'open') and lane = 1").await,
        3 + 2,
        "the streams not yet due were carried out of the bucket first"
    );
    // Read as before: the finished one from the beginning, the open one live after its carried rows.
    let client = reqwest::Client::new();
    let mut recent = SseReader::open(&client, &app.url("/stream/recent?from-beginning=true")).await;
    assert_eq!(recent.take_data(3).await, ["{\"n\":1}", "{\"n\":2}", "[DONE]"]);
    let mut open = SseReader::open(&client, &app.url("/stream/open?from-beginning=true")).await;
    assert_eq!(open.take_data(2).await, ["{\"n\":1}", "{\"n\":2}"]);
    let (status, _) = json_of(app.post_raw("/stream/open", "{\"n\":3}\n").await).await;
    assert_eq!(status, 200);
    assert_eq!(open.take_data(1).await, ["{\"n\":3}"], "and goes on where it was");
    // A deleted stream is unknown again; one written anew starts over.
    let (status, _) = json_of(app.post_raw("/stream/done", "{\"n\":3}\n").await).await;
    assert_eq!(status, 200);
    assert_eq!(count(&app, "select max(position) from chunks where stream_id = 'done'").await, 1);
}

#[tokio::test]
async fn a_reaper_pass_takes_the_kinds_in_the_order_the_readme_lists_them() {
    let app = TestApp::spawn().await;
    let report = reaper(&app).pass().await;
    let kinds: Vec<&str> = report.iter().map(|(kind, _)| *kind).collect();
    assert_eq!(
        kinds,
        crate::observability::reaper_kinds_on_the_operating_page(),
        "the registry's duties, in its order"
    );
}

#[tokio::test]
async fn one_replica_at_a_time_makes_a_pass() {
    let app = TestApp::spawn().await;
    let held = ark_broker::db::turn::try_take(&app.state.pool, ark_broker::db::turn::REAPER).await.unwrap();
    let held = held.expect("the turn is free at first");
    assert!(reaper(&app).pass_if_our_turn().await.is_none(), "another holder: this replica skips its pass");
    held.end().await;
    assert!(reaper(&app).pass_if_our_turn().await.is_some(), "the turn is free once its holder ended it");
    assert!(reaper(&app).pass_if_our_turn().await.is_some(), "and after each pass");
}
