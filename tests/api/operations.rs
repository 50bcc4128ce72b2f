//! Cross-cutting behaviour: the index at `/`, health and readiness, request ids, CORS, body limits, unknown
//! routes, shutdown, and recovery when the LISTEN connection is killed.

use serde_json::{Value, json};

use crate::support::{SseReader, TestApp, within};

#[tokio::test]
async fn the_index_links_to_the_page_the_openapi_document_the_probes_and_the_metrics() {
    let app = TestApp::spawn().await;
    let response = app.get("/").await;
    assert_eq!(response.status(), 200);
    let index: Value = response.json().await.unwrap();
    assert_eq!(
        (index["name"].as_str(), index["version"].as_str()),
        (Some("ark-broker"), Some(env!("CARGO_PKG_VERSION")))
    );
    let links = index["links"].as_object().expect("links");
    let paths: Vec<&str> = links.values().map(|path| path.as_str().unwrap()).collect();
    assert_eq!(paths, ["/ui", "/openapi.json", "/health", "/readyz", "/metrics"], "{index}");
    for path in &paths {
        assert_eq!(app.get(path).await.status(), 200, "{path} answers");
    }

    let page = app.client.get(app.url("/")).header("accept", "text/html,application/xhtml+xml,*/*;q=0.8").send().await;
    let page = page.unwrap();
    assert!(page.headers()["content-type"].to_str().unwrap().starts_with("text/html"));
    let html = page.text().await.unwrap();
    for path in paths {
        assert!(html.contains(&format!("href=\"{path}\"")), "the page links {path}:\n{html}");
    }
}

#[tokio::test]
async fn health_and_readiness_answer_ok_in_plain_text() {
    let app = TestApp::spawn().await;
    for path in ["/health", "/readyz"] {
        let response = app.get(path).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(response.text().await.unwrap(), "OK", "{path}");
    }
}

#[tokio::test]
async fn request_ids_are_echoed_or_generated_and_appear_in_error_bodies() {
    let app = TestApp::spawn().await;
    let response = app.client.get(app.url("/nowhere")).header("x-request-id", "req-123").send().await.unwrap();
    assert_eq!(response.status(), 404);
    assert_eq!(response.headers()["x-request-id"], "req-123");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"error": {"code": "NOT_FOUND", "message": "Not found", "requestId": "req-123", "type": "not_found_error"}})
    );

    let response = app.get("/health").await;
    let generated = response.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&generated).is_ok(), "a UUID is generated: {generated}");
}

#[tokio::test]
async fn cors_is_off_by_default_and_answers_only_the_allowed_origins() {
    let preflight = |app: &TestApp, origin: &str| {
        app.client
            .request(reqwest::Method::OPTIONS, app.url("/messages"))
            .header("origin", origin.to_owned())
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let closed = TestApp::spawn().await;
    let response = preflight(&closed, "https://dashboard.example").await.unwrap();
    assert!(response.headers().get("access-control-allow-origin").is_none(), "no CORS unless configured");

    let open =
        TestApp::spawn_with(|config| config.cors_allowed_origins = vec!["https://dashboard.example".into()]).await;
    let response = preflight(&open, "https://dashboard.example").await.unwrap();
    assert!(response.status().is_success());
    assert_eq!(response.headers()["access-control-allow-origin"], "https://dashboard.example");
    assert!(response.headers()["access-control-allow-methods"].to_str().unwrap().contains("POST"));
    let other = preflight(&open, "https://evil.example").await.unwrap();
    assert!(other.headers().get("access-control-allow-origin").is_none());
    // The allowed origin may also change state from its pages.
    let body = json!({"conversation_id":"c","query_id":"q","messages":[{"role":"user","content":"hi"}]});
    let posted = open.client.post(open.url("/messages")).header("origin", "https://dashboard.example").json(&body);
    assert_eq!(posted.send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_in_the_error_body() {
    let app = TestApp::spawn_with(|config| config.max_body_bytes = 1024).await;
    let big = json!({"conversation_id": "c", "query_id": "q", "messages": ["x".repeat(4096)]});
    let response = app.post_json("/messages", &big).await;
    assert_eq!(response.status(), 413);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "REQUEST_ERROR");
    assert!(body["error"]["requestId"].is_string());
}

#[tokio::test]
async fn wrong_methods_get_the_error_body_too() {
    let app = TestApp::spawn().await;
    let response = app.client.put(app.url("/messages")).send().await.unwrap();
    assert_eq!(response.status(), 405);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "REQUEST_ERROR");
}

#[tokio::test]
async fn shutdown_fails_readiness_ends_sse_with_a_retry_hint_and_returns() {
    let app = TestApp::spawn().await;
    let mut watch = SseReader::open(&app.client, &app.url("/messages?watch=true")).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some(": connected"));
    let mut reader = SseReader::open(&app.client, &app.url("/stream/never-written")).await;
    let token = app.state.shutdown.clone();
    let server = tokio::spawn(app.shut_down());
    within("the shutdown to start", token.cancelled()).await;
    assert_eq!(watch.next_frame().await.as_deref(), Some("retry: 1000"));
    assert_eq!(watch.next_frame().await, None);
    assert_eq!(reader.next_frame().await.as_deref(), Some("retry: 1000"));
    assert_eq!(reader.next_frame().await, None);
    within("serve to return", server).await.unwrap().expect("a clean shutdown");
}

#[tokio::test]
async fn readiness_fails_once_shutdown_begins() {
    use tower::ServiceExt;
    let app = TestApp::spawn().await;
    let router = ark_broker::app::app(app.state.clone());
    let request = || axum::http::Request::get("/readyz").body(axum::body::Body::empty()).unwrap();
    assert_eq!(router.clone().oneshot(request()).await.unwrap().status(), 200);
    app.state.shutdown.cancel();
    let response = router.oneshot(request()).await.unwrap();
    assert_eq!(response.status(), 503);
    let body = axum::body::to_bytes(response.into_body(), 1024).await.unwrap();
    assert_eq!(&body[..], b"Service Unavailable", "plain text, as upstream");
}

#[tokio::test]
async fn a_reader_gets_every_later_chunk_after_its_listen_connection_is_killed() {
    let app = TestApp::spawn().await;
    let mut reader = SseReader::open(&app.client, &app.url("/stream/q")).await;
    app.post_raw("/stream/q", "{\"n\":1}\n").await;
    assert_eq!(reader.next_data().await.unwrap(), "{\"n\":1}");
    let killed: i64 = sqlx::query_scalar(
        "select count(pg_terminate_backend(pid)) from pg_stat_activity
         where application_name like 'ark-broker-listener %' and datname = current_database()",
    )
    .fetch_one(&app.pool())
    .await
    .unwrap();
    assert_eq!(killed, 1, "exactly one LISTEN connection per replica");
    for n in 2..=5 {
        app.post_raw("/stream/q", format!("{{\"n\":{n}}}\n")).await;
    }
    app.post_json("/stream/q/complete", &json!({})).await;
    assert_eq!(reader.take_data(5).await, ["{\"n\":2}", "{\"n\":3}", "{\"n\":4}", "{\"n\":5}", "[DONE]"]);
    // The listener comes back, and readiness with it.
    within("the listener to reconnect", app.state.listener.wait_up()).await;
    assert_eq!(app.get("/readyz").await.status(), 200);
}

#[tokio::test]
async fn a_broker_older_than_the_schema_still_starts_on_it() {
    // A rollback, or an old pod restarting mid-rollout: the database has a migration this binary lacks.
    let url = crate::support::fresh_database().await;
    ark_broker::db::migrate(&url).await.expect("the schema is made");
    let pool = sqlx::PgPool::connect(&url).await.unwrap();
    sqlx::query(
        "insert into _sqlx_migrations (version, description, success, checksum, execution_time)
         values (99990001, 'from a newer broker', true, '\\x00', 1)",
    )
    .execute(&pool)
    .await
    .unwrap();
    ark_broker::db::migrate(&url).await.expect("migrations it does not know are left alone");
}

/// The role the reporting views are granted to, and whether it may read `questions` in `url`'s database.
async fn reporting_can_read_questions(url: &str) -> Option<bool> {
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let exists: bool =
        sqlx::query_scalar("select exists (select from pg_roles where rolname = 'ark_broker_reporting')")
            .fetch_one(&pool)
            .await
            .unwrap();
    if !exists {
        return None;
    }
    let query = "select has_table_privilege('ark_broker_reporting', 'questions', 'select')";
    Some(sqlx::query_scalar(query).fetch_one(&pool).await.unwrap())
}

#[tokio::test]
async fn a_database_owner_that_cannot_create_roles_migrates_as_cloudnativepgs_app_user() {
    use std::str::FromStr;

    use sqlx::{ConnectOptions, Executor, postgres::PgConnectOptions};

    // A server of the test's own: roles belong to the whole server, and this one starts without the role.
    let (_server, admin_url) = crate::support::OwnServer::start().await;
    let admin = sqlx::PgPool::connect(&admin_url).await.unwrap();
    admin.execute("create role app login password 'app'").await.unwrap();
    let owned_by_app = |database: &str| {
        PgConnectOptions::from_str(&admin_url).unwrap().username("app").password("app").database(database)
    };
    admin.execute("create database first owner app").await.unwrap();
    let first = owned_by_app("first").to_url_lossy().to_string();
    ark_broker::db::migrate(&first)
        .await
        .expect("the owner migrates without CREATEROLE; the reporting role is left out");
    assert_eq!(reporting_can_read_questions(&first).await, None);

    // An administrator makes the role (as the chart's CloudNativePG bootstrap does): the next database's
    // migrations grant to it.
    admin.execute("create role ark_broker_reporting nologin").await.unwrap();
    admin.execute("create database second owner app").await.unwrap();
    let second = owned_by_app("second").to_url_lossy().to_string();
    ark_broker::db::migrate(&second).await.expect("the owner migrates and grants to the existing role");
    assert_eq!(reporting_can_read_questions(&second).await, Some(true));
    ark_broker::db::migrate(&first).await.expect("a database migrated before starts again");
}

#[tokio::test]
async fn a_replica_takes_upstreams_variables_and_warns_where_ours_overrides_one() {
    let url = crate::support::fresh_database().await;
    let env = [
        ("ROW_REAP_INTERVAL_SECONDS", "0"),
        ("SHUTDOWN_DRAIN_TIMEOUT_MS", "2500"),
        ("ARK_BROKER_DB_STATEMENT_TIMEOUT_MS", "20000"),
        ("DATABASE_STATEMENT_TIMEOUT_MS", "30000"),
    ];
    // A reap interval of 0 is upstream's "off": the replica starts (a zero-period timer would panic) and serves.
    let replica = crate::support::Replica::start_with_env(&url, &[], &env).await;
    assert_eq!(reqwest::get(replica.url("/health")).await.unwrap().status(), 200);
    let log = replica.log();
    let lines: Vec<Value> = log.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let taken = |upstream: &str| {
        lines.iter().find(|l| l["message"] == "taking upstream's variable" && l["upstream"] == upstream).cloned()
    };
    assert_eq!(taken("ROW_REAP_INTERVAL_SECONDS").expect("taken")["value"], "0", "{log}");
    let drain = taken("SHUTDOWN_DRAIN_TIMEOUT_MS").expect("taken");
    assert_eq!((drain["flag"].as_str(), drain["value"].as_str()), (Some("--shutdown-timeout-seconds"), Some("3")));
    assert!(taken("DATABASE_STATEMENT_TIMEOUT_MS").is_none(), "ours is set, and wins");
    let ignored = "DATABASE_STATEMENT_TIMEOUT_MS (30000 in --db-statement-timeout-ms's unit) is ignored: \
                   ARK_BROKER_DB_STATEMENT_TIMEOUT_MS is set too and wins (20000)";
    assert!(lines.iter().any(|l| l["level"] == "WARN" && l["message"] == ignored), "{log}");
}
