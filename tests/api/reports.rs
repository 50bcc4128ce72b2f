//! The SQL reports of docs/reporting.md: every `-- report:` block runs as the read-only role against
//! questions set up here, and returns what those questions imply.

use std::collections::HashMap;

use serde_json::{Value, json};
use sqlx::{AssertSqlSafe, PgPool};

use crate::support::TestApp;

/// The `-- report: <name>` SQL blocks of the reporting guide, by name.
pub fn documented_reports() -> HashMap<String, String> {
    let guide = include_str!("../../docs/reporting.md");
    let mut reports = HashMap::new();
    for block in guide.split("```sql\n").skip(1) {
        let sql = block.split("```").next().unwrap_or_default();
        if let Some(name) = sql.lines().next().and_then(|line| line.strip_prefix("-- report: ")) {
            reports.insert(name.trim().to_owned(), sql.trim().trim_end_matches(';').to_owned());
        }
    }
    reports
}

async fn seed(pool: &PgPool) {
    let mut connection = pool.acquire().await.unwrap();
    // Ages and answer times are set explicitly so the expected numbers are exact; answers are placed at UTC
    // times of UTC days, as the daily view counts them, whatever the session's time zone.
    sqlx::query(
        "create function pg_temp.utc(days_ago int, at time) returns timestamptz language sql as
         $$ select ((now() at time zone 'UTC')::date - days_ago + at) at time zone 'UTC' $$",
    )
    .execute(&mut *connection)
    .await
    .expect("helper function");
    sqlx::query(
        r#"insert into questions (id, sender, recipient, channels, content, status, response, created_at,
                                  answered_at, closed_at, query_namespace, query_name, resource_version)
           select 'q-' || gen_random_uuid(), sender, recipient, channels, 'question', status,
                  case when status = 'answered' then 'yes' end, created, answered,
                  case when status <> 'pending' then coalesce(answered, created) end, ns, name,
                  nextval('question_versions')
           from (values
             ('ark://agents/a', 'ark://users/dave', '{slack}'::text[], 'pending', now() - interval '2 hours', null::timestamptz, 'team', 'q-1'),
             ('ark://agents/a', 'ark://users/dave', '{}', 'pending', now() - interval '30 minutes', null, null, null),
             ('ark://agents/b', 'ark://teams/ops', '{}', 'pending', now() - interval '10 minutes', null, 'team', 'q-2'),
             ('ark://agents/a', 'ark://users/erin', '{slack}', 'answered', pg_temp.utc(2, '10:00'), pg_temp.utc(2, '10:01'), null, null),
             ('ark://agents/a', 'ark://users/erin', '{slack,github}', 'answered', pg_temp.utc(2, '11:00'), pg_temp.utc(2, '11:03'), null, null),
             ('ark://agents/b', 'ark://users/erin', '{}', 'answered', pg_temp.utc(1, '09:00'), pg_temp.utc(1, '09:10'), null, null),
             ('ark://agents/b', 'ark://users/erin', '{github}', 'expired', now() - interval '3 days', null, null, null),
             ('ark://agents/a', 'ark://users/erin', '{}', 'cancelled', now() - interval '1 day', null, null, null)
           ) as t(sender, recipient, channels, status, created, answered, ns, name)"#,
    )
    .execute(&mut *connection)
    .await
    .expect("seed questions");
}

/// Runs `sql` as the reporting role and returns its rows as JSON objects.
pub async fn run_as_reporting_role(pool: &PgPool, sql: &str) -> Vec<Value> {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query("set local role ark_broker_reporting").execute(&mut *tx).await.unwrap();
    let rows: Vec<Value> = sqlx::query_scalar(AssertSqlSafe(format!("select to_jsonb(r) from ({sql}) r")))
        .fetch_all(&mut *tx)
        .await
        .unwrap_or_else(|e| panic!("report failed: {e}\n{sql}"));
    tx.rollback().await.unwrap();
    rows
}

#[tokio::test]
async fn every_documented_report_runs_as_the_reporting_role_and_returns_what_was_set_up() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    seed(&pool).await;
    let reports = documented_reports();
    assert_eq!(reports.len(), 10, "the guide documents ten reports: {:?}", reports.keys());

    let pending = run_as_reporting_role(&pool, &reports["pending_by_recipient"]).await;
    assert_eq!(pending.len(), 2);
    assert_eq!((pending[0]["recipient"].as_str(), pending[0]["pending"].as_i64()), (Some("ark://users/dave"), Some(2)));
    assert!((119..=121).contains(&pending[0]["oldest_wait_minutes"].as_i64().unwrap()), "{}", pending[0]);
    assert_eq!((pending[1]["recipient"].as_str(), pending[1]["pending"].as_i64()), (Some("ark://teams/ops"), Some(1)));

    let times = run_as_reporting_role(&pool, &reports["answer_times_last_30_days"]).await;
    let summary: Vec<(i64, f64, f64)> = times
        .iter()
        .map(|r| {
            (r["answered"].as_i64().unwrap(), r["p50_seconds"].as_f64().unwrap(), r["p95_seconds"].as_f64().unwrap())
        })
        .collect();
    // Two answers (60 s, 180 s) two days ago, one (600 s) yesterday.
    assert_eq!(summary, [(2, 120.0, 174.0), (1, 600.0, 600.0)]);

    let by_sender = run_as_reporting_role(&pool, &reports["outcomes_by_sender"]).await;
    assert_eq!(
        by_sender,
        [
            json!({"sender": "ark://agents/a", "answered": 2, "expired": 0, "cancelled": 1, "pending": 2, "answered_percent": 100.0}),
            json!({"sender": "ark://agents/b", "answered": 1, "expired": 1, "cancelled": 0, "pending": 1, "answered_percent": 50.0}),
        ]
    );

    let by_channel = run_as_reporting_role(&pool, &reports["outcomes_by_channel"]).await;
    assert_eq!(
        by_channel,
        [
            json!({"channel": "(none)", "answered": 1, "expired": 0, "cancelled": 1, "pending": 2, "total": 4}),
            json!({"channel": "github", "answered": 1, "expired": 1, "cancelled": 0, "pending": 0, "total": 2}),
            json!({"channel": "slack", "answered": 2, "expired": 0, "cancelled": 0, "pending": 1, "total": 3}),
        ]
    );

    let waiting = run_as_reporting_role(&pool, &reports["waiting_queries"]).await;
    let names: Vec<&str> = waiting.iter().map(|r| r["query_name"].as_str().unwrap()).collect();
    assert_eq!(names, ["q-1", "q-2"]);
}

#[tokio::test]
async fn the_event_and_session_reports_count_what_the_controller_posted() {
    let app = TestApp::spawn().await;
    let post = |reason: &'static str, query: &'static str, extra: Value| {
        let body = crate::sessions::controller_event("session-r", query, reason, extra);
        let (client, url) = (app.client.clone(), app.url("/events"));
        async move { assert_eq!(client.post(url).json(&body).send().await.unwrap().status(), 201) }
    };
    post("QueryExecutionStart", "ok", json!({})).await;
    post("LLMCallComplete", "ok", json!({"durationMs": "100"})).await;
    post("LLMCallComplete", "ok", json!({"durationMs": "300.5"})).await;
    post("QueryExecutionComplete", "ok", json!({})).await;
    post("QueryExecutionStart", "bad", json!({})).await;
    post("QueryExecutionComplete", "bad", json!({"error": "model unavailable"})).await;
    let reports = documented_reports();
    let pool = app.pool();

    let reasons = run_as_reporting_role(&pool, &reports["events_per_reason_last_7_days"]).await;
    assert_eq!(
        reasons,
        [
            json!({"reason": "LLMCallComplete", "events": 2, "warnings": 0}),
            json!({"reason": "QueryExecutionComplete", "events": 2, "warnings": 0}),
            json!({"reason": "QueryExecutionStart", "events": 2, "warnings": 0}),
        ]
    );

    let durations = run_as_reporting_role(&pool, &reports["llm_call_durations"]).await;
    assert_eq!(durations.len(), 1);
    assert_eq!((durations[0]["calls"].as_i64(), durations[0]["p50_ms"].as_f64()), (Some(2), Some(200.3)));

    let failing = run_as_reporting_role(&pool, &reports["error_sessions"]).await;
    assert_eq!(
        failing,
        [
            json!({"session_id": "session-r", "error_count": 1, "failed_queries": ["bad"], "last_error": "model unavailable"})
        ]
    );
}

#[tokio::test]
async fn the_resume_report_lists_the_queries_whose_question_has_an_outcome() {
    let app = TestApp::spawn().await;
    let mut ids = Vec::new();
    for name in ["waits", "answered", "cancelled"] {
        let question = json!({"sender":"ark://agents/a","recipient":"ark://users/dave","content":name,
                              "query":{"namespace":"ns","name":name},"toolCallId":format!("call_{name}")});
        let created: Value = app.post_json("/questions", &question).await.json().await.unwrap();
        ids.push(created["id"].as_str().unwrap().to_owned());
    }
    app.post_json(&format!("/questions/{}/answer", ids[1]), &json!({"response": "yes"})).await;
    app.delete(&format!("/questions/{}", ids[2])).await;
    let resumable = run_as_reporting_role(&app.pool(), &documented_reports()["resumable_queries"]).await;
    assert_eq!(
        resumable,
        [
            json!({"namespace":"ns","name":"answered","question_status":"answered","task_id":null,"tool_call_id":"call_answered"}),
            json!({"namespace":"ns","name":"cancelled","question_status":"cancelled","task_id":null,"tool_call_id":"call_cancelled"}),
        ]
    );
}

#[tokio::test]
async fn the_reporting_role_cannot_write() {
    let app = TestApp::spawn().await;
    let mut tx = app.pool().begin().await.unwrap();
    sqlx::query("set local role ark_broker_reporting").execute(&mut *tx).await.unwrap();
    let denied = sqlx::query("delete from questions").execute(&mut *tx).await.unwrap_err();
    assert!(denied.to_string().contains("permission denied"), "{denied}");
}
